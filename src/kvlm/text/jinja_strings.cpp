// Python str operations the templates rely on, over UTF-8 with code point semantics.
#include <unicode/unistr.h>
#include <unicode/locid.h>

#include <cmath>
#include <cstdio>

#include "kvlm/text/jinja_interp.h"

namespace kvlm::jinja {

namespace {

// str.isspace() for one code point (Python's whitespace set).
bool is_py_space(const std::string& ch) {
  static const char* const spaces[] = {" ", "\t", "\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x1f",
                                       "\xc2\x85", "\xc2\xa0", "\xe1\x9a\x80", "\xe2\x80\xa8", "\xe2\x80\xa9",
                                       "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80"};
  for (const char* s : spaces)
    if (ch == s) return true;
  // U+2000..U+200A
  return ch.size() == 3 && (unsigned char)ch[0] == 0xe2 && (unsigned char)ch[1] == 0x80 &&
         (unsigned char)ch[2] >= 0x80 && (unsigned char)ch[2] <= 0x8a;
}

}  // namespace

std::string py_strip(std::string_view s, bool left, bool right, const Value& chars) {
  auto cps = utf8_chars(s);
  std::vector<std::string> set;
  bool custom = chars.is_string();
  if (custom) set = utf8_chars(chars.str());
  auto strip_it = [&](const std::string& c) {
    if (!custom) return is_py_space(c);
    for (const auto& x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

static std::string icu_case(std::string_view s, bool upper) {
  bool ascii = true;
  for (unsigned char c : s) ascii &= c < 0x80;
  if (ascii) {
    std::string out(s);
    for (char& c : out) c = upper ? char(std::toupper((unsigned char)c)) : char(std::tolower((unsigned char)c));
    return out;
  }
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), int32_t(s.size())));
  if (upper) {
    u.toUpper(icu::Locale::getRoot());
  } else {
    u.toLower(icu::Locale::getRoot());
  }
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::string py_upper(std::string_view s) { return icu_case(s, true); }
std::string py_lower(std::string_view s) { return icu_case(s, false); }

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    auto cps = utf8_chars(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

// printf-style `fmt % args` (the |format filter and the % operator on strings): conversions
// s, r, d, i, f, F, e, g, x, o, c and %%, with flags, width and precision.
std::string py_percent_format(Interpreter& in, const std::string& fmt, const Value& args) {
  std::vector<Value> values;
  const Dict* mapping = nullptr;
  if (args.is_list() && args.list().is_tuple) {
    values = args.list().items;
  } else if (args.is_dict()) {
    mapping = &args.dict();
    values.push_back(args);
  } else {
    values.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw RenderError("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping) throw RenderError("format requires a mapping");
      arg = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!arg) throw RenderError("format key '" + fmt.substr(i + 1, close - i - 1) + "' not found");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) spec += fmt[i++];
    while (i < fmt.size() && (std::isdigit((unsigned char)fmt[i]) || fmt[i] == '.')) spec += fmt[i++];
    if (i >= fmt.size()) throw RenderError("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= values.size()) throw RenderError("not enough arguments for format string");
      arg = &values[next++];
    }
    char buf[512];
    std::string text;
    switch (conv) {
      case 's': text = to_str(*arg); break;
      case 'r': text = repr(*arg); break;
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg->is_number()) throw RenderError("%" + std::string(1, conv) + " format: a number is required, not " + type_name(*arg));
        long long v = arg->is_float() ? (long long)std::trunc(as_double(*arg)) : (long long)as_int(*arg);
        std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), v);
        out += buf;
        continue;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!arg->is_number()) throw RenderError("must be real number, not " + type_name(*arg));
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), as_double(*arg));
        out += buf;
        continue;
      case 'c': text = arg->is_string() ? arg->str() : std::string(1, char(as_int(*arg))); break;
      default: throw RenderError(std::string("unsupported format character '") + conv + "'");
    }
    // Width and '-' for string conversions.
    size_t width = 0;
    bool left = spec.find('-') != std::string::npos;
    size_t p = 1;
    while (p < spec.size() && !std::isdigit((unsigned char)spec[p])) ++p;
    while (p < spec.size() && std::isdigit((unsigned char)spec[p])) width = width * 10 + size_t(spec[p++] - '0');
    size_t n = utf8_chars(text).size();
    in.check_size(width);
    std::string pad = n < width ? std::string(width - n, ' ') : "";
    out += left ? text + pad : pad + text;
  }
  if (next < values.size() && !mapping) throw RenderError("not all arguments converted during string formatting");
  in.check_size(out.size());
  return out;
}

}  // namespace kvlm::jinja
