#pragma once
// The token sampler. It follows mlx-lm's chain (make_logits_processors then make_sampler; see
// reference/mlx-bun-inventory.md §G), step for step:
//
//   logits → logit_bias → repetition_penalty → presence_penalty → frequency_penalty
//          → log-softmax (the distribution reported as logprobs)
//          → temperature 0: argmax (ties → lowest id)
//          → otherwise: top_p → min_p → XTC → top_k → categorical(lp · (1/temperature))
//
// Filters set excluded log-probabilities to -inf. Randomness comes from a counter-based RNG keyed
// by (seed, step), so a sample depends only on the request's own seed and step index.
//
// Deliberate departures from mlx-lm, all in edge cases where mlx-lm raises or is unspecified:
//   - top_k >= vocabulary size keeps every token (mlx-lm raises);
//   - ties in the sort orders used by top_p, min_p, top_k and top_logprobs are broken by lower
//     token id first (mlx-lm's argsort/argpartition leave them unspecified);
//   - the categorical draw inverts the CDF with one uniform number instead of Gumbel-max; both
//     sample the same distribution, and neither is bit-comparable across engines.
#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace kvlm {

struct SamplerParams {
  // Logits processors, applied to the raw logits in this order.
  std::map<int32_t, float> logit_bias;  // token id → added bias
  float repetition_penalty = 0.0f;      // 0 = off; positive logits ÷ p, negative ones × p
  int repetition_context_size = 20;     // window over history; 0 = the whole history
  float presence_penalty = 0.0f;        // 0 = off; subtracted once per distinct token in window
  int presence_context_size = 20;
  float frequency_penalty = 0.0f;       // 0 = off; subtracted once per occurrence in window
  int frequency_context_size = 20;

  // Sampling.
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 0.0f;        // active when 0 < top_p < 1
  float min_p = 0.0f;        // active when != 0; must lie in [0, 1]
  int min_tokens_to_keep = 1;
  float xtc_probability = 0.0f;  // active when > 0
  float xtc_threshold = 0.0f;    // in [0, 0.5]
  std::vector<int32_t> xtc_special_tokens;  // never removed by XTC (EOS ids, newline)
  int top_k = 0;                 // active when > 0
  uint64_t seed = 0;

  int top_logprobs = 0;  // how many of the most likely tokens to report with each sample
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;  // of `token`, under the log-softmax after the processors
  std::vector<TokenLogprob> top_logprobs;  // most likely first, ties → lower id
};

class Sampler {
 public:
  // Validates `params` against the vocabulary size; throws kvlm::Error naming the bad value.
  Sampler(SamplerParams params, int32_t vocab_size);

  // Samples one token from a row of `vocab_size` logits. `history` holds the prompt tokens
  // followed by every token generated so far (the penalties' window); `step` is the request's
  // sample index, which with the seed keys the RNG.
  SampleResult sample(std::span<const float> logits, std::span<const int32_t> history,
                      uint64_t step) const;

  const SamplerParams& params() const { return params_; }

 private:
  void apply_processors(std::vector<float>& logits, std::span<const int32_t> history) const;
  int32_t draw(const std::vector<float>& logprobs, uint64_t step) const;

  SamplerParams params_;
  int32_t vocab_size_;
};

// The individual stages, exposed so each can be tested on its own. All take a full row.
void apply_logit_bias(std::vector<float>& logits, const std::map<int32_t, float>& bias);
void apply_repetition_penalty(std::vector<float>& logits, std::span<const int32_t> history,
                              float penalty, int context_size);
void apply_presence_penalty(std::vector<float>& logits, std::span<const int32_t> history,
                            float penalty, int context_size);
void apply_frequency_penalty(std::vector<float>& logits, std::span<const int32_t> history,
                             float penalty, int context_size);
void log_softmax(std::vector<float>& logits);
void apply_top_p(std::vector<float>& logprobs, float top_p);
void apply_min_p(std::vector<float>& logprobs, float min_p, int min_tokens_to_keep);
// `coin` is the uniform draw in [0, 1): XTC fires when coin <= probability (mlx-lm keeps the
// logits unchanged when uniform > probability).
void apply_xtc(std::vector<float>& logprobs, float probability, float threshold,
               std::span<const int32_t> special_tokens, double coin);
void apply_top_k(std::vector<float>& logprobs, int top_k);
// Samples from softmax(logprobs · (1/temperature)) by inverting its CDF at `u` in [0, 1).
int32_t categorical_sample(const std::vector<float>& logprobs, float temperature, double u);
// Greedy choice: the largest value, ties → lowest id.
int32_t argmax(const std::vector<float>& values);
// The n largest values in descending order, ties → lower id.
std::vector<TokenLogprob> top_n(const std::vector<float>& logprobs, int n);

}  // namespace kvlm
