#pragma once
// The continuous-batching engine (DESIGN.md §3, issue 5). One engine thread drives the model; any
// number of client threads submit and cancel requests. Every step runs one flattened forward pass:
// a decode token for each running sequence plus prefill chunks of newly admitted ones, under a
// per-step token budget. Because the forward pass and the sampler are batch-invariant, a request's
// tokens and logprobs are bit-identical to running it alone, whatever else shares its steps.
//
// Usage:
//   Engine engine(model, tokenizer, {.max_batch = 8});
//   engine.submit(request, [](const TokenEvent& ev) { ... });   // callback on the engine thread
//   TokenStream stream(engine, request);                        // or a blocking stream
//   while (auto ev = stream.next()) { ... }
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/engine/sampler.h"
#include "kvlm/model/config.h"
#include "kvlm/model/model.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm {

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error", "none"

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids (already templated/tokenized by the caller)
  SamplerParams sampling;
  int32_t max_tokens = 256;
  std::vector<std::string> stop;        // stop strings, matched on decoded text; never emitted
  std::vector<int32_t> stop_token_ids;  // extra ids that end the request (EOS ids are added by
                                        // the engine unless ignore_eos)
  bool ignore_eos = false;
  bool skip_special_tokens = true;
};

// One event of a request's stream, delivered in order on the engine thread.
struct TokenEvent {
  int32_t token = -1;  // -1 on a final event without a token
  std::string text;    // newly final text (held back for stop strings / partial UTF-8)
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  int32_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
};

// May throw: that ends only this request (reason kError).
using TokenCallback = std::function<void(const TokenEvent&)>;
using RequestId = uint64_t;

struct EngineOptions {
  int max_batch = 8;                // maximum running sequences
  int prefill_chunk = 512;          // tokens of one sequence's prefill per step
  int token_budget = 2048;          // new tokens per step, decodes + prefill chunks
  int64_t prompt_cache_bytes = -1;  // -1 = a quarter of the KV pool; 0 = off
};

struct EngineStats {
  int running = 0, waiting = 0;
  int64_t requests_total = 0, prompt_tokens_total = 0, generated_tokens_total = 0;
  int64_t prefix_hits = 0, prefix_misses = 0, prefix_cached_tokens = 0;
  int32_t kv_blocks_total = 0, kv_blocks_free = 0;
  int64_t kv_bytes_total = 0, kv_bytes_used = 0;
  int64_t prefix_cache_bytes = 0;
  double last_step_ms = 0;
  int64_t steps = 0;
};

// One Engine per Model at a time: its thread is the only user of the model and its KV pool.
class Engine {
 public:
  // Starts the engine thread. Error if the options are invalid (non-positive sizes).
  Engine(std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tokenizer,
         EngineOptions opts = {});
  ~Engine();  // stops the engine thread; unfinished requests get kCancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws kvlm::Error (naming prompt tokens, max_tokens, context limit, KV
  // capacity in tokens) if it can never fit, or after shutdown; otherwise it waits FIFO until it
  // can be admitted.
  RequestId submit(GenerationRequest req, TokenCallback on_token);
  // Safe from any thread, any time; takes effect within one step and frees the request's KV.
  // Unknown or finished ids are ignored.
  void cancel(RequestId id);
  EngineStats stats() const;  // thread-safe snapshot
  // Stops admitting: later submits throw, requests still waiting are cancelled, and running ones
  // run to completion (true) or are cancelled (false); then joins the engine thread. Idempotent.
  void shutdown(bool finish_running);
  const ModelConfig& model_config() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A blocking stream of one request's events, for callers that want to pull on their own thread.
// It must not outlive its Engine.
class TokenStream {
 public:
  // Submits the request; throws like Engine::submit.
  TokenStream(Engine& engine, GenerationRequest req);
  ~TokenStream();  // cancels the request if it has not finished
  TokenStream(const TokenStream&) = delete;
  TokenStream& operator=(const TokenStream&) = delete;

  // Blocks for the next event; nullopt after the final event has been returned.
  std::optional<TokenEvent> next();
  void cancel();
  RequestId id() const { return id_; }

  struct State;

 private:
  Engine* engine_;
  std::shared_ptr<State> state_;
  RequestId id_ = 0;
};

}  // namespace kvlm
