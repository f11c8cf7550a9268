#include "kvlm/engine/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include "kvlm/base/error.h"
#include "kvlm/engine/generate.h"

namespace kvlm {

std::vector<PerplexityWindow> perplexity_windows(int64_t n_tokens, int context, int stride) {
  check(context >= 2, "the perplexity context must be at least 2 tokens, got " + std::to_string(context));
  check(stride >= 1 && stride <= context, "the perplexity stride must lie in [1, context = " +
                                              std::to_string(context) + "], got " + std::to_string(stride));
  check(n_tokens >= 2, "perplexity needs a text of at least 2 tokens, got " + std::to_string(n_tokens));
  std::vector<PerplexityWindow> windows;
  int64_t prev_end = 0;
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + context, n_tokens);
    windows.push_back({begin, end, std::max(prev_end, begin + 1)});
    prev_end = end;
    if (end == n_tokens) break;
  }
  return windows;
}

double token_nll(std::span<const float> logits, int32_t target) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(double(l) - double(max));
  return double(max) + std::log(sum) - double(logits[size_t(target)]);
}

double PerplexityResult::mean_nll() const { return scored_tokens > 0 ? nll_sum / double(scored_tokens) : 0.0; }
double PerplexityResult::perplexity() const { return std::exp(mean_nll()); }

namespace {

void check_text(const Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options) {
  const ModelConfig& config = model.config();
  check(config.max_position_embeddings <= 0 || options.context <= config.max_position_embeddings,
        "the perplexity context (" + std::to_string(options.context) + ") exceeds the model's context of " +
            std::to_string(config.max_position_embeddings) + " tokens");
  for (int32_t t : tokens)
    check(t >= 0 && t < config.vocab_size, "token id " + std::to_string(t) + " is outside the model's vocabulary of " +
                                               std::to_string(config.vocab_size));
}

// The logits of window rows [first_scored - 1 - begin, end - 1 - begin) (row r predicts token
// begin + r + 1), [rows, vocab] row-major, from a fresh sequence fed in prefill chunks.
std::vector<float> window_logits(Model& model, std::span<const int32_t> tokens, const PerplexityWindow& w,
                                 int prefill_chunk) {
  const auto window = tokens.subspan(size_t(w.begin), size_t(w.end - w.begin));
  std::vector<int32_t> rows(size_t(w.end - w.first_scored));
  std::iota(rows.begin(), rows.end(), int32_t(w.first_scored - 1 - w.begin));
  std::vector<float> out;
  out.reserve(rows.size() * size_t(model.config().vocab_size));
  KVSequence seq(model.kv_pool());  // released at the end of the window
  prefill(model, seq, window, prefill_chunk, rows, [&](std::span<const int32_t>, const Tensor& logits) {
    const std::vector<float> values = logits.to_f32_vector();
    out.insert(out.end(), values.begin(), values.end());
  });
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

PerplexityResult perplexity(Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options) {
  check_text(model, tokens, options);
  const auto start = std::chrono::steady_clock::now();
  const size_t vocab = size_t(model.config().vocab_size);
  PerplexityResult result;
  for (const PerplexityWindow& w : perplexity_windows(int64_t(tokens.size()), options.context, options.stride)) {
    const std::vector<float> logits = window_logits(model, tokens, w, options.prefill_chunk);
    for (int64_t t = w.first_scored; t < w.end; ++t)
      result.nll_sum += token_nll(std::span(logits).subspan(size_t(t - w.first_scored) * vocab, vocab), tokens[size_t(t)]);
    result.scored_tokens += w.end - w.first_scored;
    ++result.windows;
  }
  result.seconds = seconds_since(start);
  return result;
}

double softmax_kl(std::span<const float> p_logits, std::span<const float> q_logits) {
  const double pm = *std::max_element(p_logits.begin(), p_logits.end());
  const double qm = *std::max_element(q_logits.begin(), q_logits.end());
  double p_sum = 0, q_sum = 0;
  for (float l : p_logits) p_sum += std::exp(double(l) - pm);
  for (float l : q_logits) q_sum += std::exp(double(l) - qm);
  const double p_lse = pm + std::log(p_sum), q_lse = qm + std::log(q_sum);
  double kl = 0;
  for (size_t i = 0; i < p_logits.size(); ++i) {
    const double log_p = double(p_logits[i]) - p_lse, log_q = double(q_logits[i]) - q_lse;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(kl, 0.0);  // rounding can leave a tiny negative sum for equal rows
}

double KVEvalResult::perplexity_baseline() const {
  return scored_tokens > 0 ? std::exp(nll_baseline / double(scored_tokens)) : 0.0;
}
double KVEvalResult::perplexity_test() const {
  return scored_tokens > 0 ? std::exp(nll_test / double(scored_tokens)) : 0.0;
}
double KVEvalResult::mean_kl() const { return scored_tokens > 0 ? kl_sum / double(scored_tokens) : 0.0; }
double KVEvalResult::top1_agreement() const {
  return scored_tokens > 0 ? double(top1_agree) / double(scored_tokens) : 0.0;
}

KVEvalResult kv_eval(Model& baseline, Model& test, std::span<const int32_t> tokens, const PerplexityOptions& options) {
  check(baseline.config().vocab_size == test.config().vocab_size, "kv-eval: the two models' vocabularies differ");
  check_text(baseline, tokens, options);
  const auto start = std::chrono::steady_clock::now();
  const size_t vocab = size_t(baseline.config().vocab_size);
  KVEvalResult r;
  for (const PerplexityWindow& w : perplexity_windows(int64_t(tokens.size()), options.context, options.stride)) {
    const std::vector<float> base = window_logits(baseline, tokens, w, options.prefill_chunk);
    const std::vector<float> got = window_logits(test, tokens, w, options.prefill_chunk);
    for (int64_t t = w.first_scored; t < w.end; ++t) {
      const size_t at = size_t(t - w.first_scored) * vocab;
      const auto b = std::span(base).subspan(at, vocab), g = std::span(got).subspan(at, vocab);
      r.nll_baseline += token_nll(b, tokens[size_t(t)]);
      r.nll_test += token_nll(g, tokens[size_t(t)]);
      r.kl_sum += softmax_kl(b, g);
      // Ties go to the lowest id, as greedy sampling breaks them.
      r.top1_agree += std::max_element(b.begin(), b.end()) - b.begin() == std::max_element(g.begin(), g.end()) - g.begin();
    }
    r.scored_tokens += w.end - w.first_scored;
  }
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace kvlm
