#include "kvlm/text/unicode.h"

#include <unicode/ubrk.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <memory>

#include "kvlm/base/error.h"

namespace kvlm::text {

size_t utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

char32_t next_code_point(std::string_view s, size_t& i) {
  unsigned char b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  // Lead byte ranges and the allowed second byte ranges of well-formed UTF-8 (Unicode table 3-7);
  // anything else is one invalid byte.
  size_t len = 0;
  char32_t cp = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    ++i;
    return 0xFFFD;
  }
  size_t j = 1;
  for (; j < len; ++j) {
    if (i + j >= s.size()) break;
    unsigned char b = static_cast<unsigned char>(s[i + j]);
    if (j == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (j < len) {
    // A maximal invalid prefix is replaced by a single U+FFFD, as from_utf8_lossy does.
    i += j;
    return 0xFFFD;
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string to_utf8(char32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

bool is_valid_utf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    size_t start = i;
    char32_t cp = next_code_point(bytes, i);
    if (cp == 0xFFFD && !(i - start == 3 && bytes.substr(start, 3) == "\xEF\xBF\xBD")) return false;
  }
  return true;
}

std::string utf8_lossy(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  for (size_t i = 0; i < bytes.size();) append_utf8(out, next_code_point(bytes, i));
  return out;
}

std::vector<char32_t> to_code_points(std::string_view s) {
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) cps.push_back(next_code_point(s, i));
  return cps;
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

static int8_t category(char32_t c) { return u_charType(static_cast<UChar32>(c)); }

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  int8_t t = category(c);
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_letter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_L_MASK) != 0;
}

bool is_alphabetic(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC);
}

bool is_alphanumeric(char32_t c) { return is_alphabetic(c) || is_numeric(c); }

bool is_word_char(char32_t c) {
  if (c < 0x80) return c == '_' || (c >= '0' && c <= '9') || is_alphabetic(c);
  if (is_alphabetic(c)) return true;
  int8_t t = category(c);
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION ||
         u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_JOIN_CONTROL);
}

bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  int8_t t = category(c);
  return t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION || t == U_END_PUNCTUATION ||
         t == U_CONNECTOR_PUNCTUATION || t == U_OTHER_PUNCTUATION ||
         t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION;
}

bool is_nonspacing_mark(char32_t c) { return c >= 0x80 && category(c) == U_NON_SPACING_MARK; }

bool is_mark(char32_t c) {
  if (c < 0x80) return false;
  const auto cat = category(c);
  return cat == U_NON_SPACING_MARK || cat == U_COMBINING_SPACING_MARK || cat == U_ENCLOSING_MARK;
}

bool is_other_category(char32_t c) {
  int8_t t = category(c);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR;
}

namespace {

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  if (s.empty()) return out;
  UErrorCode err = U_ZERO_ERROR;
  int32_t len = 0;
  u_strFromUTF8WithSub(nullptr, 0, &len, s.data(), static_cast<int32_t>(s.size()), 0xFFFD,
                       nullptr, &err);
  out.resize(static_cast<size_t>(len));
  err = U_ZERO_ERROR;
  u_strFromUTF8WithSub(out.data(), len, nullptr, s.data(), static_cast<int32_t>(s.size()), 0xFFFD,
                       nullptr, &err);
  check(U_SUCCESS(err), std::string("UTF-8 to UTF-16 conversion failed: ") + u_errorName(err));
  return out;
}

std::string from_utf16(const std::u16string& s) {
  std::string out;
  if (s.empty()) return out;
  UErrorCode err = U_ZERO_ERROR;
  int32_t len = 0;
  u_strToUTF8(nullptr, 0, &len, s.data(), static_cast<int32_t>(s.size()), &err);
  out.resize(static_cast<size_t>(len));
  err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), len, nullptr, s.data(), static_cast<int32_t>(s.size()), &err);
  check(U_SUCCESS(err), std::string("UTF-16 to UTF-8 conversion failed: ") + u_errorName(err));
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

}  // namespace

std::string normalize_unicode(std::string_view s, NormForm form) {
  if (is_ascii(s)) return std::string(s);  // every normal form leaves ASCII unchanged
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* norm = nullptr;
  switch (form) {
    case NormForm::NFC: norm = unorm2_getNFCInstance(&err); break;
    case NormForm::NFD: norm = unorm2_getNFDInstance(&err); break;
    case NormForm::NFKC: norm = unorm2_getNFKCInstance(&err); break;
    case NormForm::NFKD: norm = unorm2_getNFKDInstance(&err); break;
  }
  check(U_SUCCESS(err), std::string("ICU normalizer unavailable: ") + u_errorName(err));
  std::u16string in = to_utf16(s);
  std::u16string out(in.size() * 3 + 16, u'\0');
  err = U_ZERO_ERROR;
  int32_t len = unorm2_normalize(norm, in.data(), static_cast<int32_t>(in.size()), out.data(),
                                 static_cast<int32_t>(out.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    out.resize(static_cast<size_t>(len));
    err = U_ZERO_ERROR;
    len = unorm2_normalize(norm, in.data(), static_cast<int32_t>(in.size()), out.data(), len, &err);
  }
  check(U_SUCCESS(err), std::string("Unicode normalization failed: ") + u_errorName(err));
  out.resize(static_cast<size_t>(len));
  return from_utf16(out);
}

std::string to_lower(std::string_view s) {
  // Each code point is lowercased on its own (Rust's char::to_lowercase, which tokenizers uses),
  // so there is no context rule such as Greek final sigma.
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c = next_code_point(s, i);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      continue;
    }
    UChar in[2];
    int32_t in_len = 0;
    U16_APPEND_UNSAFE(in, in_len, static_cast<UChar32>(c));
    UChar lowered[8];
    UErrorCode err = U_ZERO_ERROR;
    int32_t len = u_strToLower(lowered, 8, in, in_len, "", &err);
    check(U_SUCCESS(err), std::string("lowercasing failed: ") + u_errorName(err));
    for (int32_t k = 0; k < len;) {
      UChar32 cp;
      U16_NEXT(lowered, k, len, cp);
      append_utf8(out, static_cast<char32_t>(cp));
    }
  }
  return out;
}

std::vector<size_t> grapheme_lengths(std::string_view s) {
  std::vector<size_t> lengths;
  if (s.empty()) return lengths;
  std::u16string u16 = to_utf16(s);
  UErrorCode err = U_ZERO_ERROR;
  std::unique_ptr<UBreakIterator, decltype(&ubrk_close)> it(
      ubrk_open(UBRK_CHARACTER, "", u16.data(), static_cast<int32_t>(u16.size()), &err),
      &ubrk_close);
  check(U_SUCCESS(err), std::string("grapheme segmentation failed: ") + u_errorName(err));
  // Map UTF-16 boundaries back to UTF-8 byte offsets by walking both encodings together.
  size_t byte = 0, unit = 0;
  for (int32_t b = ubrk_next(it.get()); b != UBRK_DONE; b = ubrk_next(it.get())) {
    size_t start_byte = byte;
    while (unit < static_cast<size_t>(b)) unit += next_code_point(s, byte) >= 0x10000 ? 2 : 1;
    lengths.push_back(byte - start_byte);
  }
  return lengths;
}

}  // namespace kvlm::text
