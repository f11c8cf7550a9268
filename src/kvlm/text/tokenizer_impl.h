#pragma once
// The loaded tokenizer pipeline behind kvlm::Tokenizer.
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvlm/text/added_tokens.h"
#include "kvlm/text/components.h"

namespace kvlm::text {

struct TokenizerImpl {
  std::string origin;  // the tokenizer.json path, for messages
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;

  std::vector<AddedToken> added;                       // as listed in the file
  std::unordered_map<int32_t, size_t> added_by_id;     // id -> index into `added`
  std::unordered_map<std::string, int32_t> added_ids;  // content -> id
  // Tokens matched in the raw text, and tokens matched after normalization (their contents
  // normalized too).
  std::unique_ptr<TokenMatcher> raw_matcher, normalized_matcher;
  std::vector<const AddedToken*> raw_tokens, normalized_tokens;

  int32_t vocab_size = 0;
  std::optional<int32_t> bos_id, eos_id;

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // The token strings that the decoder chain receives for `ids`.
  std::vector<std::string> decoder_input(std::span<const int32_t> ids, bool skip_special) const;
  // Whether `id` contributes a string to decoder_input (known, and not a skipped special).
  bool yields_token(int32_t id, bool skip_special) const;
  std::string run_decoder(std::vector<std::string> tokens) const;
  const AddedToken* added_token(int32_t id) const;
};

}  // namespace kvlm::text
