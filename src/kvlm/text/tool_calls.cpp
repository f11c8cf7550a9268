#include "kvlm/text/tool_calls.h"

#include <cstdio>
#include <optional>

#include "kvlm/text/reasoning.h"

namespace kvlm {

namespace {

using OJson = nlohmann::ordered_json;

std::string trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::optional<OJson> parse_ordered(std::string_view text) {
  OJson j = OJson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Ids are derived from the call itself (not random) so that the same output always yields the
// same response.
std::string make_id(const std::string& name, const std::string& args, size_t index) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  };
  mix(name);
  mix("\x1f");
  mix(args);
  mix(std::to_string(index));
  char buf[32];
  std::snprintf(buf, sizeof buf, "call_%016llx", (unsigned long long)h);
  return buf;
}

class Parser {
 public:
  Parser(const Json* tools) : tools_(tools) {}

  ParsedOutput run(std::string_view text) {
    ParsedOutput out;
    auto [reasoning, content] = split_reasoning(text);
    out.reasoning = std::move(reasoning);
    if (!try_tagged(content, out) && !try_mistral(content, out) && !try_llama(content, out))
      out.content = content;
    for (size_t i = 0; i < out.tool_calls.size(); ++i) {
      ToolCall& c = out.tool_calls[i];
      if (c.id.empty()) c.id = make_id(c.name, c.arguments_json, i);
    }
    return out;
  }

 private:
  const Json* tools_;

  // The schema of a tool's parameters, or null when tools are unknown.
  const Json* find_tool(const std::string& name) const {
    if (!tools_ || !tools_->is_array()) return nullptr;
    for (const Json& t : *tools_) {
      const Json& f = t.contains("function") ? t["function"] : t;
      if (f.is_object() && f.value("name", "") == name) return &f;
    }
    return nullptr;
  }
  bool known(const std::string& name) const { return !tools_ || !tools_->is_array() || find_tool(name); }

  bool param_is_string(const std::string& tool, const std::string& param) const {
    const Json* f = find_tool(tool);
    if (!f || !f->contains("parameters")) return false;
    const Json& props = (*f)["parameters"].value("properties", Json::object());
    if (!props.contains(param)) return false;
    const Json& type = props[param].value("type", Json());
    return type == "string" || (type.is_array() && std::find(type.begin(), type.end(), "string") != type.end());
  }

  // {"name": ..., "arguments"|"parameters": {...} or "..."} to a call.
  std::optional<ToolCall> call_from_json(const OJson& j) const {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
    ToolCall c;
    c.name = j["name"].get<std::string>();
    if (!known(c.name)) return std::nullopt;
    const OJson* args = j.contains("arguments") ? &j["arguments"] : j.contains("parameters") ? &j["parameters"] : nullptr;
    if (!args || args->is_null()) {
      c.arguments_json = "{}";
    } else if (args->is_string()) {
      c.arguments_json = args->get<std::string>();
    } else {
      c.arguments_json = args->dump();
    }
    if (j.contains("id") && j["id"].is_string()) c.id = j["id"].get<std::string>();
    return c;
  }

  // <function=NAME><parameter=P>VALUE</parameter>...</function> (Qwen3-Coder).
  std::optional<ToolCall> call_from_xml(std::string_view body) const {
    std::string s = trim(body);
    const std::string fn_open = "<function=";
    if (s.rfind(fn_open, 0) != 0) return std::nullopt;
    size_t name_end = s.find('>');
    if (name_end == std::string::npos) return std::nullopt;
    ToolCall c;
    c.name = trim(std::string_view(s).substr(fn_open.size(), name_end - fn_open.size()));
    if (c.name.empty() || !known(c.name)) return std::nullopt;
    OJson args = OJson::object();
    size_t pos = name_end + 1;
    while (true) {
      size_t p = s.find("<parameter=", pos);
      if (p == std::string::npos) break;
      size_t pn = s.find('>', p);
      size_t pe = s.find("</parameter>", pn == std::string::npos ? p : pn);
      if (pn == std::string::npos || pe == std::string::npos) return std::nullopt;
      std::string name = trim(std::string_view(s).substr(p + 11, pn - p - 11));
      std::string value = s.substr(pn + 1, pe - pn - 1);
      // The format puts the value on its own line(s); one newline on each side is markup.
      if (!value.empty() && value.front() == '\n') value.erase(0, 1);
      if (!value.empty() && value.back() == '\n') value.pop_back();
      std::optional<OJson> decoded;
      if (!param_is_string(c.name, name)) decoded = parse_ordered(value);
      args[name] = decoded ? *decoded : OJson(value);
      pos = pe + 12;
    }
    if (s.find("</function>", pos) == std::string::npos) return std::nullopt;
    c.arguments_json = args.dump();
    return c;
  }

  std::optional<ToolCall> call_from_body(std::string_view body) const {
    std::string t = trim(body);
    if (!t.empty() && t.front() == '{') {
      auto j = parse_ordered(t);
      return j ? call_from_json(*j) : std::nullopt;
    }
    return call_from_xml(t);
  }

