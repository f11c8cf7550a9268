#include "kvlm/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "kvlm/base/error.h"
#include "kvlm/engine/rng.h"

namespace kvlm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The last `context_size` tokens of history; 0 means all of it (Python's history[-0:]).
std::span<const int32_t> window(std::span<const int32_t> history, int context_size) {
  if (context_size == 0 || size_t(context_size) >= history.size()) return history;
  return history.subspan(history.size() - size_t(context_size));
}

std::vector<int32_t> distinct(std::span<const int32_t> tokens) {
  std::vector<int32_t> out(tokens.begin(), tokens.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Token ids in descending order of value (ties → lower id first), sorted lazily: callers that
// look at the first few entries only pay for a partial sort of those.
class DescendingOrder {
 public:
  explicit DescendingOrder(const std::vector<float>& values) : values_(values), ids_(values.size()) {
    std::iota(ids_.begin(), ids_.end(), 0);
  }
  size_t size() const { return ids_.size(); }
  int32_t operator[](size_t i) {
    if (i >= sorted_) extend(std::max(i + 1, std::min(size(), std::max<size_t>(64, 2 * sorted_))));
    return ids_[i];
  }

 private:
  void extend(size_t n) {
    // Everything past sorted_ ranks after the sorted prefix, so the prefix can grow in place.
    auto before = [this](int32_t a, int32_t b) {
      return values_[size_t(a)] > values_[size_t(b)] || (values_[size_t(a)] == values_[size_t(b)] && a < b);
    };
    std::partial_sort(ids_.begin() + long(sorted_), ids_.begin() + long(n), ids_.end(), before);
    sorted_ = n;
  }

  const std::vector<float>& values_;
  std::vector<int32_t> ids_;
  size_t sorted_ = 0;
};

// Keeps the first `n` entries of `order`; every other entry of `values` becomes -inf.
void keep_first(std::vector<float>& values, DescendingOrder& order, size_t n) {
  std::vector<float> kept(values.size(), kNegInf);
  for (size_t i = 0; i < n; ++i) kept[size_t(order[i])] = values[size_t(order[i])];
  values = std::move(kept);
}

// exp(v - max) for every entry, in double, and their sum accumulated in id order.
std::vector<double> unnormalised_probs(const std::vector<float>& values, double& sum) {
  const float max = *std::max_element(values.begin(), values.end());
  std::vector<double> w(values.size());
  sum = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    w[i] = std::exp(double(values[i]) - double(max));
    sum += w[i];
  }
  return w;
}

void check_token(int32_t id, int32_t vocab_size, const char* what) {
  check(id >= 0 && id < vocab_size, std::string(what) + ": token id " + std::to_string(id) +
                                        " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
}

void check_history(std::span<const int32_t> tokens, size_t vocab_size) {
  for (int32_t t : tokens) check_token(t, int32_t(vocab_size), "sampler history");
}

}  // namespace

void apply_logit_bias(std::vector<float>& logits, const std::map<int32_t, float>& bias) {
  for (const auto& [id, b] : bias) logits[size_t(id)] += b;
}

void apply_repetition_penalty(std::vector<float>& logits, std::span<const int32_t> history,
                              float penalty, int context_size) {
  auto tokens = window(history, context_size);
  check_history(tokens, logits.size());
  // mlx-lm gathers the window's logits, rescales them and scatters them back, so a token that
  // occurs several times is penalised once.
  for (int32_t t : distinct(tokens)) {
    float& l = logits[size_t(t)];
    l = l < 0 ? l * penalty : l / penalty;
  }
}

void apply_presence_penalty(std::vector<float>& logits, std::span<const int32_t> history,
                            float penalty, int context_size) {
  auto tokens = window(history, context_size);
  check_history(tokens, logits.size());
  for (int32_t t : distinct(tokens)) logits[size_t(t)] -= penalty;
}

void apply_frequency_penalty(std::vector<float>& logits, std::span<const int32_t> history,
                             float penalty, int context_size) {
  auto tokens = window(history, context_size);
  check_history(tokens, logits.size());
  // A scatter-subtract: every occurrence subtracts once more.
  for (int32_t t : tokens) logits[size_t(t)] -= penalty;
}

void log_softmax(std::vector<float>& logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  check(std::isfinite(max), "sampler: no token has a finite logit (largest is " + std::to_string(max) + ")");
  double sum = 0.0;
  unnormalised_probs(logits, sum);
  // Subtracting the max first keeps precision for large logits: lse itself would round to the
  // float grid near max.
  const double log_sum = std::log(sum);
  for (float& l : logits) l = float(double(l - max) - log_sum);
}

void apply_top_p(std::vector<float>& logprobs, float top_p) {
  // mlx-lm sorts ascending and keeps tokens whose cumulative probability exceeds 1 - top_p. The
  // cumulative probability of the j-th most likely token is total - (mass of the j before it),
  // which only shrinks with j, so the kept set is a prefix of the descending order.
  std::vector<double> probs(logprobs.size());
  double total = 0.0;
  for (size_t i = 0; i < logprobs.size(); ++i) total += probs[i] = std::exp(double(logprobs[i]));
  const double floor = 1.0 - double(top_p);
  DescendingOrder order(logprobs);
  double above = 0.0;
  size_t kept = 0;
  while (kept < order.size() && total - above > floor) above += probs[size_t(order[kept++])];
  keep_first(logprobs, order, kept);
}

void apply_min_p(std::vector<float>& logprobs, float min_p, int min_tokens_to_keep) {
  DescendingOrder order(logprobs);
  const float threshold = logprobs[size_t(order[0])] + float(std::log(double(min_p)));
  size_t kept = std::min(order.size(), size_t(min_tokens_to_keep));
  while (kept < order.size() && !(logprobs[size_t(order[kept])] < threshold)) ++kept;
  keep_first(logprobs, order, kept);
}

void apply_xtc(std::vector<float>& logprobs, float probability, float threshold,
               std::span<const int32_t> special_tokens, double coin) {
  if (coin > double(probability)) return;
  double sum = 0.0;
  std::vector<double> probs = unnormalised_probs(logprobs, sum);
  for (double& p : probs) p /= sum;
  // Remove every token more likely than the least likely one above the threshold, so exactly
  // one of the "top choices" survives.
  double least_above = std::numeric_limits<double>::infinity();
  for (double p : probs)
    if (p > double(threshold)) least_above = std::min(least_above, p);
  std::vector<bool> protect(logprobs.size(), false);
  for (int32_t t : special_tokens) protect[size_t(t)] = true;
  for (size_t i = 0; i < logprobs.size(); ++i)
    if (probs[i] > least_above && !protect[i]) logprobs[i] = kNegInf;
}

void apply_top_k(std::vector<float>& logprobs, int top_k) {
  if (size_t(top_k) >= logprobs.size()) return;
  DescendingOrder order(logprobs);
  keep_first(logprobs, order, size_t(top_k));
}

int32_t categorical_sample(const std::vector<float>& logprobs, float temperature, double u) {
  std::vector<float> scaled(logprobs);
  const float inv_temp = 1.0f / temperature;  // mlx-lm: logits * (1 / temp)
  for (float& v : scaled) v *= inv_temp;
  double sum = 0.0;
  const std::vector<double> w = unnormalised_probs(scaled, sum);
  const double target = u * sum;
  double cum = 0.0;
  int32_t last_possible = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0.0) continue;
    cum += w[i];
    last_possible = int32_t(i);
    if (cum > target) return int32_t(i);
  }
  return last_possible;  // rounding left target at the very top of the CDF
}

