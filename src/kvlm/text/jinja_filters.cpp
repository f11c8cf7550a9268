// jinja2's builtin filters (the ones chat templates use), plus transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "kvlm/text/jinja_interp.h"

namespace kvlm::jinja {
namespace {

std::string soft_str(const Value& v) { return to_str(v); }

Value require_defined(const Value& v) {
  if (v.is_undefined()) raise_undefined(v);
  return v;
}

// A list of the items of any iterable (jinja2 filters accept any iterable).
std::vector<Value> items_of(const Value& v) { return iterate(v); }

// Resolves "a.b.0" on an item the way jinja2's make_attrgetter does.
Value attribute_path(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return get_item(item, attribute);
  Value cur = item;
  std::string path = to_str(attribute);
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit((unsigned char)c); });
    cur = digits ? get_item(cur, Value(int64_t(std::atoll(part.c_str())))) : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort key for sort/unique/min/max/dictsort: lowercased when case-insensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("default", a, {"default_value", "boolean"});
  bool use_default = v.is_undefined() || (truthy(b.get_or(1, Value(false))) && !truthy(v));
  return use_default ? b.get_or(0, Value(std::string())) : v;
}

Value f_length(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("length", a, {});
  return Value(length(v));
}

Value f_string(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("string", a, {});
  return Value(soft_str(v));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("trim", a, {"chars"});
  return Value(py_strip(soft_str(v), true, true, b.get(0)));
}

Value f_upper(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("upper", a, {});
  return Value(py_upper(soft_str(v)));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("lower", a, {});
  return Value(py_lower(soft_str(v)));
}

std::string capitalize_word(const std::string& w) {
  auto cps = utf8_chars(w);
  if (cps.empty()) return "";
  std::string rest;
  for (size_t i = 1; i < cps.size(); ++i) rest += cps[i];
  return py_upper(cps[0]) + py_lower(rest);
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("capitalize", a, {});
  return Value(capitalize_word(soft_str(v)));
}