  // <tool_call>...</tool_call> blocks (Hermes/Qwen JSON or Qwen3-Coder XML inside), or bare
  // <function=...>...</function> blocks. The last block may lack its close tag when generation
  // stopped there.
  bool try_tagged(const std::string& text, ParsedOutput& out) const {
    static const std::pair<std::string, std::string> wrappers[] = {{"<tool_call>", "</tool_call>"},
                                                                   {"<function=", "</function>"}};
    for (const auto& [open, close] : wrappers) {
      if (text.find(open) == std::string::npos) continue;
      std::vector<ToolCall> calls;
      std::string content;
      size_t pos = 0;
      bool ok = true;
      while (ok) {
        size_t b = text.find(open, pos);
        if (b == std::string::npos) break;
        content += text.substr(pos, b - pos);
        size_t e = text.find(close, b + open.size());
        bool bare_function = open == "<function=";
        size_t body_start = bare_function ? b : b + open.size();
        size_t body_end = e == std::string::npos ? text.size() : (bare_function ? e + close.size() : e);
        auto call = call_from_body(std::string_view(text).substr(body_start, body_end - body_start));
        if (!call) ok = false;
        else calls.push_back(std::move(*call));
        pos = e == std::string::npos ? text.size() : e + close.size();
      }
      if (!ok || calls.empty()) continue;
      content += text.substr(std::min(pos, text.size()));
      out.content = trim(content);
      out.tool_calls = std::move(calls);
      return true;
    }
    return false;
  }

  // [TOOL_CALLS][{...}, ...]  or  [TOOL_CALLS]name[ARGS]{...} (optionally [CALL_ID]id before
  // [ARGS]), repeated.
  bool try_mistral(const std::string& text, ParsedOutput& out) const {
    const std::string marker = "[TOOL_CALLS]";
    size_t m = text.find(marker);
    if (m == std::string::npos) return false;
    std::string rest = trim(std::string_view(text).substr(m + marker.size()));
    std::vector<ToolCall> calls;
    if (!rest.empty() && rest.front() == '[') {
      auto j = parse_ordered(rest);
      if (!j || !j->is_array() || j->empty()) return false;
      for (const OJson& item : *j) {
        auto c = call_from_json(item);
        if (!c) return false;
        calls.push_back(std::move(*c));
      }
    } else {
      size_t pos = 0;
      std::string_view r = rest;
      while (pos < r.size()) {
        size_t args = r.find("[ARGS]", pos);
        if (args == std::string_view::npos) return false;
        ToolCall c;
        std::string head(r.substr(pos, args - pos));
        size_t id = head.find("[CALL_ID]");
        if (id != std::string::npos) {
          c.id = trim(std::string_view(head).substr(id + 9));
          head = head.substr(0, id);
        }
        c.name = trim(head);
        if (c.name.empty() || !known(c.name)) return false;
        // The JSON object runs to the next [TOOL_CALLS] or the end.
        size_t next = r.find(marker, args + 6);
        std::string_view body = r.substr(args + 6, next == std::string_view::npos ? std::string_view::npos : next - args - 6);
        auto j = parse_ordered(trim(body));
        if (!j) return false;
        c.arguments_json = j->dump();
        calls.push_back(std::move(c));
        pos = next == std::string_view::npos ? r.size() : next + marker.size();
      }
    }
    out.content = trim(std::string_view(text).substr(0, m));
    out.tool_calls = std::move(calls);
    return true;
  }

  // Llama 3: the whole output is {"name": ..., "parameters": {...}} (several separated by ';'),
  // optionally after <|python_tag|>.
  bool try_llama(const std::string& text, ParsedOutput& out) const {
    const std::string tag = "<|python_tag|>";
    size_t t = text.find(tag);
    std::string before = t == std::string::npos ? "" : trim(std::string_view(text).substr(0, t));
    std::string body = trim(t == std::string::npos ? std::string_view(text) : std::string_view(text).substr(t + tag.size()));
    if (body.empty() || body.front() != '{') return false;
    std::vector<ToolCall> calls;
    auto whole = parse_ordered(body);
    if (whole) {
      auto c = call_from_json(*whole);
      if (!c) return false;
      calls.push_back(std::move(*c));
    } else {
      size_t start = 0;
      while (start < body.size()) {
        size_t end = body.find(';', start);
        // A ';' may sit inside a string; extend until the piece parses.
        std::optional<OJson> j;
        while (true) {
          std::string_view piece = std::string_view(body).substr(start, end == std::string::npos ? std::string::npos : end - start);
          j = parse_ordered(trim(piece));
          if (j || end == std::string::npos) break;
          end = body.find(';', end + 1);
        }
        if (!j) return false;
        auto c = call_from_json(*j);
        if (!c) return false;
        calls.push_back(std::move(*c));
        start = end == std::string::npos ? body.size() : end + 1;
      }
    }
    out.content = before;
    out.tool_calls = std::move(calls);
    return true;
  }
};

}  // namespace

ParsedOutput parse_tool_calls(std::string_view text) { return Parser(nullptr).run(text); }

ParsedOutput parse_tool_calls(std::string_view text, const Json& tools) { return Parser(&tools).run(text); }

}  // namespace kvlm
