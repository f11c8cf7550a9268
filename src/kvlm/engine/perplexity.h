#pragma once
// Perplexity by the strided sliding window of Hugging Face's guide
// (https://huggingface.co/docs/transformers/perplexity): windows of `context` tokens start every
// `stride` tokens; each window is a fresh sequence, and only the tokens not scored by an earlier
// window (its last end - prev_end tokens) are scored, each conditioned on everything before it
// in the window. The first token of the text has no context and is never scored. The result is
// the mean negative log-likelihood over all scored tokens and its exponential.
#include <cstdint>
#include <span>
#include <vector>

#include "kvlm/model/model.h"

namespace kvlm {

struct PerplexityOptions {
  int context = 512;
  int stride = 256;
  int prefill_chunk = 512;  // a window is fed in chunks of at most this many tokens
};

// One window: tokens [begin, end) are fed; tokens [first_scored, end) are scored.
struct PerplexityWindow {
  int64_t begin = 0, end = 0, first_scored = 0;
  bool operator==(const PerplexityWindow&) const = default;
};

// The windows for a text of n_tokens tokens. Errors on context < 2, stride outside [1, context],
// or fewer than 2 tokens.
std::vector<PerplexityWindow> perplexity_windows(int64_t n_tokens, int context, int stride);

struct PerplexityResult {
  int64_t scored_tokens = 0;
  int64_t windows = 0;
  double nll_sum = 0;  // natural log
  double seconds = 0;
  double mean_nll() const;
  double perplexity() const;
};

PerplexityResult perplexity(Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options);

// -log softmax(logits)[target], computed in double.
double token_nll(std::span<const float> logits, int32_t target);

// Teacher-forced comparison of a KV codec against a baseline cache (`kvlm kv-eval`): the same
// text and windows as perplexity() run through two loads of one model that differ only in their
// KV codec; at every scored position the two next-token distributions are compared. Prefill reads
// the cache through the codec like decode does (a token is encoded when written), so this
// measures exactly what decoding with the codec would see, without a decode loop.
struct KVEvalResult {
  int64_t scored_tokens = 0;
  double nll_baseline = 0, nll_test = 0;  // sums, natural log
  double kl_sum = 0;                      // sum of KL(baseline || test) over scored positions
  int64_t top1_agree = 0;                 // positions whose argmax tokens agree
  double seconds = 0;
  double perplexity_baseline() const;
  double perplexity_test() const;
  double mean_kl() const;
  double top1_agreement() const;  // fraction
};

// Errors as perplexity(); the two models must have the same vocabulary.
KVEvalResult kv_eval(Model& baseline, Model& test, std::span<const int32_t> tokens,
                     const PerplexityOptions& options);

// KL(p || q) of the softmax distributions of two logit rows, in double.
double softmax_kl(std::span<const float> p_logits, std::span<const float> q_logits);

}  // namespace kvlm
