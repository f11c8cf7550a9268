// Normalizers: string -> string rewrites applied to each piece of input between added tokens.
#include <cstring>

#include "kvlm/base/error.h"
#include "kvlm/text/components.h"
#include "kvlm/text/unicode.h"

namespace kvlm::text {

namespace {

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormForm f) : form_(f) {}
  std::string normalize(std::string s) const override { return normalize_unicode(s, form_); }

 private:
  NormForm form_;
};

class Lowercase : public Normalizer {
 public:
  std::string normalize(std::string s) const override { return to_lower(s); }
};

// Removes code points for which `drop` holds.
template <typename Pred>
std::string filter_chars(const std::string& s, Pred drop) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    if (!drop(next_code_point(s, i))) out.append(s, start, i - start);
  }
  return out;
}

class StripAccents : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    return filter_chars(s, is_mark);
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string s) const override {
    std::vector<char32_t> cps = to_code_points(s);
    size_t b = 0, e = cps.size();
    if (left_)
      while (b < e && is_whitespace(cps[b])) ++b;
    if (right_)
      while (e > b && is_whitespace(cps[e - 1])) --e;
    std::string out;
    for (size_t k = b; k < e; ++k) append_utf8(out, cps[k]);
    return out;
  }

 private:
  bool left_, right_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prefix_(std::move(p)) {}
  std::string normalize(std::string s) const override {
    return s.empty() ? s : prefix_ + s;  // HF prepends only to non-empty text
  }

 private:
  std::string prefix_;
};

class Replace : public Normalizer {
 public:
  Replace(const Json& j, const std::string& origin)
      : pattern_(json_get<Json>(j, "pattern", origin), origin),
        content_(json_get<std::string>(j, "content", origin)) {}
  std::string normalize(std::string s) const override {
    auto matches = pattern_.find_all(s);
    if (matches.empty()) return s;
    std::string out;
    size_t prev = 0;
    for (auto [b, e] : matches) {
      out.append(s, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(s, prev, std::string::npos);
    return out;
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class ByteLevelNormalizer : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    std::string out;
    for (unsigned char b : s) out += byte_to_char(b);
    return out;
  }
};

// SentencePiece's "nmt" rules: drop control characters, turn the odd spaces into ' '.
class Nmt : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      char32_t c = next_code_point(s, i);
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
          c == 0x8F || c == 0x9F)
        continue;
      if (c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 ||
          (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 || c == 0x2581 ||
          c == 0xFEFF || c == 0xFFFD)
        c = ' ';
      append_utf8(out, c);
    }
    return out;
  }
};

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(const Json& j, const std::string& origin)
      : clean_text_(json_get_or<bool>(j, "clean_text", true, origin)),
        chinese_(json_get_or<bool>(j, "handle_chinese_chars", true, origin)),
        lowercase_(json_get_or<bool>(j, "lowercase", true, origin)),
        strip_accents_(json_get_or<bool>(j, "strip_accents", lowercase_, origin)) {}

  std::string normalize(std::string s) const override {
    if (clean_text_) s = clean(s);
    if (chinese_) s = pad_chinese(s);
    if (strip_accents_) s = filter_chars(normalize_unicode(s, NormForm::NFD), is_nonspacing_mark);
    if (lowercase_) s = to_lower(s);
    return s;
  }

 private:
  static std::string clean(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      char32_t c = next_code_point(s, i);
      bool ws = c == '\t' || c == '\n' || c == '\r' || is_whitespace(c);
      if (!ws && (c == 0 || c == 0xFFFD || is_other_category(c))) continue;
      append_utf8(out, ws ? U' ' : c);
    }
    return out;
  }
  static std::string pad_chinese(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      char32_t c = next_code_point(s, i);
      if (is_chinese_char(c)) {
        out += ' ';
        append_utf8(out, c);
        out += ' ';
      } else {
        append_utf8(out, c);
      }
    }
    return out;
  }
  bool clean_text_, chinese_, lowercase_, strip_accents_;
};

