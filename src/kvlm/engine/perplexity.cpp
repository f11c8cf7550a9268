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

PerplexityResult perplexity(Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options) {
  const ModelConfig& config = model.config();
  check(config.max_position_embeddings <= 0 || options.context <= config.max_position_embeddings,
        "the perplexity context (" + std::to_string(options.context) + ") exceeds the model's context of " +
            std::to_string(config.max_position_embeddings) + " tokens");
  for (int32_t t : tokens)
    check(t >= 0 && t < config.vocab_size, "token id " + std::to_string(t) + " is outside the model's vocabulary of " +
                                               std::to_string(config.vocab_size));
  const auto start = std::chrono::steady_clock::now();
  PerplexityResult result;
  std::vector<int32_t> rows;
  for (const PerplexityWindow& w : perplexity_windows(int64_t(tokens.size()), options.context, options.stride)) {
    const auto window = tokens.subspan(size_t(w.begin), size_t(w.end - w.begin));
    // The logits at window row r predict token begin + r + 1.
    rows.resize(size_t(w.end - w.first_scored));
    std::iota(rows.begin(), rows.end(), int32_t(w.first_scored - 1 - w.begin));
    KVSequence seq(model.kv_pool());  // released at the end of the window
    prefill(model, seq, window, options.prefill_chunk, rows, [&](std::span<const int32_t> got, const Tensor& logits) {
      const std::vector<float> values = logits.to_f32_vector();
      const size_t vocab = values.size() / got.size();
      for (size_t i = 0; i < got.size(); ++i)
        result.nll_sum += token_nll(std::span(values).subspan(i * vocab, vocab), window[size_t(got[i]) + 1]);
    });
    result.scored_tokens += int64_t(rows.size());
    ++result.windows;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace kvlm
