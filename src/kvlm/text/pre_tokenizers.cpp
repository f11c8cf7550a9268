// Pre-tokenizers: split normalized text into the words the model sees.
#include <array>

#include "kvlm/base/error.h"
#include "kvlm/text/components.h"
#include "kvlm/text/regex.h"
#include "kvlm/text/unicode.h"

namespace kvlm::text {

namespace {

// The byte -> character table of GPT-2's byte-level BPE: printable Latin-1 bytes map to
// themselves, the rest to U+0100 onwards in byte order.
struct ByteTable {
  std::array<std::string, 256> to_char;
  std::array<int, 0x200> from_char;
  ByteTable() {
    from_char.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
      to_char[static_cast<size_t>(b)] = to_utf8(c);
      from_char[c] = b;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

// Replaces every piece by its sub-pieces [ranges]; only the first sub-piece of a piece that
// starts the input, and only if it begins at offset 0, keeps `at_start`.
template <typename SplitFn>
void split_each(std::vector<Piece>& pieces, SplitFn split) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) {
    for (auto [b, e] : split(std::string_view(p.text)))
      out.push_back({p.text.substr(b, e - b), p.at_start && b == 0});
  }
  pieces = std::move(out);
}

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(const Json& j, const std::string& origin)
      : add_prefix_space_(json_get_or<bool>(j, "add_prefix_space", true, origin)),
        use_regex_(json_get_or<bool>(j, "use_regex", true, origin)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_)
      for (Piece& p : pieces)
        if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, " ");
    if (use_regex_) split_each(pieces, gpt2_split);
    const ByteTable& table = byte_table();
    for (Piece& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (unsigned char b : p.text) mapped += table.to_char[b];
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
};

class Split : public PreTokenizer {
 public:
  Split(const Json& j, const std::string& origin)
      : pattern_(json_get<Json>(j, "pattern", origin), origin),
        behavior_(parse_split_behavior(json_get<Json>(j, "behavior", origin), origin)),
        invert_(json_get_or<bool>(j, "invert", false, origin)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](std::string_view t) {
      return split_by_matches(t, pattern_.find_all(t), behavior_, invert_);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

enum class PrependScheme { Always, First, Never };

class Metaspace : public PreTokenizer {
 public:
  Metaspace(const Json& j, const std::string& origin)
      : replacement_(json_get_or<std::string>(j, "replacement", "\u2581", origin)),
        split_(json_get_or<bool>(j, "split", true, origin)) {
    check(!replacement_.empty() && to_code_points(replacement_).size() == 1,
          origin + ": replacement must be one character, got '" + replacement_ + "'");
    scheme_ = parse_prepend_scheme(j, origin);
  }

  static PrependScheme parse_prepend_scheme(const Json& j, const std::string& origin) {
    if (j.contains("prepend_scheme") && !j.at("prepend_scheme").is_null()) {
      std::string s = json_get<std::string>(j, "prepend_scheme", origin);
      if (s == "always") return PrependScheme::Always;
      if (s == "first") return PrependScheme::First;
      if (s == "never") return PrependScheme::Never;
      throw Error(origin + ": unknown prepend_scheme '" + s + "'");
    }
    // Older files only have add_prefix_space.
    return json_get_or<bool>(j, "add_prefix_space", true, origin) ? PrependScheme::Always
                                                                   : PrependScheme::Never;
  }

  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (Piece& p : pieces) {
      std::string replaced;
      replaced.reserve(p.text.size() + replacement_.size());
      for (char c : p.text) {
        if (c == ' ')
          replaced += replacement_;
        else
          replaced += c;
      }
      bool starts = replaced.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::Always ||
                      (scheme_ == PrependScheme::First && p.at_start)))
        replaced.insert(0, replacement_);
      p.text = std::move(replaced);
    }
    if (split_)
      split_each(pieces, [&](std::string_view t) {
        std::vector<std::pair<size_t, size_t>> m;
        for (size_t pos = t.find(replacement_); pos != std::string_view::npos;
             pos = t.find(replacement_, pos + replacement_.size()))
          m.emplace_back(pos, pos + replacement_.size());
        return split_by_matches(t, m, SplitBehavior::MergedWithNext);
      });
  }

 private:
  std::string replacement_;
  bool split_;
  PrependScheme scheme_;
};

// Pre-tokenizers that split on a per-character predicate with a fixed behaviour.
template <typename Pred>
class CharSplit : public PreTokenizer {
 public:
  CharSplit(Pred pred, SplitBehavior behavior) : pred_(pred), behavior_(behavior) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](std::string_view t) {
      return split_by_matches(t, char_matches(t, pred_), behavior_);
    });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> char_split(Pred pred, SplitBehavior behavior) {
  return std::make_unique<CharSplit<Pred>>(pred, behavior);
}

