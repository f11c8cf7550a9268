#include "kvlm/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "kvlm/backend/cpu/vector_math.h"
#include "kvlm/base/error.h"
#include "kvlm/engine/rng.h"

namespace kvlm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The sampler's passes over the vocabulary run on the CPU's vector kernels (vector_math.h: the
// same bits on every instruction set); the logits live in host memory.
const cpu::VectorMathKernels& vm() { return cpu::vector_math(); }

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

// A token and its value, laid out contiguously so that selections over the whole vocabulary stay
// cache-friendly.
using Ranked = cpu::IndexedValue;

// The rank order of every filter: larger value first, ties → lower id first. A function object,
// so that nth_element and sort inline the compare (through a function pointer they spent 80% of a
// top-p/top-k sample calling it).
constexpr auto ranks_before = [](const Ranked& a, const Ranked& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
};

// Vocabulary-sized working buffers, reused across calls on a thread: a fresh allocation of that
// size per sampled token is served by mmap and costs more in page faults than the sampling itself.
struct Scratch {
  std::vector<float> logprobs, filtered, weights;
  std::vector<Ranked> ranked;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The entries of `values` at or above `floor`, to be ranked. Every entry below the floor ranks
// after every entry in the list, so a filter that keeps only top entries can work on the list.
std::span<Ranked> ranked(const std::vector<float>& values, float floor = kNegInf) {
  std::vector<Ranked>& r = scratch().ranked;
  if (r.size() < values.size()) r.resize(values.size());  // grows once: never cleared per call
  return {r.data(), size_t(vm().select_at_least(values.data(), int64_t(values.size()), floor, r.data()))};
}

constexpr float kLowestFinite = -std::numeric_limits<float>::max();

// Rearranges r[lo, hi) so that r[lo, mid) are its (mid - lo) highest-ranked entries, in no
// particular order. Linear time on average: filters never need a full sort of the vocabulary.
void partition_top(std::span<Ranked> r, size_t lo, size_t mid, size_t hi) {
  if (mid > lo && mid < hi) std::nth_element(r.begin() + long(lo), r.begin() + long(mid), r.begin() + long(hi), ranks_before);
}

// After partition_top(r, 0, n, size) on r = ranked(values, floor): keeps the n highest-ranked
// values, sets the rest to -inf.
void keep_top(std::vector<float>& values, std::span<const Ranked> r, size_t n, float floor = kNegInf) {
  if (floor == kNegInf) {
    for (size_t i = n; i < r.size(); ++i) values[size_t(r[i].id)] = kNegInf;
    return;
  }
  // r left out the values below the floor: every value but the n kept ones becomes -inf.
  std::fill(values.begin(), values.end(), kNegInf);
  for (size_t i = 0; i < n; ++i) values[size_t(r[i].id)] = r[i].value;
}

// The index of the first of the largest values, or of the first NaN.
int64_t argmax_index(std::span<const float> values) { return vm().argmax(values.data(), int64_t(values.size())); }

// The largest value (the logits hold no NaN).
float max_value(const std::vector<float>& values) { return values[size_t(argmax_index(values))]; }

// w[i] = exp(values[i] * scale - shift) in scratch().weights; `sum` receives their sum in double,
// element i in lane i % 8, the lanes added in order (vector_math's sum_f64).
const std::vector<float>& exp_weights(const std::vector<float>& values, float scale, float shift, double& sum) {
  std::vector<float>& w = scratch().weights;
  w.resize(values.size());
  vm().exp_scaled(values.data(), w.data(), int64_t(w.size()), scale, shift);
  sum = vm().sum_f64(w.data(), int64_t(w.size()));
  return w;
}

// Per-token checks build their message only on failure: they run over whole histories and rows.
void check_token(int32_t id, int32_t vocab_size, const char* what) {
  if (id < 0 || id >= vocab_size)
    throw Error(std::string(what) + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                std::to_string(vocab_size) + ")");
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
  const float max = max_value(logits);
  if (!std::isfinite(max))
    throw Error("sampler: no token has a finite logit (largest is " + std::to_string(max) + ")");
  double sum = 0.0;
  exp_weights(logits, 1.0f, max, sum);
  // Subtracting the max first keeps precision for large logits: lse itself would round to the
  // float grid near max.
  vm().subtract_log_sum(logits.data(), int64_t(logits.size()), max, std::log(sum));
}

// The candidates r (values at most `top`) of the highest bins, a quarter of a nat wide below `top`,
// that hold the `needed` mass of probs: the most likely tokens that reach it lie there, so top-p's
// selection runs over them alone (a flat distribution leaves thousands of tokens within the first
// span of apply_top_p, and the selection's cost grows with them). When candidates are dropped,
// `floor` becomes the top of the first dropped bin, finite, so keep_top rewrites the whole row.
std::span<Ranked> narrow_to_mass(std::span<Ranked> r, const std::vector<float>& probs, float top, double needed,
                                 float& floor) {
  constexpr int kBins = 128;
  const auto bin = [top](float v) {
    const float d = (top - v) * 4.0f;  // +inf for a -inf candidate
    return d < float(kBins - 1) ? int(d) : kBins - 1;
  };
  double mass[kBins] = {};
  for (const Ranked& c : r) mass[bin(c.value)] += probs[size_t(c.id)];
  int last = 0;
  double cum = mass[0];
  while (cum < needed && last + 1 < kBins) cum += mass[++last];
  if (last == kBins - 1) return r;
  size_t kept = 0;
  for (const Ranked& c : r)
    if (bin(c.value) <= last) r[kept++] = c;
  floor = top - float(last + 1) / 4.0f;
  return r.first(kept);
}

void apply_top_p(std::vector<float>& logprobs, float top_p) {
  // mlx-lm sorts ascending and keeps the tokens whose cumulative probability exceeds 1 - top_p.
  // The cumulative probability of the j-th most likely token is total - (mass of the j before
  // it), so the kept tokens are the K most likely, K being the smallest count whose mass reaches
  // total - (1 - top_p) (at least 1). K is found by bisection over partial selections.
  double total = 0.0;
  const std::vector<float>& probs = exp_weights(logprobs, 1.0f, 0.0f, total);  // mlx-lm: exp(logprobs)
  const double needed = total - (1.0 - double(top_p));
  // The K tokens are the most likely ones, so they lie among the tokens within `span` of the
  // largest log-probability once those hold the needed mass. A model's distribution is peaked:
  // the first span usually leaves a few hundred candidates of the vocabulary.
  const float top = max_value(logprobs);
  float floor = kNegInf;
  for (float span = 10.0f; span <= 80.0f; span *= 2.0f) {
    const double mass = vm().sum_at_least(probs.data(), logprobs.data(), int64_t(logprobs.size()), top - span);
    if (mass >= needed) {
      floor = top - span;
      break;
    }
  }
  const std::span<Ranked> r = narrow_to_mass(ranked(logprobs, floor), probs, top, needed, floor);
  // Invariant: r[0, lo) are the lo most likely tokens and their mass mass_lo < needed (or
  // lo = 0); K lies in (lo, hi]; r[lo, hi) are the next ranks.
  size_t lo = 0, hi = r.size();
  double mass_lo = 0.0;
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    partition_top(r, lo, mid, hi);
    double mass_mid = mass_lo;
    for (size_t i = lo; i < mid; ++i) mass_mid += probs[size_t(r[i].id)];
    if (mass_mid >= needed) {
      hi = mid;
    } else {
      lo = mid;
      mass_lo = mass_mid;
    }
  }
  keep_top(logprobs, r, hi, floor);
}

void apply_min_p(std::vector<float>& logprobs, float min_p, int min_tokens_to_keep) {
  const size_t keep = std::min(logprobs.size(), size_t(min_tokens_to_keep));
  const std::span<Ranked> r = ranked(logprobs);
  partition_top(r, 0, keep, r.size());
  std::vector<bool> protect(logprobs.size(), false);
  for (size_t i = 0; i < keep; ++i) protect[size_t(r[i].id)] = true;
  const float threshold = max_value(logprobs) + float(std::log(double(min_p)));
  for (size_t i = 0; i < logprobs.size(); ++i)
    if (logprobs[i] < threshold && !protect[i]) logprobs[i] = kNegInf;
}

void apply_xtc(std::vector<float>& logprobs, float probability, float threshold,
               std::span<const int32_t> special_tokens, double coin) {
  if (coin > double(probability)) return;
  double sum = 0.0;
  const std::vector<float>& weights = exp_weights(logprobs, 1.0f, max_value(logprobs), sum);
  auto prob = [&](size_t i) { return float(double(weights[i]) / sum); };  // softmax(logprobs)
  // Remove every token more likely than the least likely one above the threshold, so exactly
  // one of the "top choices" survives.
  float least_above = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < weights.size(); ++i)
    if (prob(i) > threshold) least_above = std::min(least_above, prob(i));
  std::vector<bool> protect(logprobs.size(), false);
  for (int32_t t : special_tokens) protect[size_t(t)] = true;
  for (size_t i = 0; i < logprobs.size(); ++i)
    if (prob(i) > least_above && !protect[i]) logprobs[i] = kNegInf;
}