std::string base64_decode(const std::string& in, const std::string& origin) {
  auto value = [&](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    int v = value(c);
    check(v >= 0, origin + ": precompiled_charsmap is not valid base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// SentencePiece's precompiled character map: a darts-clone double-array trie over UTF-8 keys
// whose values index a pool of NUL-terminated replacement strings.
class Precompiled : public Normalizer {
 public:
  Precompiled(const Json& j, const std::string& origin) {
    std::string blob = base64_decode(json_get<std::string>(j, "precompiled_charsmap", origin),
                                     origin);
    check(blob.size() >= 4, origin + ": precompiled_charsmap is too short");
    uint32_t trie_bytes = 0;
    std::memcpy(&trie_bytes, blob.data(), 4);
    check(trie_bytes % 4 == 0 && trie_bytes <= blob.size() - 4 && trie_bytes >= 4,
          origin + ": precompiled_charsmap has an invalid trie size " +
              std::to_string(trie_bytes));
    units_.resize(trie_bytes / 4);
    std::memcpy(units_.data(), blob.data() + 4, trie_bytes);
    pool_ = blob.substr(4 + trie_bytes);
  }

  std::string normalize(std::string s) const override {
    // HF (spm_precompiled) first tries a whole grapheme cluster shorter than 6 bytes, replacing
    // all of it when any rule matches a prefix of it, then falls back to single code points.
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    for (size_t len : grapheme_lengths(s)) {
      std::string_view g(s.data() + pos, len);
      pos += len;
      if (len < 6) {
        if (auto rep = transform(g)) {
          out += *rep;
          continue;
        }
      }
      for (size_t i = 0; i < g.size();) {
        size_t start = i;
        next_code_point(g, i);
        std::string_view c = g.substr(start, i - start);
        if (auto rep = transform(c))
          out += *rep;
        else
          out += c;
      }
    }
    return out;
  }

 private:
  static uint32_t offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
  static uint32_t label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
  static bool has_leaf(uint32_t u) { return (u >> 8) & 1; }
  static uint32_t value(uint32_t u) { return u & ((1u << 31) - 1); }

  // The replacement of the shortest key that is a prefix of `key`.
  std::optional<std::string_view> transform(std::string_view key) const {
    size_t node = offset(units_[0]);
    for (unsigned char c : key) {
      if (c == 0) break;
      node ^= c;
      if (node >= units_.size()) return std::nullopt;
      uint32_t u = units_[node];
      if (label(u) != c) return std::nullopt;
      node ^= offset(u);
      if (has_leaf(u)) {
        if (node >= units_.size()) return std::nullopt;
        size_t start = value(units_[node]);
        if (start > pool_.size()) return std::nullopt;
        size_t end = pool_.find('\0', start);
        if (end == std::string::npos) end = pool_.size();
        return std::string_view(pool_).substr(start, end - start);
      }
    }
    return std::nullopt;
  }

  std::vector<uint32_t> units_;
  std::string pool_;
};

class SequenceNormalizer : public Normalizer {
 public:
  SequenceNormalizer(const Json& j, const std::string& origin) {
    for (const Json& n : json_get<Json>(j, "normalizers", origin))
      if (auto made = make_normalizer(n, origin)) steps_.push_back(std::move(made));
  }
  std::string normalize(std::string s) const override {
    for (const auto& n : steps_) s = n->normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const std::string& origin) {
  if (j.is_null()) return nullptr;
  std::string type = json_get<std::string>(j, "type", origin + ": normalizer");
  const std::string where = origin + ": normalizer " + type;
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(json_get_or<bool>(j, "strip_left", true, where),
                                   json_get_or<bool>(j, "strip_right", true, where));
  if (type == "Prepend")
    return std::make_unique<Prepend>(json_get<std::string>(j, "prepend", where));
  if (type == "Replace") return std::make_unique<Replace>(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "Nmt") return std::make_unique<Nmt>();
  if (type == "BertNormalizer") return std::make_unique<BertNormalizer>(j, where);
  if (type == "Precompiled") return std::make_unique<Precompiled>(j, where);
  if (type == "Sequence") return std::make_unique<SequenceNormalizer>(j, origin);
  throw Error(origin + ": unknown normalizer type '" + type + "'");
}

}  // namespace kvlm::text
