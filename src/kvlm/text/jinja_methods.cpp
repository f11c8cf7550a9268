// Python methods of str, dict and list that jinja2's immutable sandbox lets templates call.
// Mutating methods (list.append, dict.update, ...) are refused there, so they are absent here.
#include <map>

#include "kvlm/text/jinja_interp.h"

namespace kvlm::jinja {
namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs& args);

std::string s_arg(const ArgBinder& b, size_t i, const char* method) {
  const Value& v = b.get(i);
  if (!v.is_string()) throw RenderError(std::string(method) + "() argument must be str, not " + type_name(v));
  return v.str();
}

// Python slice-style optional start/end for find/count/startswith, on code points.
std::string window(const std::string& s, const ArgBinder& b, size_t start_i, size_t& offset) {
  auto cps = utf8_chars(s);
  int64_t n = int64_t(cps.size());
  auto norm = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    int64_t i = as_int(v);
    if (i < 0) i += n;
    return std::clamp<int64_t>(i, 0, n);
  };
  int64_t b0 = norm(b.get(start_i), 0), e0 = norm(b.get(start_i + 1), n);
  std::string out;
  offset = size_t(b0);
  for (int64_t i = b0; i < e0; ++i) out += cps[size_t(i)];
  return out;
}

bool affix_match(const Value& self, CallArgs& a, bool prefix, const char* name) {
  ArgBinder b(name, a, {"prefix", "start", "end"});
  size_t offset;
  std::string s = window(self.str(), b, 1, offset);
  std::vector<Value> options;
  const Value& p = b.get(0);
  if (p.is_list() && p.list().is_tuple) {
    options = p.list().items;
  } else {
    options.push_back(p);
  }
  for (const Value& o : options) {
    if (!o.is_string()) throw RenderError(std::string(name) + " first arg must be str or a tuple of str, not " + type_name(o));
    const std::string& x = o.str();
    if (x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0))
      return true;
  }
  return false;
}

Value m_startswith(Interpreter&, const Value& self, CallArgs& a) { return Value(affix_match(self, a, true, "startswith")); }
Value m_endswith(Interpreter&, const Value& self, CallArgs& a) { return Value(affix_match(self, a, false, "endswith")); }

Value strip_method(const Value& self, CallArgs& a, bool left, bool right, const char* name) {
  ArgBinder b(name, a, {"chars"});
  return Value(py_strip(self.str(), left, right, b.get(0)));
}
Value m_strip(Interpreter&, const Value& self, CallArgs& a) { return strip_method(self, a, true, true, "strip"); }
Value m_lstrip(Interpreter&, const Value& self, CallArgs& a) { return strip_method(self, a, true, false, "lstrip"); }
Value m_rstrip(Interpreter&, const Value& self, CallArgs& a) { return strip_method(self, a, false, true, "rstrip"); }

bool is_ws_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

