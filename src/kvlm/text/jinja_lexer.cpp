#include "kvlm/text/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "kvlm/base/error.h"

namespace kvlm::jinja {

std::string line_prefix(int line) { return "template line " + std::to_string(line) + ": "; }

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Newlines as jinja2 sees them: \r\n and \r become \n, and one final newline is dropped.
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) lex_data();
    push(Tok::kEof, "");
    return std::move(out_);
  }

 private:
  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the previous token ended with a newline (or nothing came yet)
  std::vector<Token> out_;

  [[noreturn]] void fail(const std::string& msg) const { throw Error(line_prefix(line_) + msg); }

  void push(Tok kind, std::string text) { out_.push_back(Token{kind, std::move(text), line_}); }

  void advance_to(size_t end) {
    for (size_t i = pos_; i < end; ++i)
      if (s_[i] == '\n') ++line_;
    pos_ = end;
  }

  // Text up to the next tag, with the next tag's whitespace rules applied to its tail.
  void lex_data() {
    size_t tag = s_.find('{', pos_);
    while (tag != std::string::npos && tag + 1 < s_.size() && s_[tag + 1] != '{' &&
           s_[tag + 1] != '%' && s_[tag + 1] != '#')
      tag = s_.find('{', tag + 1);
    if (tag + 1 >= s_.size()) tag = std::string::npos;
    size_t end = tag == std::string::npos ? s_.size() : tag;
    std::string text = s_.substr(pos_, end - pos_);
    int text_line = line_;
    advance_to(end);
    if (tag != std::string::npos) {
      char kind = s_[tag + 1];
      char marker = tag + 2 < s_.size() ? s_[tag + 2] : '\0';
      if (marker == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (kind != '{' && marker != '+') {
        lstrip(text);
      }
    }
    if (!text.empty()) {
      out_.push_back(Token{Tok::kData, text, text_line});
      line_starting_ = text.back() == '\n';
    }
    if (tag == std::string::npos) return;
    char kind = s_[tag + 1];
    size_t after = tag + 2;
    if (after < s_.size() && (s_[after] == '-' || (s_[after] == '+' && kind != '{'))) ++after;
    pos_ = after;
    if (kind == '#') {
      lex_comment();
    } else if (kind == '{') {
      push(Tok::kVarBegin, "{{");
      lex_tag(Tok::kVarEnd);
    } else {
      lex_block();
    }
  }

  // lstrip_blocks: spaces and tabs between the line start and a block tag go, when the tag is
  // the first thing on its line.
  void lstrip(std::string& text) const {
    size_t nl = text.rfind('\n');
    size_t line_start = nl == std::string::npos ? 0 : nl + 1;
    if (line_start == 0 && !line_starting_) return;
    for (size_t i = line_start; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t') return;
    text.resize(line_start);
  }

  // After a block or comment end: `-` strips all following whitespace, else trim_blocks drops
  // one newline.
  void after_block_end(bool strip) {
    size_t p = pos_;
    if (strip) {
      while (p < s_.size() && is_space(s_[p])) ++p;
    } else if (p < s_.size() && s_[p] == '\n') {
      ++p;
    }
    advance_to(p);
    // jinja2: a following block tag counts as starting a line only if the tag's own match
    // (with what trim_blocks or '-' swallowed) ended in a newline.
    line_starting_ = s_[p - 1] == '\n';
  }

  void lex_comment() {
    size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) fail("unterminated comment");
    bool strip = end > pos_ && s_[end - 1] == '-';
    advance_to(end + 2);
    after_block_end(strip);
  }

  void lex_block() {
    int start_line = line_;
    skip_space();
    if (s_.compare(pos_, 3, "raw") == 0 && (pos_ + 3 >= s_.size() || !is_name_char(s_[pos_ + 3]))) {
      lex_raw(start_line);
      return;
    }
    push(Tok::kBlockBegin, "{%");
    lex_tag(Tok::kBlockEnd);
  }

  // {% raw %}...{% endraw %}: everything inside is data.
  void lex_raw(int start_line) {
    advance_to(pos_ + 3);
    skip_space();
    bool strip = expect_block_end();
    after_block_end(strip);
    size_t search = pos_;
    while (true) {
      size_t open = s_.find("{%", search);
      if (open == std::string::npos) {
        line_ = start_line;
        fail("unterminated 'raw' block");
      }
      size_t p = open + 2;
      bool strip_before = p < s_.size() && s_[p] == '-';
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
      while (p < s_.size() && is_space(s_[p])) ++p;
      if (s_.compare(p, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      std::string text = s_.substr(pos_, open - pos_);
      if (strip_before) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (s_[open + 2] != '+') {
        lstrip(text);
      }
      if (!text.empty()) out_.push_back(Token{Tok::kData, text, line_});
      advance_to(p + 6);
      skip_space();
      bool strip_after = expect_block_end();
      after_block_end(strip_after);
      return;
    }
  }

  // Consumes `%}`, `-%}` or `+%}`; returns whether it was `-%}`.
  bool expect_block_end() {
    bool strip = false;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) {
      strip = s_[pos_] == '-';
      ++pos_;
    }
    if (s_.compare(pos_, 2, "%}") != 0) fail("expected '%}'");
    pos_ += 2;
    return strip;
  }

  void skip_space() {
    size_t p = pos_;
    while (p < s_.size() && is_space(s_[p])) ++p;
    advance_to(p);
  }

  // Expression tokens up to the closing `}}` or `%}`; the closer only counts when brackets are
  // balanced, as in jinja2.
  void lex_tag(Tok end_kind) {
    const char* closer = end_kind == Tok::kVarEnd ? "}}" : "%}";
    int depth = 0;
    int start_line = line_;
    while (true) {
      skip_space();
      if (pos_ >= s_.size()) {
        line_ = start_line;
        fail(end_kind == Tok::kVarEnd ? "unexpected end of template, expected '}}'"
                                      : "unexpected end of template, expected '%}'");
      }
      if (depth == 0) {
        bool dash = s_[pos_] == '-' && s_.compare(pos_ + 1, 2, closer) == 0;
        bool plus = end_kind == Tok::kBlockEnd && s_[pos_] == '+' && s_.compare(pos_ + 1, 2, closer) == 0;
        if (dash || plus || s_.compare(pos_, 2, closer) == 0) {
          push(end_kind, closer);
          pos_ += (dash || plus) ? 3 : 2;
          if (end_kind == Tok::kBlockEnd) {
            after_block_end(dash);
          } else if (dash) {
            after_block_end(true);
          } else {
            line_starting_ = false;
          }
          return;
        }
      }
      lex_expr_token(depth);
    }
  }

  void lex_expr_token(int& depth) {
    char c = s_[pos_];
    if (is_name_start(c)) {
      size_t e = pos_;
      while (e < s_.size() && is_name_char(s_[e])) ++e;
      push(Tok::kName, s_.substr(pos_, e - pos_));
      pos_ = e;
    } else if (is_digit(c)) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string(c);
    } else {
      lex_operator(depth);
    }
  }

  void lex_number() {
    size_t e = pos_;
    auto digits = [&] {
      while (e < s_.size() && (is_digit(s_[e]) || (s_[e] == '_' && e + 1 < s_.size() && is_digit(s_[e + 1])))) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < s_.size() && s_[e] == '.' && is_digit(s_[e + 1])) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t x = e + 1;
      if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
      if (x < s_.size() && is_digit(s_[x])) {
        is_float = true;
        e = x;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (s_[i] != '_') text += s_[i];
    Token t{is_float ? Tok::kFloat : Tok::kInt, text, line_};
    errno = 0;
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal too large: " + text);
    }
    out_.push_back(t);
    pos_ = e;
  }

  // Python string escapes (jinja2 decodes literals with unicode-escape).
  void lex_string(char quote) {
    int start_line = line_;
    size_t p = pos_ + 1;
    std::string value;
    while (true) {
      if (p >= s_.size()) {
        line_ = start_line;
        fail("unterminated string literal");
      }
      char c = s_[p];
      if (c == quote) break;
      if (c != '\\' || p + 1 >= s_.size()) {
        value += c;
        ++p;
        continue;
      }
      p = decode_escape(p + 1, value);
    }
    out_.push_back(Token{Tok::kString, value, start_line});
    advance_to(p + 1);
  }

  size_t decode_escape(size_t p, std::string& value) {
    char e = s_[p];
    auto hex = [&](int n) -> size_t {
      uint32_t cp = 0;
      for (int k = 1; k <= n; ++k) {
        if (p + k >= s_.size()) fail("truncated escape in string literal");
        char h = s_[p + k];
        int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) fail("invalid escape in string literal");
        cp = cp * 16 + uint32_t(d);
      }
      if (cp > 0x10ffff) fail("invalid escape in string literal");
      append_utf8(value, cp);
      return p + n + 1;
    };
    switch (e) {
      case 'n': value += '\n'; return p + 1;
      case 't': value += '\t'; return p + 1;
      case 'r': value += '\r'; return p + 1;
      case '\\': value += '\\'; return p + 1;
      case '\'': value += '\''; return p + 1;
      case '"': value += '"'; return p + 1;
      case 'a': value += '\a'; return p + 1;
      case 'b': value += '\b'; return p + 1;
      case 'f': value += '\f'; return p + 1;
      case 'v': value += '\v'; return p + 1;
      case '\n': return p + 1;  // line continuation
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = 0;
          size_t q = p;
          while (q < s_.size() && q < p + 3 && s_[q] >= '0' && s_[q] <= '7') cp = cp * 8 + uint32_t(s_[q++] - '0');
          append_utf8(value, cp);
          return q;
        }
        value += '\\';  // unknown escapes stay as written
        return p;
    }
  }

  void lex_operator(int& depth) {
    static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two) {
      if (s_.compare(pos_, 2, op) == 0) {
        push(Tok::kOp, op);
        pos_ += 2;
        return;
      }
    }
    char c = s_[pos_];
    static const std::string singles = "+-*/%~<>=.,:|()[]{};";
    if (singles.find(c) == std::string::npos) fail(std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) fail(std::string("unexpected '") + c + "'");
      --depth;
    }
    push(Tok::kOp, std::string(1, c));
    ++pos_;
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace kvlm::jinja