void apply_top_k(std::vector<float>& logprobs, int top_k) {
  // Tokens already at -inf stay there whichever k are kept, so only finite ones are ranked.
  const std::span<Ranked> r = ranked(logprobs, kLowestFinite);
  if (size_t(top_k) >= r.size()) return;
  partition_top(r, 0, size_t(top_k), r.size());
  keep_top(logprobs, r, size_t(top_k));
}

int32_t categorical_sample(const std::vector<float>& logprobs, float temperature, double u) {
  const float inv_temp = 1.0f / temperature;  // mlx-lm: logits * (1 / temp)
  // Scaling by a positive constant is monotone, so the largest scaled value is the scaled max.
  double sum = 0.0;
  const std::vector<float>& w = exp_weights(logprobs, inv_temp, max_value(logprobs) * inv_temp, sum);
  const double target = u * sum;
  double cum = 0.0;
  int32_t last_possible = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0.0f) continue;
    cum += w[i];
    last_possible = int32_t(i);
    if (cum > target) return int32_t(i);
  }
  return last_possible;  // rounding left target at the very top of the CDF
}

int32_t argmax(const std::vector<float>& values) { return int32_t(argmax_index(values)); }  // ties: lowest id

std::vector<TokenLogprob> top_n(const std::vector<float>& logprobs, int n) {
  const size_t count = std::min(logprobs.size(), size_t(n));
  const std::span<Ranked> r = ranked(logprobs);
  partition_top(r, 0, count, r.size());
  std::sort(r.begin(), r.begin() + long(count), ranks_before);
  std::vector<TokenLogprob> out;
  for (size_t i = 0; i < count; ++i) out.push_back({r[i].id, r[i].value});
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

int32_t Sampler::draw(const std::vector<float>& logprobs, uint64_t step) const {
  const SamplerParams& p = params_;
  if (p.temperature == 0.0f) return argmax(logprobs);
  std::vector<float>& lp = scratch().filtered;
  lp.assign(logprobs.begin(), logprobs.end());
  if (p.top_p > 0.0f && p.top_p < 1.0f) apply_top_p(lp, p.top_p);
  if (p.min_p != 0.0f) apply_min_p(lp, p.min_p, p.min_tokens_to_keep);
  if (p.xtc_probability > 0.0f)
    apply_xtc(lp, p.xtc_probability, p.xtc_threshold, p.xtc_special_tokens, uniform01(p.seed, step, RngStream::kXtc));
  if (p.top_k > 0) apply_top_k(lp, p.top_k);
  return categorical_sample(lp, p.temperature, uniform01(p.seed, step, RngStream::kCategorical));
}

SampleResult Sampler::sample(std::span<const float> logits, std::span<const int32_t> history, uint64_t step) const {
  check(logits.size() == size_t(vocab_size_), [&] {
    return "sampler: got " + std::to_string(logits.size()) + " logits for a vocabulary of " + std::to_string(vocab_size_);
  });
  if (std::isnan(logits[size_t(argmax_index(logits))])) throw Error("sampler: the model produced NaN logits");
  std::vector<float>& lp = scratch().logprobs;
  lp.assign(logits.begin(), logits.end());
  apply_processors(lp, history);
  log_softmax(lp);
  SampleResult result;
  result.token = draw(lp, step);
  result.logprob = lp[size_t(result.token)];
  if (params_.top_logprobs > 0) result.top_logprobs = top_n(lp, params_.top_logprobs);
  return result;
}

}  // namespace kvlm