Value split_method(const Value& self, CallArgs& a, bool from_right) {
  ArgBinder b(from_right ? "rsplit" : "split", a, {"sep", "maxsplit"});
  const std::string& s = self.str();
  int64_t maxsplit = b.has(1) ? as_int(b.get(1)) : -1;
  std::vector<std::string> parts;
  if (b.get(0).is_undefined() || b.get(0).is_none()) {
    // Runs of whitespace, no empty parts.
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_ws_byte(s[i])) ++i;
      if (i >= s.size()) break;
      size_t st = i;
      while (i < s.size() && !is_ws_byte(s[i])) ++i;
      words.emplace_back(st, i);
    }
    if (maxsplit < 0 || int64_t(words.size()) <= maxsplit + 1) {
      for (auto [st, en] : words) parts.push_back(s.substr(st, en - st));
    } else if (!from_right) {
      for (int64_t k = 0; k < maxsplit; ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
      std::string rest = s.substr(words[size_t(maxsplit)].first);
      while (!rest.empty() && is_ws_byte(rest.back())) rest.pop_back();
      parts.push_back(rest);
    } else {
      size_t keep = words.size() - size_t(maxsplit);
      std::string head = s.substr(0, words[keep - 1].second);
      size_t h = 0;
      while (h < head.size() && is_ws_byte(head[h])) ++h;
      parts.push_back(head.substr(h));
      for (size_t k = keep; k < words.size(); ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
  } else {
    std::string sep = s_arg(b, 0, "split");
    if (sep.empty()) throw RenderError("empty separator");
    if (!from_right) {
      size_t pos = 0;
      int64_t done = 0;
      while (maxsplit < 0 || done < maxsplit) {
        size_t hit = s.find(sep, pos);
        if (hit == std::string::npos) break;
        parts.push_back(s.substr(pos, hit - pos));
        pos = hit + sep.size();
        ++done;
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      int64_t done = 0;
      std::vector<std::string> rev;
      while ((maxsplit < 0 || done < maxsplit) && end >= sep.size()) {
        size_t hit = s.rfind(sep, end - sep.size());
        if (hit == std::string::npos) break;
        rev.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
        end = hit;
        ++done;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  List l;
  for (auto& p : parts) l.items.emplace_back(std::move(p));
  return Value(std::move(l));
}
Value m_split(Interpreter&, const Value& self, CallArgs& a) { return split_method(self, a, false); }
Value m_rsplit(Interpreter&, const Value& self, CallArgs& a) { return split_method(self, a, true); }

Value m_splitlines(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("splitlines", a, {"keepends"});
  List l;
  std::string cur;
  const std::string& s = self.str();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') {
      cur += s[i];
      continue;
    }
    std::string end(1, s[i]);
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') end += s[++i];
    l.items.emplace_back(truthy(b.get(0)) ? cur + end : cur);
    cur.clear();
  }
  if (!cur.empty()) l.items.emplace_back(cur);
  return Value(std::move(l));
}

Value m_replace(Interpreter& in, const Value& self, CallArgs& a) {
  ArgBinder b("replace", a, {"old", "new", "count"});
  std::string out = py_replace(self.str(), s_arg(b, 0, "replace"), s_arg(b, 1, "replace"), b.has(2) ? as_int(b.get(2)) : -1);
  in.check_size(out.size());
  return Value(std::move(out));
}

Value m_upper(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("upper", a, {});
  return Value(py_upper(self.str()));
}
Value m_lower(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("lower", a, {});
  return Value(py_lower(self.str()));
}

// str.title(): a letter after a non-letter starts a word.
Value m_title(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("title", a, {});
  std::string out;
  bool prev_cased = false;
  for (const auto& c : utf8_chars(self.str())) {
    bool cased = py_upper(c) != py_lower(c);
    out += cased ? (prev_cased ? py_lower(c) : py_upper(c)) : c;
    prev_cased = cased;
  }
  return Value(std::move(out));
}

Value m_capitalize(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("capitalize", a, {});
  auto cps = utf8_chars(self.str());
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) out += i == 0 ? py_upper(cps[i]) : py_lower(cps[i]);
  return Value(std::move(out));
}

int64_t find_in(const Value& self, CallArgs& a, bool from_right, const char* name) {
  ArgBinder b(name, a, {"sub", "start", "end"});
  size_t offset;
  std::string s = window(self.str(), b, 1, offset);
  std::string sub = s_arg(b, 0, name);
  size_t hit = from_right ? s.rfind(sub) : s.find(sub);
  if (hit == std::string::npos) return -1;
  return int64_t(offset + utf8_chars(s.substr(0, hit)).size());
}
Value m_find(Interpreter&, const Value& self, CallArgs& a) { return Value(find_in(self, a, false, "find")); }
Value m_rfind(Interpreter&, const Value& self, CallArgs& a) { return Value(find_in(self, a, true, "rfind")); }

Value m_str_count(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("count", a, {"sub", "start", "end"});
  size_t offset;
  std::string s = window(self.str(), b, 1, offset);
  std::string sub = s_arg(b, 0, "count");
  if (sub.empty()) return Value(int64_t(utf8_chars(s).size() + 1));
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return Value(n);
}

Value m_join(Interpreter& in, const Value& self, CallArgs& a) {
  ArgBinder b("join", a, {"iterable"});
  std::string out;
  bool first = true;
  for (const Value& x : iterate(b.get(0))) {
    if (!x.is_string()) throw RenderError("sequence item: expected str instance, " + type_name(x) + " found");
    if (!first) out += self.str();
    first = false;
    out += x.str();
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

template <bool (*Pred)(unsigned char)>
Value char_class(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("is", a, {});
  const std::string& s = self.str();
  if (s.empty()) return Value(false);
  for (unsigned char c : s)
    if (!Pred(c)) return Value(false);
  return Value(true);
}
bool p_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool p_alpha(unsigned char c) { return std::isalpha(c) || c >= 0x80; }
bool p_alnum(unsigned char c) { return std::isalnum(c) || c >= 0x80; }
bool p_space(unsigned char c) { return is_ws_byte(char(c)); }

// str.format with {} / {0} / {name} fields (no format specs beyond plain substitution).
Value m_format(Interpreter& in, const Value& self, CallArgs& a) {
  const std::string& f = self.str();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') throw RenderError("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) throw RenderError("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) throw RenderError("unsupported format spec in str.format: '" + field + "'");
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return std::isdigit((unsigned char)d); })) {
      size_t idx = field.empty() ? auto_index++ : size_t(std::atoll(field.c_str()));
      if (idx >= a.positional.size()) throw RenderError("Replacement index " + std::to_string(idx) + " out of range for positional args tuple");
      v = &a.positional[idx];
    } else {
      for (const auto& [k, x] : a.keyword)
        if (k == field) v = &x;
      if (!v) throw RenderError("'" + field + "'");
    }
    out += to_str(*v);
    in.check_size(out.size());
    i = close;
  }
  return Value(std::move(out));
}