int32_t argmax(const std::vector<float>& values) {
  // max_element returns the first of equal maxima: the lowest id.
  return int32_t(std::max_element(values.begin(), values.end()) - values.begin());
}

std::vector<TokenLogprob> top_n(const std::vector<float>& logprobs, int n) {
  DescendingOrder order(logprobs);
  std::vector<TokenLogprob> out;
  for (size_t i = 0; i < std::min(order.size(), size_t(n)); ++i)
    out.push_back({order[i], logprobs[size_t(order[i])]});
  return out;
}

Sampler::Sampler(SamplerParams params, int32_t vocab_size) : params_(std::move(params)), vocab_size_(vocab_size) {
  const SamplerParams& p = params_;
  check(vocab_size > 0, "sampler: the vocabulary is empty");
  for (const auto& [id, bias] : p.logit_bias) {
    check_token(id, vocab_size, "logit_bias");
    check(std::isfinite(bias), "logit_bias: the bias of token " + std::to_string(id) + " is not finite");
  }
  check(std::isfinite(p.temperature) && p.temperature >= 0, "temperature must be >= 0, got " + std::to_string(p.temperature));
  check(p.top_p >= 0 && p.top_p <= 1, "top_p must lie in [0, 1], got " + std::to_string(p.top_p));
  check(p.min_p >= 0 && p.min_p <= 1, "min_p must lie in [0, 1], got " + std::to_string(p.min_p));
  check(p.min_tokens_to_keep >= 1, "min_tokens_to_keep must be >= 1, got " + std::to_string(p.min_tokens_to_keep));
  check(p.top_k >= 0, "top_k must be >= 0, got " + std::to_string(p.top_k));
  check(p.xtc_probability >= 0 && p.xtc_probability <= 1,
        "xtc_probability must lie in [0, 1], got " + std::to_string(p.xtc_probability));
  check(p.xtc_threshold >= 0 && p.xtc_threshold <= 0.5f,
        "xtc_threshold must lie in [0, 0.5], got " + std::to_string(p.xtc_threshold));
  for (int32_t t : p.xtc_special_tokens) check_token(t, vocab_size, "xtc_special_tokens");
  check(std::isfinite(p.repetition_penalty) && p.repetition_penalty >= 0,
        "repetition_penalty must be >= 0, got " + std::to_string(p.repetition_penalty));
  check(std::isfinite(p.presence_penalty), "presence_penalty must be finite");
  check(std::isfinite(p.frequency_penalty), "frequency_penalty must be finite");
  check(p.repetition_context_size >= 0 && p.presence_context_size >= 0 && p.frequency_context_size >= 0,
        "penalty context sizes must be >= 0");
  check(p.top_logprobs >= 0, "top_logprobs must be >= 0, got " + std::to_string(p.top_logprobs));
}

