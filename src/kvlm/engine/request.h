#pragma once
// Engine-internal state of one request: its KV sequence and token history (what the scheduler
// feeds), its sampler, and the output side that turns sampled tokens into TokenEvents (EOS and
// stop ids, stop strings with hold-back, the token limit and the context limit), following the
// single-sequence path of engine/generate.h rule for rule.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/engine/engine.h"
#include "kvlm/engine/sampler.h"
#include "kvlm/engine/stop_strings.h"
#include "kvlm/kv/kv_cache.h"
#include "kvlm/text/detokenizer.h"

namespace kvlm {

// Errors for a request the model can never run: empty prompt, ids outside the vocabulary,
// max_tokens < 1, a prompt that fills the model's context.
void validate_request(const GenerationRequest& req, const ModelConfig& config);

// The ids that end a request: the model's EOS ids (unless ignore_eos) and the request's own
// stop_token_ids, sorted and deduplicated.
std::vector<int32_t> request_end_ids(const GenerationRequest& req,
                                     const std::vector<int32_t>& eos_ids);

// The sampler parameters a request runs with: mlx-lm protects the newline and EOS tokens from
// XTC, so they are filled in when the caller named none.
SamplerParams effective_sampler_params(const GenerationRequest& req, const Tokenizer& tokenizer,
                                       const std::vector<int32_t>& eos_ids, int32_t vocab_size);

// Turns sampled tokens into the request's events.
class OutputStream {
 public:
  // `context_limit`: the model's max_position_embeddings (0 = none).
  OutputStream(const Tokenizer& tokenizer, const GenerationRequest& req,
               std::vector<int32_t> end_ids, int64_t context_limit);

  // Applies a sampled token; `kv_length` is the number of tokens now in the KV cache. Returns
  // the event to deliver; it is final (finished) when the token ended the request.
  TokenEvent accept(const SampleResult& sample, int32_t kv_length);
  // A final event without a token, for cancellation and errors.
  TokenEvent end(FinishReason reason, std::string error = {});

  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason reason() const { return reason_; }
  int32_t completion_tokens() const { return completion_tokens_; }

 private:
  // Releases held-back text at the end of the stream; a stop string found in it still stops.
  std::string flush();

  StreamingDetokenizer detok_;
  StopStringMatcher stops_;
  std::vector<int32_t> end_ids_;
  int32_t max_tokens_;
  int64_t context_limit_;
  int32_t completion_tokens_ = 0;
  FinishReason reason_ = FinishReason::kNone;
};

struct Request {
  Request(RequestId id, GenerationRequest req, TokenCallback on_token, KVPool& pool,
          const Tokenizer& tokenizer, const std::vector<int32_t>& eos_ids, const ModelConfig& config);

  RequestId id;
  GenerationRequest req;
  TokenCallback on_token;
  Sampler sampler;
  OutputStream output;
  std::unique_ptr<KVSequence> kv;  // heap-held: KVSequence is neither copyable nor movable
  std::vector<int32_t> history;    // the prompt, then every generated token
  uint64_t step = 0;               // samples taken (keys the RNG)
  int64_t reserve_tokens = 0;      // what the request can grow to: prompt + max_tokens, capped
  int32_t reserved_blocks = 0;     // fresh blocks reserved at admission (beyond shared ones)
  int32_t shared_blocks = 0;       // prefix-cache blocks it started from
  int32_t cached_tokens = 0;
  bool prompt_published = false;   // the prompt's full blocks were offered to the prefix cache
  std::optional<TokenEvent> final_event;  // set when the request ends outside a sample

  int32_t prompt_tokens() const { return int32_t(req.prompt.size()); }
  // Tokens of the history not yet in the KV cache: the rest of the prompt, or the last sample.
  int32_t pending() const { return int32_t(history.size()) - kv->length(); }
  bool prefilling() const { return kv->length() < prompt_tokens(); }
  bool finished() const { return output.finished(); }
  // Blocks reserved at admission that the sequence has not allocated yet.
  int32_t outstanding_blocks() const;
  // Fills in the counters every event carries.
  void stamp(TokenEvent& ev) const;
};

}  // namespace kvlm
