#include "kvlm/text/added_tokens.h"

#include "kvlm/base/error.h"
#include "kvlm/text/unicode.h"

namespace kvlm::text {

AddedToken parse_added_token(const Json& j, const std::string& origin) {
  AddedToken t;
  t.content = json_get<std::string>(j, "content", origin);
  int64_t id = json_get<int64_t>(j, "id", origin);
  check(id >= 0 && id < (1 << 30), origin + ": added token '" + t.content + "' has invalid id " +
                                       std::to_string(id));
  t.id = static_cast<int32_t>(id);
  t.special = json_get_or<bool>(j, "special", false, origin);
  t.lstrip = json_get_or<bool>(j, "lstrip", false, origin);
  t.rstrip = json_get_or<bool>(j, "rstrip", false, origin);
  t.single_word = json_get_or<bool>(j, "single_word", false, origin);
  t.normalized = json_get_or<bool>(j, "normalized", !t.special, origin);
  return t;
}

TokenMatcher::TokenMatcher(const std::vector<std::string>& patterns) : nodes_(1) {
  for (size_t k = 0; k < patterns.size(); ++k) {
    const std::string& p = patterns[k];
    if (p.empty()) continue;
    first_byte_[static_cast<unsigned char>(p[0])] = true;
    int32_t node = 0;
    for (unsigned char b : p) {
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        edges_.emplace((static_cast<uint64_t>(node) << 8) | b, next);
      }
      node = next;
    }
    // Two tokens with the same pattern: the first one listed wins, as in HF's automaton.
    if (nodes_[static_cast<size_t>(node)].index < 0)
      nodes_[static_cast<size_t>(node)].index = static_cast<int32_t>(k);
  }
}

std::vector<TokenMatcher::Match> TokenMatcher::find_all(std::string_view text) const {
  std::vector<Match> out;
  if (empty()) return out;
  for (size_t i = 0; i < text.size();) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t k = i; k < text.size(); ++k) {
      node = child(node, static_cast<unsigned char>(text[k]));
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].index >= 0)
        best = nodes_[static_cast<size_t>(node)].index, best_end = k + 1;
    }
    if (best >= 0) {
      out.push_back({i, best_end, static_cast<size_t>(best)});
      i = best_end;
    } else {
      ++i;
    }
  }
  return out;
}

namespace {

char32_t last_code_point(std::string_view s) {
  size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  if (i > 0) --i;
  return next_code_point(s, i);
}

char32_t first_code_point(std::string_view s) {
  size_t i = 0;
  return next_code_point(s, i);
}

// Byte offset where the trailing run of whitespace of s begins.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t i = end;
    while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
    if (i > 0) --i;
    size_t j = i;
    if (!is_whitespace(next_code_point(s, j))) break;
    end = i;
  }
  return end;
}

size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_whitespace(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

std::vector<Segment> split_added(std::string_view text, bool at_start, const TokenMatcher& matcher,
                                 const std::vector<const AddedToken*>& tokens) {
  std::vector<Segment> out;
  size_t done = 0;  // end of the last emitted segment
  for (const TokenMatcher::Match& m : matcher.find_all(text)) {
    const AddedToken& tok = *tokens[m.index];
    size_t start = m.start, stop = m.end;
    if (tok.single_word) {
      bool start_ok = start == 0 || !is_word_char(last_code_point(text.substr(0, start)));
      bool stop_ok = stop == text.size() || !is_word_char(first_code_point(text.substr(stop)));
      if (!start_ok || !stop_ok) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), done);
    if (tok.rstrip) stop += leading_space_len(text.substr(stop));
    if (done < start)
      out.push_back({std::string(text.substr(done, start - done)), -1, at_start && done == 0});
    out.push_back({std::string(text.substr(start, stop - start)), tok.id, at_start && start == 0});
    done = stop;
  }
  if (done < text.size())
    out.push_back({std::string(text.substr(done)), -1, at_start && done == 0});
  return out;
}

}  // namespace kvlm::text
