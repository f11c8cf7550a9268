#pragma once
// Single-sequence generation: prompt ids → chunked prefill → decode loop, stopping on an EOS id,
// a stop string or the token limit, streaming detokenized text per token. The batched scheduler
// serves many sequences; this is the path of `kvlm generate` and the reference a batched run must
// reproduce token for token.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/engine/engine.h"  // FinishReason, shared with the batched engine
#include "kvlm/engine/sampler.h"
#include "kvlm/engine/stop_strings.h"
#include "kvlm/model/model.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm {

// The tokens XTC never removes (mlx-lm's rule): the newline token(s) and the EOS ids.
std::vector<int32_t> xtc_protected_tokens(const Tokenizer& tokenizer, const std::vector<int32_t>& eos,
                                          int32_t vocab_size);

// Feeds `tokens` into `seq` (which holds seq.length() tokens already) in chunks of at most
// `chunk` tokens. `rows` are ascending indices into `tokens` whose logits are wanted; `sink` gets
// each chunk's wanted rows (indices into `tokens`) with their logits, f32 [rows, vocab].
using LogitsSink = std::function<void(std::span<const int32_t> rows, const Tensor& logits)>;
void prefill(Model& model, KVSequence& seq, std::span<const int32_t> tokens, int chunk,
             std::span<const int32_t> rows, const LogitsSink& sink);

// The ids that end generation: the model config's and generation_config.json's eos_token_id
// (already merged in ModelConfig) and the tokenizer's eos token, deduplicated and sorted.
std::vector<int32_t> stop_token_ids(const ModelConfig& config, const Tokenizer& tokenizer);

struct GenerateOptions {
  SamplerParams sampler;  // xtc_special_tokens is filled in (newline + EOS ids) when empty
  int max_tokens = 256;
  int prefill_chunk = 512;
  std::vector<std::string> stop_strings;
  bool skip_special_tokens = true;  // in the streamed text
};

struct GenerationStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;   // sampled tokens, not counting a final EOS
  int decode_steps = 0;       // forward passes after the prefill (one token each)
  double prefill_seconds = 0; // from the start until the first token is sampled (TTFT)
  double decode_seconds = 0;  // from the first token until the end
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct GeneratedToken {
  int32_t token = 0;
  std::string_view text;  // newly final text (may be empty: held back for UTF-8 or a stop string)
  const SampleResult* sample = nullptr;
};

struct GenerationResult {
  std::string text;
  std::vector<int32_t> tokens;  // generated ids, without the final EOS
  FinishReason finish = FinishReason::kLength;  // kStop (EOS or stop string) or kLength
  GenerationStats stats;
};

// Called once per generated token, and once more (token -1, sample null) if the end of the
// stream releases held-back text.
using GenerateCallback = std::function<void(const GeneratedToken&)>;

// Generates a continuation of `prompt` in a fresh sequence of the model's KV pool, which is
// released on return. Errors: empty prompt, a prompt that does not fit the model's context,
// invalid sampler parameters.
GenerationResult generate(Model& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                          const GenerateOptions& options, const GenerateCallback& on_token = {});

}  // namespace kvlm
