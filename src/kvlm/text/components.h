#pragma once
// The stages of the tokenizer pipeline, one interface per stage, each built from its
// tokenizer.json section by a factory that rejects unknown "type" values with a kvlm::Error
// naming the component kind, the type and the file (`origin`).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/base/json.h"

namespace kvlm::text {

// ---- normalizers ----
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};
// `j` may be null (no normalizer): returns nullptr.
std::unique_ptr<Normalizer> make_normalizer(const Json& j, const std::string& origin);

// ---- pre-tokenizers ----
// A piece of text on its way to the model. `at_start` marks the piece that begins the original
// input (Metaspace's prepend_scheme "first" prepends only there).
struct Piece {
  std::string text;
  bool at_start = false;
};
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const std::string& origin);

// ---- models ----
class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized word.
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual const std::string* id_to_token(int32_t id) const = 0;  // nullptr when out of range
  virtual int32_t size() const = 0;                               // ids are 0..size()-1
};
// Infers the model type from its fields when "type" is absent (older serialisations).
std::unique_ptr<Model> make_model(const Json& j, const std::string& origin);

// ---- post-processors ----
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};
std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const std::string& origin);

// ---- decoders ----
class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the list of token strings (HF's decode_chain); the result is their concatenation.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // True when, with `last` as the newest token string, a token appended later can still change
  // the text decoded so far beyond what the streaming detokenizer already guards against
  // (trailing U+FFFD). ByteFallback: an open run of byte tokens may still turn invalid as a
  // whole; Strip(stop > 0): stripped trailing characters come back. Looking at the last token
  // only keeps a held-back push O(1).
  virtual bool holds_tail(const std::string& last) const { return false; }
};
std::unique_ptr<Decoder> make_decoder(const Json& j, const std::string& origin);

// GPT-2's pre-tokenization regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// as a hand-written scanner (ByteLevel's use_regex); returns the byte ranges of the matches,
// which cover the whole text. Tested against Oniguruma running the pattern itself.
std::vector<std::pair<size_t, size_t>> gpt2_split(std::string_view text);
extern const char* const kGpt2Pattern;

// ---- shared helpers ----
// The GPT-2 byte <-> printable character table used by ByteLevel components.
const std::string& byte_to_char(uint8_t b);   // UTF-8 of the mapped character
int byte_from_char(char32_t c);               // -1 when c is not in the table

// HF's SplitDelimiterBehavior.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
SplitBehavior parse_split_behavior(const Json& j, const std::string& origin);
// Splits `text` given the matched byte ranges (sorted, non-overlapping), per `behavior`, and
// returns the byte ranges of the resulting non-empty pieces. `invert` swaps matches and the text
// between them.
std::vector<std::pair<size_t, size_t>> split_by_matches(std::string_view text,
                                          const std::vector<std::pair<size_t, size_t>>& matches,
                                          SplitBehavior behavior, bool invert = false);
// Matches of every code point satisfying `pred`, one match per code point.
template <typename Pred>
std::vector<std::pair<size_t, size_t>> char_matches(std::string_view text, Pred pred);

// A "pattern" object: {"String": "..."} (literal) or {"Regex": "..."}.
class Pattern {
 public:
  Pattern(const Json& j, const std::string& origin);
  ~Pattern();
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  std::string literal_;
  std::unique_ptr<class Regex> regex_;
};

}  // namespace kvlm::text

#include "kvlm/text/unicode.h"

template <typename Pred>
std::vector<std::pair<size_t, size_t>> kvlm::text::char_matches(std::string_view text, Pred pred) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    char32_t c = next_code_point(text, i);
    if (pred(c)) out.emplace_back(start, i);
  }
  return out;
}
