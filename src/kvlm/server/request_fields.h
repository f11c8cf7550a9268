#pragma once
// Reading and validating the fields that every generation endpoint shares (sampling, limits,
// stop strings, logprobs), and the layered defaults they fall back to:
//   request field → server flag → generation_config.json → built-in.
// Validation messages follow mlx_lm.server word for word where it has one, so clients that
// match on them keep working; each error names its field in `param`.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/base/json.h"
#include "kvlm/engine/sampler.h"

namespace kvlm::server {

// Request bodies are parsed into key-ordered documents: chat templates print tool schemas and
// tool-call arguments with tojson, and transformers prints them in the order the client sent.
using RequestJson = nlohmann::ordered_json;

// Typed access to a request object's optional fields. JSON null counts as absent, because
// OpenAI client libraries send null for parameters the caller left unset. A present field of
// the wrong type (or out of range) throws invalid_request(message, key).
class FieldReader {
 public:
  explicit FieldReader(const RequestJson& obj) : obj_(obj) {}

  bool has(const char* key) const;
  std::optional<bool> boolean(const char* key, const std::string& message) const;
  // Any JSON number (integers included); non-finite values never come out of the JSON parser.
  std::optional<double> number(const char* key, const std::string& message) const;
  // Number in [lo, hi] (inclusive), else `message`.
  std::optional<double> number_in(const char* key, double lo, double hi,
                                  const std::string& message) const;
  // A JSON integer (not 1.0) in [lo, hi], else `message`.
  std::optional<int64_t> integer_in(const char* key, int64_t lo, int64_t hi,
                                    const std::string& message) const;
  std::optional<std::string> string(const char* key, const std::string& message) const;

 private:
  const RequestJson* get(const char* key) const;
  const RequestJson& obj_;
};

// One layer of defaults; an unset field falls through to the next layer.
struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  std::optional<int32_t> max_tokens;
  std::optional<uint64_t> seed;
};

// Fields of `high` that are set, else those of `low`.
SamplingDefaults merge_defaults(const SamplingDefaults& high, const SamplingDefaults& low);
// mlx_lm.server's own defaults: greedy (temperature 0), top_p 1, top_k 0, min_p 0, no penalty.
SamplingDefaults builtin_defaults();
// The transformers rule for generation_config.json: its temperature/top_p/top_k/min_p/
// repetition_penalty are sampling settings only when do_sample is true (temperature defaulting to
// 1.0); do_sample false pins greedy decoding. max_new_tokens is taken either way. `origin` names
// the file in errors about wrongly typed fields.
SamplingDefaults generation_config_defaults(const Json& generation_config,
                                            const std::string& origin);

// A seed for a request that names none: the clock XOR a per-process Weyl sequence, so requests
// arriving in the same millisecond still sample differently.
uint64_t next_default_seed();

// What the OpenAI-style endpoints share.
struct GenerationSettings {
  std::string model;
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  std::optional<int32_t> max_tokens;    // request or defaults; unset: the endpoint decides
  SamplerParams sampling;
  std::vector<std::string> stop;        // empty strings removed
  bool ignore_eos = false;              // vLLM's extension: generate through EOS (benchmarks)
  bool logprobs = false;                // report each token's logprob
  int top_logprobs = 0;                 // and this many alternatives (> 0 implies logprobs)
};

// Reads and validates the shared fields of a chat or text completion request.
GenerationSettings parse_generation_settings(const RequestJson& body, const SamplingDefaults& defaults);

// The stop field: a string or a list of strings; empty strings are dropped (they would match
// everywhere). `key` is "stop" (OpenAI) or "stop_sequences" (Anthropic).
std::vector<std::string> parse_stop(const RequestJson& body, const char* key);

// Refuses a request whose prompt plus completion cannot fit the model's context window
// (OpenAI's context_length_exceeded error). `param` names the prompt field.
void check_context_length(int64_t prompt_tokens, int64_t max_tokens, int64_t context_window,
                          const std::string& param);

}  // namespace kvlm::server
