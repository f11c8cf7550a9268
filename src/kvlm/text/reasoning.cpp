#include "kvlm/text/reasoning.h"

namespace kvlm {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

std::string trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::pair<std::string, std::string> split_reasoning(std::string_view text, bool started_inside) {
  size_t close = text.find(kClose);
  size_t open = text.find(kOpen);
  if (close != std::string_view::npos && (open == std::string_view::npos || open > close)) {
    // A lone close tag: the prompt opened the block, so everything before it is reasoning.
    return {trim(text.substr(0, close)), trim(text.substr(close + kClose.size()))};
  }
  if (open == std::string_view::npos) {
    if (started_inside) return {trim(text), ""};
    return {"", trim(text)};
  }
  std::string before(text.substr(0, open));
  size_t body = open + kOpen.size();
  if (close == std::string_view::npos) return {trim(text.substr(body)), trim(before)};
  return {trim(text.substr(body, close - body)), trim(before + std::string(text.substr(close + kClose.size())))};
}

std::pair<std::string, std::string> split_reasoning(std::string_view text) { return split_reasoning(text, false); }

bool prompt_ends_in_open_think(std::string_view prompt) {
  size_t open = prompt.rfind(kOpen);
  if (open == std::string_view::npos) return false;
  for (size_t i = open + kOpen.size(); i < prompt.size(); ++i) {
    char c = prompt[i];
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') return false;
  }
  return true;
}

}  // namespace kvlm
