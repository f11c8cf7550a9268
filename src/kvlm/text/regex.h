#pragma once
// A compiled Oniguruma regex, configured as Hugging Face `tokenizers` configures it (Ruby syntax,
// UTF-8), so that patterns from tokenizer.json such as `\p{L}`, `(?i:'s|'t)` or `\s+(?!\S)`
// match exactly the same spans.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvlm::text {

class Regex {
 public:
  // Throws kvlm::Error naming `origin` and the pattern when it does not compile.
  Regex(const std::string& pattern, const std::string& origin);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches as byte ranges [start, end), scanning left to right. Empty
  // matches are reported, but never directly after the previous match (the convention of the
  // Rust onig crate's find_iter, which tokenizers uses).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvlm::text
