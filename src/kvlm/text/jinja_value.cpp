// Python semantics for the Jinja value model: what jinja2 does when it compares, prints or
// serialises a value.
#include "kvlm/text/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace kvlm::jinja {

const Value* Dict::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::set(std::string key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

Value make_function(std::string name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  return Value(std::make_shared<const Function>(Function{std::move(name), std::move(fn)}));
}

Value make_tuple(std::vector<Value> items) {
  List l;
  l.items = std::move(items);
  l.is_tuple = true;
  return Value(std::move(l));
}

std::string type_name(const Value& v) {
  if (v.is_undefined()) return "Undefined";
  if (v.is_none()) return "NoneType";
  if (v.is_bool()) return "bool";
  if (v.is_int()) return "int";
  if (v.is_float()) return "float";
  if (v.is_string()) return "str";
  if (v.is_list()) return v.list().is_tuple ? "tuple" : "list";
  if (v.is_dict()) return "dict";
  if (v.is_namespace()) return "Namespace";
  return "function";
}

bool truthy(const Value& v) {
  if (v.is_undefined() || v.is_none()) return false;
  if (v.is_bool()) return std::get<bool>(v.v);
  if (v.is_int()) return std::get<int64_t>(v.v) != 0;
  if (v.is_float()) return std::get<double>(v.v) != 0.0;
  if (v.is_string()) return !v.str().empty();
  if (v.is_list()) return !v.list().items.empty();
  if (v.is_dict()) return v.dict().size() != 0;
  return true;
}

double as_double(const Value& v) {
  if (v.is_bool()) return std::get<bool>(v.v) ? 1.0 : 0.0;
  if (v.is_int()) return double(std::get<int64_t>(v.v));
  if (v.is_float()) return std::get<double>(v.v);
  throw RenderError("expected a number, got " + type_name(v));
}

int64_t as_int(const Value& v) {
  if (v.is_bool()) return std::get<bool>(v.v) ? 1 : 0;
  if (v.is_int()) return std::get<int64_t>(v.v);
  throw RenderError("expected an integer, got " + type_name(v));
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return as_double(a) == as_double(b);
    return as_int(a) == as_int(b);
  }
  if (a.v.index() != b.v.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) return a.str() == b.str();
  if (a.is_list()) {
    const auto &x = a.list().items, &y = b.list().items;
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equals(x[i], y[i])) return false;
    return true;
  }
  if (a.is_dict()) {
    if (a.dict().size() != b.dict().size()) return false;
    for (const auto& [k, val] : a.dict().entries()) {
      const Value* other = b.dict().find(k);
      if (!other || !equals(val, *other)) return false;
    }
    return true;
  }
  if (a.is_function()) return std::get<FunctionPtr>(a.v) == std::get<FunctionPtr>(b.v);
  return std::get<NamespacePtr>(a.v) == std::get<NamespacePtr>(b.v);
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return as_double(a) < as_double(b);
    return as_int(a) < as_int(b);
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
    const auto &x = a.list().items, &y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw RenderError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                    type_name(b) + "'");
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |d| < 1e16, else
  // scientific with a signed two-digit exponent.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp >= -5 + 1 && exp < 16) {
    if (exp >= 0) {
      if (int(digits.size()) <= exp + 1) {
        out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

// Decodes one UTF-8 code point at s[i], advancing i; invalid bytes decode as themselves.
static uint32_t next_code_point(std::string_view s, size_t& i) {
  unsigned char c = s[i];
  int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
  if (n <= 0 || i + n >= s.size()) {
    ++i;
    return c;
  }
  uint32_t cp = c & (0x3f >> n);
  for (int k = 1; k <= n; ++k) {
    unsigned char cc = s[i + k];
    if ((cc & 0xc0) != 0x80) {
      ++i;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3f);
  }
  i += n + 1;
  return cp;
}

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    next_code_point(s, i);
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

std::string string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  out += q;
  return out;
}

static std::string join_repr(const std::vector<Value>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += repr(items[i]);
  }
  return out;
}

static std::string dict_repr(const Dict& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, val] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += string_repr(k) + ": " + repr(val);
  }
  return out + "}";
}

std::string repr(const Value& v) {
  if (v.is_string()) return string_repr(v.str());
  if (v.is_undefined()) return "Undefined";
  if (v.is_list()) {
    const List& l = v.list();
    if (l.is_tuple)
      return "(" + join_repr(l.items) + (l.items.size() == 1 ? ",)" : ")");
    return "[" + join_repr(l.items) + "]";
  }
  if (v.is_dict()) return dict_repr(v.dict());
  if (v.is_namespace()) return "<Namespace " + dict_repr(v.ns().attrs) + ">";
  return to_str(v);
}

