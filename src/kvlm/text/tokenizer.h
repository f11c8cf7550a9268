#pragma once
// Tokenizer: Hugging Face `tokenizer.json` reimplemented so that ids match the Python/Rust
// `tokenizers` library id for id. The pipeline is HF's: added tokens are split out first, then
// normalizer -> pre-tokenizer -> model (BPE / Unigram / WordPiece) -> post-processor; decoding
// runs the decoder chain over the vocabulary pieces.
//
// A Tokenizer is immutable after loading and cheap to copy (the state is shared), so it can be
// handed to every request and thread without locking; its internal word cache is thread-safe.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvlm {

namespace text {
struct TokenizerImpl;
}

class Tokenizer {
 public:
  // Loads a tokenizer.json. Errors (kvlm::Error) name the file and the offending field, or the
  // byte offset for malformed JSON.
  static Tokenizer from_file(const std::string& tokenizer_json_path);
  // Loads dir/tokenizer.json; dir/tokenizer_config.json, when present, supplies bos/eos tokens.
  static Tokenizer from_model_dir(const std::string& dir);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The raw vocabulary piece (e.g. "Ġthe", "▁the", "<0x0A>"); "" for an out-of-range id.
  std::string id_to_token(int32_t id) const;
  // Number of ids, counting added tokens (max id + 1).
  int32_t vocab_size() const;
  bool is_special(int32_t id) const;

  // From tokenizer_config.json (from_model_dir only), when the named token is in the vocabulary.
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;

  // For the streaming detokenizer: the loaded pipeline.
  const text::TokenizerImpl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::shared_ptr<const text::TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const text::TokenizerImpl> impl_;
};

}  // namespace kvlm