// Whitespace: words are runs of \w or runs of other non-space characters.
class Whitespace : public PreTokenizer {
 public:
  // \w spelled out as Rust's regex crate defines it (HF's engine): Oniguruma's \w lacks
  // Alphabetic symbols such as U+1D62 and the joiners U+200C/U+200D.
  explicit Whitespace(const std::string& origin)
      : regex_(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}\s]+)",
               origin) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](std::string_view t) {
      return split_by_matches(t, regex_.find_all(t), SplitBehavior::Removed, /*invert=*/true);
    });
  }

 private:
  Regex regex_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  SequencePreTokenizer(const Json& j, const std::string& origin) {
    for (const Json& p : json_get<Json>(j, "pretokenizers", origin))
      if (auto made = make_pre_tokenizer(p, origin)) steps_.push_back(std::move(made));
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& s : steps_) s->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class BertPreTokenizer : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    whitespace_->pre_tokenize(pieces);
    punctuation_->pre_tokenize(pieces);
  }

 private:
  std::unique_ptr<PreTokenizer> whitespace_ = char_split(is_whitespace, SplitBehavior::Removed);
  std::unique_ptr<PreTokenizer> punctuation_ = char_split(is_punctuation, SplitBehavior::Isolated);
};

enum class CharClass { Space, Letter, Number, Other };

CharClass classify(char32_t c) {
  if (is_whitespace(c)) return CharClass::Space;
  if (is_letter(c)) return CharClass::Letter;
  if (is_numeric(c)) return CharClass::Number;
  return CharClass::Other;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd, lowercase only) at t[i], or 0.
size_t contraction_len(std::string_view t, size_t i) {
  if (t[i] != '\'' || i + 1 >= t.size()) return 0;
  char a = t[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  char b = i + 2 < t.size() ? t[i + 2] : '\0';
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::vector<std::pair<size_t, size_t>> gpt2_split(std::string_view t) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t i = 0;
  while (i < t.size()) {
    if (size_t n = contraction_len(t, i)) {
      out.emplace_back(i, i + n);
      i += n;
      continue;
    }
    size_t next = i;
    CharClass cls = classify(next_code_point(t, next));
    size_t run_start = i;
    if (t[i] == ' ' && next < t.size()) {  // " ?" before a letter, number or other run
      size_t after = next;
      CharClass follow = classify(next_code_point(t, after));
      if (follow != CharClass::Space) cls = follow, run_start = next;
    }
    if (cls != CharClass::Space) {
      size_t end = run_start;
      while (end < t.size()) {
        size_t k = end;
        if (classify(next_code_point(t, k)) != cls) break;
        end = k;
      }
      out.emplace_back(i, end);
      i = end;
      continue;
    }
    // A whitespace run: all of it at the end of the text; before other text, all but its last
    // character (\s+(?!\S)), unless it is a single character (\s+).
    size_t end = i, last = i;
    while (end < t.size()) {
      size_t k = end;
      if (!is_whitespace(next_code_point(t, k))) break;
      last = end;
      end = k;
    }
    if (end < t.size() && last > i) end = last;
    out.emplace_back(i, end);
    i = end;
  }
  return out;
}

const std::string& byte_to_char(uint8_t b) { return byte_table().to_char[b]; }

int byte_from_char(char32_t c) { return c < 0x200 ? byte_table().from_char[c] : -1; }

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const std::string& origin) {
  if (j.is_null()) return nullptr;
  std::string type = json_get<std::string>(j, "type", origin + ": pre_tokenizer");
  const std::string where = origin + ": pre_tokenizer " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(j, where);
  if (type == "Split") return std::make_unique<Split>(j, where);
  if (type == "Metaspace") return std::make_unique<Metaspace>(j, where);
  if (type == "Whitespace") return std::make_unique<Whitespace>(where);
  if (type == "WhitespaceSplit") return char_split(is_whitespace, SplitBehavior::Removed);
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "Punctuation")
    return char_split(is_punctuation,
                      j.contains("behavior")
                          ? parse_split_behavior(j.at("behavior"), where)
                          : SplitBehavior::Isolated);
  if (type == "Digits")
    return char_split(is_numeric, json_get_or<bool>(j, "individual_digits", false, where)
                                      ? SplitBehavior::Isolated
                                      : SplitBehavior::Contiguous);
  if (type == "CharDelimiterSplit") {
    std::vector<char32_t> d = to_code_points(json_get<std::string>(j, "delimiter", where));
    check(d.size() == 1, where + ": delimiter must be one character");
    char32_t delim = d[0];
    return char_split([delim](char32_t c) { return c == delim; }, SplitBehavior::Removed);
  }
  if (type == "Sequence") return std::make_unique<SequencePreTokenizer>(j, origin);
  throw Error(origin + ": unknown pre_tokenizer type '" + type + "'");
}

}  // namespace kvlm::text