// jinja2's title: words start after runs of whitespace, '-', '(', '{', '[' or '<'.
Value f_title(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("title", a, {});
  std::string out, word;
  auto is_sep = [](const std::string& c) {
    return c == " " || c == "\t" || c == "\n" || c == "\r" || c == "\f" || c == "\v" || c == "-" || c == "(" ||
           c == "{" || c == "[" || c == "<";
  };
  for (const auto& c : utf8_chars(soft_str(v))) {
    if (is_sep(c)) {
      out += capitalize_word(word) + c;
      word.clear();
    } else {
      word += c;
    }
  }
  return Value(out + capitalize_word(word));
}

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("replace", a, {"old", "new", "count"});
  int64_t count = b.has(2) && !b.get(2).is_none() ? as_int(b.get(2)) : -1;
  std::string out = py_replace(soft_str(v), soft_str(b.get(0)), soft_str(b.get(1)), count);
  in.check_size(out.size());
  return Value(std::move(out));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("join", a, {"d", "attribute"});
  std::string sep = b.has(0) ? soft_str(b.get(0)) : "";
  std::string out;
  bool first = true;
  for (const Value& item : items_of(v)) {
    if (!first) out += sep;
    first = false;
    out += soft_str(b.has(1) ? attribute_path(item, b.get(1)) : item);
    in.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_items(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("items", a, {});
  List l;
  if (v.is_undefined()) return Value(std::move(l));
  if (!v.is_dict()) throw RenderError("can only get item pairs from a mapping.");
  for (const auto& [k, x] : v.dict().entries()) l.items.push_back(make_tuple({Value(k), x}));
  return Value(std::move(l));
}

Value f_list(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("list", a, {});
  List l;
  l.items = items_of(v);
  return Value(std::move(l));
}

Value f_first(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("first", a, {});
  auto items = items_of(v);
  return items.empty() ? Value(Undefined{"No first item, sequence was empty."}) : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("last", a, {});
  auto items = items_of(v);
  return items.empty() ? Value(Undefined{"No last item, sequence was empty."}) : items.back();
}

// Python int() of a string: optional sign, digits and underscores, surrounding whitespace.
bool parse_int(const std::string& s, int64_t base, int64_t& out) {
  std::string t = py_strip(s, true, true, Value());
  std::string digits;
  for (char c : t)
    if (c != '_') digits += c;
  if (digits.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, int(base));
  if (*end != '\0' || errno == ERANGE) return false;
  out = v;
  return true;
}

bool parse_float(const std::string& s, double& out) {
  std::string t = py_strip(s, true, true, Value());
  if (t.empty()) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return *end == '\0';
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("int", a, {"default", "base"});
  Value fallback = b.get_or(0, Value(int64_t(0)));
  int64_t base = b.has(1) ? as_int(b.get(1)) : 10;
  if (v.is_bool() || v.is_int()) return Value(as_int(v));
  if (v.is_float()) {
    double d = std::trunc(std::get<double>(v.v));
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(int64_t(d));
  }
  if (v.is_string()) {
    int64_t i;
    if (parse_int(v.str(), base, i)) return Value(i);
    double d;
    if (parse_float(v.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(int64_t(std::trunc(d)));
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("float", a, {"default"});
  Value fallback = b.get_or(0, Value(0.0));
  if (v.is_number()) return Value(as_double(v));
  double d;
  if (v.is_string() && parse_float(v.str(), d)) return Value(d);
  return fallback;
}

Value f_abs(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("abs", a, {});
  if (v.is_float()) return Value(std::fabs(std::get<double>(v.v)));
  int64_t i = as_int(require_defined(v));
  if (i == INT64_MIN) throw RenderError("integer overflow");
  return Value(i < 0 ? -i : i);
}

// Python's round(x, n): correctly rounded through the decimal representation.
double py_round(double x, int64_t precision) {
  if (!std::isfinite(x)) return x;
  if (precision > 300) return x;
  if (precision < -300) return 0.0 * x;
  char buf[512];
  if (precision >= 0) {
    std::snprintf(buf, sizeof buf, "%.*f", int(precision), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, double(-precision));
  return std::nearbyint(x / scale) * scale;
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("round", a, {"precision", "method"});
  int64_t precision = b.has(0) ? as_int(b.get(0)) : 0;
  std::string method = b.has(1) ? soft_str(b.get(1)) : "common";
  double x = as_double(require_defined(v));
  if (method == "common") return Value(py_round(x, precision));
  if (method != "ceil" && method != "floor") throw RenderError("method must be common, ceil or floor");
  double scale = std::pow(10.0, double(precision));
  return Value((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
}

Value f_unique(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("unique", a, {"case_sensitive", "attribute"});
  bool cs = truthy(b.get(0));
  List out;
  std::vector<Value> seen;
  for (const Value& item : items_of(v)) {
    Value key = sort_key(b.has(1) ? attribute_path(item, b.get(1)) : item, cs);
    bool dup = false;
    for (const Value& s : seen) dup |= equals(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.items.push_back(item);
  }
  return Value(std::move(out));
}

std::vector<Value> sorted(std::vector<Value> items, bool reverse, bool cs, const Value& attribute) {
  auto key = [&](const Value& x) { return sort_key(attribute.is_undefined() || attribute.is_none() ? x : attribute_path(x, attribute), cs); };
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& x : items) keyed.emplace_back(key(x), x);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& p, const auto& q) {
    return reverse ? less(q.first, p.first) : less(p.first, q.first);
  });
  std::vector<Value> out;
  for (auto& p : keyed) out.push_back(std::move(p.second));
  return out;
}

Value f_sort(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("sort", a, {"reverse", "case_sensitive", "attribute"});
  List l;
  l.items = sorted(items_of(v), truthy(b.get(0)), truthy(b.get(1)), b.get(2));
  return Value(std::move(l));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw RenderError("You can only sort by either \"key\" or \"value\"");
  std::string by = b.has(1) ? soft_str(b.get(1)) : "key";
  if (by != "key" && by != "value") throw RenderError("You can only sort by either \"key\" or \"value\"");
  List l;
  for (const auto& [k, x] : v.dict().entries()) l.items.push_back(make_tuple({Value(k), x}));
  l.items = sorted(std::move(l.items), truthy(b.get(2)), truthy(b.get(0)), Value(int64_t(by == "key" ? 0 : 1)));
  return Value(std::move(l));
}

Value f_reverse(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("reverse", a, {});
  if (v.is_string()) {
    auto cps = utf8_chars(v.str());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value(std::move(out));
  }
  List l;
  l.items = items_of(v);
  std::reverse(l.items.begin(), l.items.end());
  return Value(std::move(l));
}

Value f_safe(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("safe", a, {});
  return v.is_string() ? v : Value(soft_str(v));
}

Value f_escape(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("escape", a, {});
  std::string out;
  for (char c : soft_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

// str.splitlines() separators.
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  auto cps = utf8_chars(s);
  std::string cur;
  for (size_t i = 0; i < cps.size(); ++i) {
    const std::string& c = cps[i];
    bool brk = c == "\n" || c == "\r" || c == "\v" || c == "\f" || c == "\x1c" || c == "\x1d" || c == "\x1e" ||
               c == "\xc2\x85" || c == "\xe2\x80\xa8" || c == "\xe2\x80\xa9";
    if (!brk) {
      cur += c;
      continue;
    }
    if (c == "\r" && i + 1 < cps.size() && cps[i + 1] == "\n") ++i;
    lines.push_back(std::move(cur));
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("indent", a, {"width", "first", "blank"});
  const Value& w = b.get(0);
  std::string unit = w.is_string() ? w.str() : std::string(size_t(std::clamp<int64_t>(b.has(0) ? as_int(w) : 4, 0, 1 << 20)), ' ');
  auto lines = split_lines(soft_str(v) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    bool indent_line = i > 0 && (truthy(b.get(2)) || !lines[i].empty());
    if (indent_line) out += unit;
    out += lines[i];
    in.check_size(out.size());
  }
  if (truthy(b.get(1))) out = unit + out;
  return Value(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : soft_str(v)) {
    bool word = std::isalnum(c) || c == '_' || c >= 0x80;
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value(n);
}

Value f_batch(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("batch", a, {"linecount", "fill_with"});
  int64_t n = as_int(b.get(0));
  if (n <= 0) throw RenderError("batch size must be positive");
  List out;
  List cur;
  for (const Value& item : items_of(v)) {
    cur.items.push_back(item);
    if (int64_t(cur.items.size()) == n) {
      out.items.emplace_back(std::move(cur));
      cur = List();
    }
  }
  if (!cur.items.empty()) {
    if (b.has(1))
      while (int64_t(cur.items.size()) < n) cur.items.push_back(b.get(1));
    out.items.emplace_back(std::move(cur));
  }
  return Value(std::move(out));
}

Value min_max(const Value& v, CallArgs& a, bool want_max, const char* name) {
  ArgBinder b(name, a, {"case_sensitive", "attribute"});
  auto items = items_of(v);
  if (items.empty()) return Value(Undefined{std::string("No aggregated item, sequence was empty.")});
  bool cs = truthy(b.get(0));
  auto key = [&](const Value& x) { return sort_key(b.has(1) ? attribute_path(x, b.get(1)) : x, cs); };
  Value best = items[0];
  for (size_t i = 1; i < items.size(); ++i) {
    bool better = want_max ? less(key(best), key(items[i])) : less(key(items[i]), key(best));
    if (better) best = items[i];
  }
  return best;
}

Value f_min(Interpreter&, const Value& v, CallArgs& a) { return min_max(v, a, false, "min"); }
Value f_max(Interpreter&, const Value& v, CallArgs& a) { return min_max(v, a, true, "max"); }

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("sum", a, {"attribute", "start"});
  Value total = b.get_or(1, Value(int64_t(0)));
  for (const Value& item : items_of(v)) {
    Value x = b.has(0) ? attribute_path(item, b.get(0)) : item;
    if (!total.is_number() || !x.is_number())
      throw RenderError("unsupported operand type(s) for +: '" + type_name(total) + "' and '" + type_name(x) + "'");
    if (total.is_float() || x.is_float()) {
      total = Value(as_double(total) + as_double(x));
    } else {
      int64_t r;
      if (__builtin_add_overflow(as_int(total), as_int(x), &r)) throw RenderError("integer overflow");
      total = Value(r);
    }
  }
  (void)in;
  return total;
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
std::string escape_non_ascii(const std::string& json) {
  std::string out;
  size_t i = 0;
  while (i < json.size()) {
    unsigned char c = json[i];
    if (c < 0x80) {
      out += char(c);
      ++i;
      continue;
    }
    int n = (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : 3;
    uint32_t cp = c & (0x3f >> n);
    for (int k = 1; k <= n && i + k < json.size(); ++k) cp = (cp << 6) | (json[i + k] & 0x3f);
    i += n + 1;
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  return out;
}

Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  const Value& indent = b.get(1);
  if (indent.is_string()) {
    style.indent_str = indent.str();
    style.indent = 0;
  } else if (indent.is_number()) {
    style.indent = int(std::clamp<int64_t>(as_int(indent), 0, 1024));
  }
  const Value& seps = b.get(2);
  if (seps.is_list() && seps.list().items.size() == 2) {
    style.item_sep = to_str(seps.list().items[0]);
    style.key_sep = to_str(seps.list().items[1]);
  }
  style.sort_keys = truthy(b.get(3));
  std::string out = to_json(require_defined(v), style);
  if (truthy(b.get(0))) out = escape_non_ascii(out);
  in.check_size(out.size());
  return Value(std::move(out));
}

// select/reject/selectattr/rejectattr share this: keep items whose (attribute's) test result
// equals `keep`.
Value filter_items(Interpreter& in, const Value& v, CallArgs& a, bool keep, bool by_attribute) {
  size_t first_test_arg = by_attribute ? 1 : 0;
  if (by_attribute && a.positional.empty()) throw RenderError("missing parameter for attribute name");
  List out;
  TestFn test = nullptr;
  if (a.positional.size() > first_test_arg) {
    std::string name = to_str(a.positional[first_test_arg]);
    test = find_test(name);
    if (!test) throw RenderError("unsupported test '" + name + "'");
  }
  CallArgs test_args;
  for (size_t i = first_test_arg + 1; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  test_args.keyword = a.keyword;
  for (const Value& item : items_of(v)) {
    Value x = by_attribute ? attribute_path(item, a.positional[0]) : item;
    CallArgs args = test_args;
    bool ok = test ? test(in, x, args) : truthy(x);
    if (ok == keep) out.items.push_back(item);
  }
  return Value(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return filter_items(in, v, a, true, false); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return filter_items(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return filter_items(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return filter_items(in, v, a, false, true); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  List out;
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [k, x] : a.keyword) {
    if (k == "attribute") attribute = &x;
    if (k == "default") fallback = &x;
  }
  if (attribute) {
    for (const Value& item : items_of(v)) {
      Value x = attribute_path(item, *attribute);
      out.items.push_back(x.is_undefined() && fallback ? *fallback : x);
    }
    return Value(std::move(out));
  }
  if (a.positional.empty()) throw RenderError("map requires a filter argument");
  std::string name = to_str(a.positional[0]);
  FilterFn fn = find_filter(name);
  if (!fn) throw RenderError("unsupported filter '" + name + "'");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : items_of(v)) {
    CallArgs args = rest;
    out.items.push_back(fn(in, item, args));
  }
  return Value(std::move(out));
}

Value f_attr(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("attr", a, {"name"});
  return get_attr(v, to_str(b.get(0)));
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
  if (!a.keyword.empty() && !a.positional.empty()) throw RenderError("can't handle positional and keyword arguments at the same time");
  if (!a.keyword.empty()) {
    Dict d;
    for (auto& [k, x] : a.keyword) d.set(k, x);
    return Value(py_percent_format(in, soft_str(v), Value(std::move(d))));
  }
  return Value(py_percent_format(in, soft_str(v), make_tuple(a.positional)));
}

Value f_center(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("center", a, {"width"});
  std::string s = soft_str(v);
  int64_t width = b.has(0) ? as_int(b.get(0)) : 80;
  int64_t n = int64_t(utf8_chars(s).size());
  if (width <= n) return Value(s);
  in.check_size(size_t(width));
  int64_t total = width - n, left = total / 2 + (total & width & 1);
  return Value(std::string(size_t(left), ' ') + s + std::string(size_t(total - left), ' '));
}

Value f_pprint(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("pprint", a, {});
  return Value(repr(v));
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> table = {
      {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},
      {"capitalize", f_capitalize}, {"center", f_center}, {"count", f_length},
      {"d", f_default},         {"default", f_default},   {"dictsort", f_dictsort},
      {"e", f_escape},          {"escape", f_escape},     {"first", f_first},
      {"float", f_float},       {"forceescape", f_escape}, {"format", f_format},
      {"indent", f_indent},     {"int", f_int},           {"items", f_items},
      {"join", f_join},         {"last", f_last},         {"length", f_length},
      {"list", f_list},         {"lower", f_lower},       {"map", f_map},
      {"max", f_max},           {"min", f_min},           {"pprint", f_pprint},
      {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
      {"reverse", f_reverse},   {"round", f_round},       {"safe", f_safe},
      {"select", f_select},     {"selectattr", f_selectattr}, {"sort", f_sort},
      {"string", f_string},     {"sum", f_sum},           {"title", f_title},
      {"tojson", f_tojson},     {"trim", f_trim},         {"unique", f_unique},
      {"upper", f_upper},       {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

FilterFn find_filter(const std::string& name) {
  auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

}  // namespace kvlm::jinja