Value m_get(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("get", a, {"key", "default"});
  const Value& key = b.get(0);
  const Value* v = key.is_string() ? self.dict().find(key.str()) : nullptr;
  return v ? *v : b.get_or(1, Value(None{}));
}

Value m_items(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("items", a, {});
  List l;
  for (const auto& [k, x] : self.dict().entries()) l.items.push_back(make_tuple({Value(k), x}));
  return Value(std::move(l));
}

Value m_keys(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("keys", a, {});
  List l;
  for (const auto& e : self.dict().entries()) l.items.emplace_back(e.first);
  return Value(std::move(l));
}

Value m_values(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("values", a, {});
  List l;
  for (const auto& e : self.dict().entries()) l.items.push_back(e.second);
  return Value(std::move(l));
}

Value m_list_index(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("index", a, {"value"});
  const auto& items = self.list().items;
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], b.get(0))) return Value(int64_t(i));
  throw RenderError(repr(b.get(0)) + " is not in list");
}

Value m_list_count(Interpreter&, const Value& self, CallArgs& a) {
  ArgBinder b("count", a, {"value"});
  int64_t n = 0;
  for (const Value& x : self.list().items) n += equals(x, b.get(0));
  return Value(n);
}

const std::map<std::string, Method>& string_methods() {
  static const std::map<std::string, Method> table = {
      {"startswith", m_startswith}, {"endswith", m_endswith}, {"strip", m_strip},
      {"lstrip", m_lstrip},         {"rstrip", m_rstrip},     {"split", m_split},
      {"rsplit", m_rsplit},         {"splitlines", m_splitlines}, {"replace", m_replace},
      {"upper", m_upper},           {"lower", m_lower},       {"title", m_title},
      {"capitalize", m_capitalize}, {"find", m_find},         {"rfind", m_rfind},
      {"count", m_str_count},       {"join", m_join},         {"format", m_format},
      {"isdigit", char_class<p_digit>}, {"isalpha", char_class<p_alpha>},
      {"isalnum", char_class<p_alnum>}, {"isspace", char_class<p_space>},
  };
  return table;
}

const std::map<std::string, Method>& dict_methods() {
  static const std::map<std::string, Method> table = {
      {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}};
  return table;
}

const std::map<std::string, Method>& list_methods() {
  static const std::map<std::string, Method> table = {{"index", m_list_index}, {"count", m_list_count}};
  return table;
}

}  // namespace

Value bound_method(const Value& self, const std::string& name) {
  const std::map<std::string, Method>* table = self.is_string() ? &string_methods()
                                               : self.is_dict() ? &dict_methods()
                                               : self.is_list() ? &list_methods()
                                                                : nullptr;
  if (!table) return Value();
  auto it = table->find(name);
  if (it == table->end()) return Value();
  Method m = it->second;
  return make_function(name, [m, self](Interpreter& in, CallArgs& args) { return m(in, self, args); });
}

}  // namespace kvlm::jinja