std::string to_str(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.is_none()) return "None";
  if (v.is_bool()) return std::get<bool>(v.v) ? "True" : "False";
  if (v.is_int()) return std::to_string(std::get<int64_t>(v.v));
  if (v.is_float()) return float_repr(std::get<double>(v.v));
  if (v.is_string()) return v.str();
  if (v.is_function()) return "<function " + v.function().name + ">";
  return repr(v);
}

static void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

namespace {
struct JsonWriter {
  const JsonStyle& style;
  std::string item_sep, key_sep, unit;
  std::string out;
  int depth = 0;

  explicit JsonWriter(const JsonStyle& s) : style(s) {
    bool indented = s.indent >= 0 || !s.indent_str.empty();
    item_sep = !s.item_sep.empty() ? s.item_sep : indented ? "," : ", ";
    key_sep = !s.key_sep.empty() ? s.key_sep : ": ";
    unit = !s.indent_str.empty() ? s.indent_str : std::string(std::max(s.indent, 0), ' ');
    if (!indented) unit.clear();
    indented_ = indented;
  }
  bool indented_ = false;

  void newline() {
    if (!indented_) return;
    out += '\n';
    for (int i = 0; i < depth; ++i) out += unit;
  }

  template <typename Seq, typename Fn>
  void container(char open, char close, const Seq& seq, Fn each) {
    if (seq.empty()) {
      out += open;
      out += close;
      return;
    }
    out += open;
    ++depth;
    bool first = true;
    for (const auto& item : seq) {
      if (!first) out += item_sep;
      first = false;
      newline();
      each(item);
    }
    --depth;
    newline();
    out += close;
  }

  void write(const Value& v) {
    if (depth > 256) throw RenderError("tojson: value nested too deeply");
    if (v.is_none()) {
      out += "null";
    } else if (v.is_bool()) {
      out += std::get<bool>(v.v) ? "true" : "false";
    } else if (v.is_int()) {
      out += std::to_string(std::get<int64_t>(v.v));
    } else if (v.is_float()) {
      double d = std::get<double>(v.v);
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                                                    : float_repr(d);
    } else if (v.is_string()) {
      json_string(out, v.str());
    } else if (v.is_list()) {
      container('[', ']', v.list().items, [&](const Value& x) { write(x); });
    } else if (v.is_dict() || v.is_namespace()) {
      const Dict& d = v.is_dict() ? v.dict() : v.ns().attrs;
      if (v.is_namespace())
        throw RenderError("Object of type Namespace is not JSON serializable");
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : d.entries()) entries.push_back(&e);
      if (style.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      container('{', '}', entries, [&](const std::pair<std::string, Value>* e) {
        json_string(out, e->first);
        out += key_sep;
        write(e->second);
      });
    } else {
      throw RenderError("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }
};
}  // namespace

std::string to_json(const Value& v, const JsonStyle& style) {
  JsonWriter w(style);
  w.write(v);
  return std::move(w.out);
}

template <typename J>
static Value convert_json(const J& j) {
  switch (j.type()) {
    case J::value_t::null: return Value(None{});
    case J::value_t::boolean: return Value(j.template get<bool>());
    case J::value_t::number_integer: return Value(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) return Value(double(u));
      return Value(int64_t(u));
    }
    case J::value_t::number_float: return Value(j.template get<double>());
    case J::value_t::string: return Value(j.template get<std::string>());
    case J::value_t::array: {
      List l;
      for (const auto& x : j) l.items.push_back(convert_json(x));
      return Value(std::move(l));
    }
    case J::value_t::object: {
      Dict d;
      for (const auto& [k, x] : j.items()) d.set(k, convert_json(x));
      return Value(std::move(d));
    }
    default: return Value(None{});
  }
}

Value from_json(const Json& j) { return convert_json(j); }
Value from_json(const nlohmann::ordered_json& j) { return convert_json(j); }

std::vector<Value> iterate(const Value& v) {
  if (v.is_undefined()) return {};
  if (v.is_list()) return v.list().items;
  if (v.is_dict()) {
    std::vector<Value> keys;
    for (const auto& e : v.dict().entries()) keys.emplace_back(e.first);
    return keys;
  }
  if (v.is_string()) {
    std::vector<Value> chars;
    for (auto& c : utf8_chars(v.str())) chars.emplace_back(std::move(c));
    return chars;
  }
  throw RenderError("'" + type_name(v) + "' object is not iterable");
}

int64_t length(const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) return int64_t(utf8_chars(v.str()).size());
  if (v.is_list()) return int64_t(v.list().items.size());
  if (v.is_dict()) return int64_t(v.dict().size());
  throw RenderError("object of type '" + type_name(v) + "' has no len()");
}

}  // namespace kvlm::jinja