void Sampler::apply_processors(std::vector<float>& logits, std::span<const int32_t> history) const {
  const SamplerParams& p = params_;
  apply_logit_bias(logits, p.logit_bias);
  if (p.repetition_penalty != 0.0f)
    apply_repetition_penalty(logits, history, p.repetition_penalty, p.repetition_context_size);
  if (p.presence_penalty != 0.0f) apply_presence_penalty(logits, history, p.presence_penalty, p.presence_context_size);
  if (p.frequency_penalty != 0.0f)
    apply_frequency_penalty(logits, history, p.frequency_penalty, p.frequency_context_size);
}

int32_t Sampler::draw(std::vector<float> lp, uint64_t step) const {
  const SamplerParams& p = params_;
  if (p.temperature == 0.0f) return argmax(lp);
  if (p.top_p > 0.0f && p.top_p < 1.0f) apply_top_p(lp, p.top_p);
  if (p.min_p != 0.0f) apply_min_p(lp, p.min_p, p.min_tokens_to_keep);
  if (p.xtc_probability > 0.0f)
    apply_xtc(lp, p.xtc_probability, p.xtc_threshold, p.xtc_special_tokens, uniform01(p.seed, step, RngStream::kXtc));
  if (p.top_k > 0) apply_top_k(lp, p.top_k);
  return categorical_sample(lp, p.temperature, uniform01(p.seed, step, RngStream::kCategorical));
}

SampleResult Sampler::sample(std::span<const float> logits, std::span<const int32_t> history, uint64_t step) const {
  check(logits.size() == size_t(vocab_size_), "sampler: got " + std::to_string(logits.size()) +
                                                  " logits for a vocabulary of " + std::to_string(vocab_size_));
  for (float l : logits) check(!std::isnan(l), "sampler: the model produced NaN logits");
  std::vector<float> lp(logits.begin(), logits.end());
  apply_processors(lp, history);
  log_softmax(lp);
  SampleResult result;
  result.token = draw(lp, step);
  result.logprob = lp[size_t(result.token)];
  if (params_.top_logprobs > 0) result.top_logprobs = top_n(lp, params_.top_logprobs);
  return result;
}

}  // namespace kvlm
