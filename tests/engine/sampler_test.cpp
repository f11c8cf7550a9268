#include "kvlm/engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "kvlm/base/error.h"
#include "kvlm/engine/rng.h"

namespace kvlm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> logs(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(p > 0 ? float(std::log(p)) : -kInf);
  return out;
}

// Which entries survived a filter (finite) and which were removed (-inf).
std::vector<bool> kept(const std::vector<float>& v) {
  std::vector<bool> out;
  for (float x : v) out.push_back(std::isfinite(x));
  return out;
}

// --- logits processors -------------------------------------------------------------------

TEST(LogitBias, AddsPerToken) {
  std::vector<float> l{1, 2, 3};
  apply_logit_bias(l, {{0, 1.5f}, {2, -1.0f}});
  EXPECT_EQ(l, (std::vector<float>{2.5f, 2, 2}));
}

TEST(RepetitionPenalty, DividesPositiveMultipliesNegativeOncePerToken) {
  std::vector<float> l{2, -2, 1, 4};
  const std::vector<int32_t> history{0, 1, 0};
  apply_repetition_penalty(l, history, 2.0f, 20);
  EXPECT_EQ(l, (std::vector<float>{1, -4, 1, 4}));  // token 0 occurs twice, halved once
}

TEST(RepetitionPenalty, OnlyTheWindowCounts) {
  const std::vector<int32_t> history{0, 1, 3};
  std::vector<float> l{2, -2, 1, 4};
  apply_repetition_penalty(l, history, 2.0f, 1);
  EXPECT_EQ(l, (std::vector<float>{2, -2, 1, 2}));
  std::vector<float> whole{2, -2, 1, 4};
  apply_repetition_penalty(whole, history, 2.0f, 0);  // 0 = whole history
  EXPECT_EQ(whole, (std::vector<float>{1, -4, 1, 2}));
}

TEST(PresencePenalty, SubtractsOncePerDistinctToken) {
  std::vector<float> l{1, 1, 1};
  const std::vector<int32_t> history{0, 0, 2};
  apply_presence_penalty(l, history, 0.5f, 20);
  EXPECT_EQ(l, (std::vector<float>{0.5f, 1, 0.5f}));
}

TEST(FrequencyPenalty, SubtractsPerOccurrenceInWindow) {
  const std::vector<int32_t> history{0, 0, 2};
  std::vector<float> l{1, 1, 1};
  apply_frequency_penalty(l, history, 0.5f, 20);
  EXPECT_EQ(l, (std::vector<float>{0, 1, 0.5f}));
  std::vector<float> w{1, 1, 1};
  apply_frequency_penalty(w, history, 0.5f, 2);  // window {0, 2}
  EXPECT_EQ(w, (std::vector<float>{0.5f, 1, 0.5f}));
}

TEST(Penalties, RejectHistoryOutsideVocabulary) {
  std::vector<float> l{1, 1, 1};
  const std::vector<int32_t> history{0, 3};
  EXPECT_THROW(apply_repetition_penalty(l, history, 1.5f, 0), Error);
  EXPECT_THROW(apply_presence_penalty(l, history, 1.5f, 0), Error);
  EXPECT_THROW(apply_frequency_penalty(l, history, 1.5f, 0), Error);
}

TEST(LogSoftmax, Normalises) {
  std::vector<float> l{0.0f, float(std::log(3.0)), -kInf};
  log_softmax(l);
  EXPECT_NEAR(l[0], std::log(0.25), 1e-6);
  EXPECT_NEAR(l[1], std::log(0.75), 1e-6);
  EXPECT_EQ(l[2], -kInf);
  std::vector<float> shifted{1000.0f, 1000.0f};  // no overflow for large logits
  log_softmax(shifted);
  EXPECT_NEAR(shifted[0], std::log(0.5), 1e-6);
}

// --- filters ---------------------------------------------------------------------------

TEST(TopP, KeepsTokensWhoseAscendingCumulativeMassExceedsOneMinusP) {
  // Ascending cumulative probabilities: 0.1, 0.3, 0.6, 1.0.
  auto run = [](float p) {
    auto lp = logs({0.1, 0.2, 0.3, 0.4});
    apply_top_p(lp, p);
    return kept(lp);
  };
  EXPECT_EQ(run(0.5f), (std::vector<bool>{false, false, true, true}));   // > 0.5
  EXPECT_EQ(run(0.65f), (std::vector<bool>{false, false, true, true}));  // > 0.35
  EXPECT_EQ(run(0.75f), (std::vector<bool>{false, true, true, true}));   // > 0.25
  EXPECT_EQ(run(0.05f), (std::vector<bool>{false, false, false, true})); // the top always stays
}

TEST(TopP, KeptValuesAreUnchanged) {
  auto lp = logs({0.1, 0.2, 0.3, 0.4});
  const auto before = lp;
  apply_top_p(lp, 0.5f);
  EXPECT_EQ(lp[2], before[2]);
  EXPECT_EQ(lp[3], before[3]);
  EXPECT_EQ(lp[0], -kInf);
}

// A model-like vocabulary: 20000 log-probabilities from logits N(0, 3), normalised, so that the
// kept sets run from one token to thousands.
std::vector<float> peaked_logprobs(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> lp(20000);
  for (float& x : lp) x = d(rng);
  log_softmax(lp);
  return lp;
}

// The most likely tokens in rank order (value, then lower id).
std::vector<int32_t> by_rank(const std::vector<float>& lp) {
  std::vector<int32_t> ids(lp.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return lp[size_t(a)] > lp[size_t(b)] || (lp[size_t(a)] == lp[size_t(b)] && a < b); });
  return ids;
}

TEST(TopP, LargeVocabularyKeepsTheSmallestTopSetReachingTheMass) {
  for (unsigned seed : {1u, 2u})
    for (float p : {0.01f, 0.3f, 0.9f, 0.999f}) {
      const std::vector<float> lp = peaked_logprobs(seed);
      double total = 0.0;
      for (float x : lp) total += std::exp(double(x));
      const std::vector<int32_t> ranked = by_rank(lp);
      size_t want = 0;  // the reference: cumulative mass in rank order
      for (double mass = 0.0; want < ranked.size() && mass < total - (1.0 - double(p)); ++want)
        mass += std::exp(double(lp[size_t(ranked[want])]));
      std::vector<float> filtered = lp;
      apply_top_p(filtered, p);
      size_t count = 0;
      for (size_t i = 0; i < want; ++i) count += std::isfinite(filtered[size_t(ranked[i])]) ? 1 : 0;
      const size_t finite = size_t(std::count_if(filtered.begin(), filtered.end(), [](float x) { return std::isfinite(x); }));
      EXPECT_EQ(count, want) << "seed " << seed << " p " << p;
      EXPECT_EQ(finite, want) << "seed " << seed << " p " << p;
    }
}

TEST(TopK, LargeVocabularyAfterTopPKeepsTheKMostLikelySurvivors) {
  std::vector<float> lp = peaked_logprobs(3);
  const std::vector<int32_t> ranked = by_rank(lp);
  apply_top_p(lp, 0.9f);
  const auto survivors = size_t(std::count_if(lp.begin(), lp.end(), [](float x) { return std::isfinite(x); }));
  ASSERT_GT(survivors, 50u);
  apply_top_k(lp, 40);
  for (size_t i = 0; i < ranked.size(); ++i)
    EXPECT_EQ(std::isfinite(lp[size_t(ranked[i])]), i < 40) << "rank " << i;
  std::vector<float> few = logs({0.5, 0.5, 0, 0});
  apply_top_k(few, 3);  // fewer finite tokens than k: nothing changes
  EXPECT_EQ(kept(few), (std::vector<bool>{true, true, false, false}));
}

TEST(MinP, RemovesTokensBelowMinPTimesTheTopProbability) {
  auto run = [](float min_p, int keep) {
    auto lp = logs({0.5, 0.3, 0.15, 0.05});
    apply_min_p(lp, min_p, keep);
    return kept(lp);
  };
  EXPECT_EQ(run(0.2f, 1), (std::vector<bool>{true, true, true, false}));    // threshold 0.1
  EXPECT_EQ(run(0.5f, 1), (std::vector<bool>{true, true, false, false}));   // threshold 0.25
  EXPECT_EQ(run(0.9f, 1), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(run(0.9f, 3), (std::vector<bool>{true, true, true, false}));    // min_tokens_to_keep
}

TEST(Xtc, RemovesAllTopChoicesButTheLeastLikelyOne) {
  auto lp = logs({0.4, 0.3, 0.2, 0.1});
  apply_xtc(lp, 1.0f, 0.25f, {}, 0.5);  // above 0.25: {0.4, 0.3}; 0.3 survives
  EXPECT_EQ(kept(lp), (std::vector<bool>{false, true, true, true}));
}

TEST(Xtc, CoinAboveProbabilityLeavesLogitsUnchanged) {
  auto lp = logs({0.4, 0.3, 0.2, 0.1});
  const auto before = lp;
  apply_xtc(lp, 0.4f, 0.25f, {}, 0.5);
  EXPECT_EQ(lp, before);
  apply_xtc(lp, 0.5f, 0.25f, {}, 0.5);  // coin == probability fires (mlx-lm: keep iff u > p)
  EXPECT_EQ(kept(lp), (std::vector<bool>{false, true, true, true}));
}

TEST(Xtc, SpecialTokensAndNoTokenAboveThreshold) {
  auto lp = logs({0.4, 0.3, 0.2, 0.1});
  const auto before = lp;
  const std::vector<int32_t> special{0};
  apply_xtc(lp, 1.0f, 0.25f, special, 0.0);
  EXPECT_EQ(lp, before);
  apply_xtc(lp, 1.0f, 0.5f, {}, 0.0);  // nothing above 0.5
  EXPECT_EQ(lp, before);
}

TEST(Xtc, UsesProbabilitiesRenormalisedAfterEarlierFilters) {
  // Raw probabilities 0.3, 0.3, 0.2, 0.2 with the last two removed: renormalised 0.5, 0.5,
  // both above 0.45, neither above the smaller, so nothing more goes.
  auto lp = logs({0.3, 0.3, 0.0, 0.0});
  const auto before = lp;
  apply_xtc(lp, 1.0f, 0.45f, {}, 0.0);
  EXPECT_EQ(lp, before);
}

TEST(TopK, KeepsTheKLargestTiesToLowerId) {
  std::vector<float> lp{1, 3, 3, 2};
  apply_top_k(lp, 1);
  EXPECT_EQ(kept(lp), (std::vector<bool>{false, true, false, false}));
  std::vector<float> two{1, 3, 3, 2};
  apply_top_k(two, 2);
  EXPECT_EQ(kept(two), (std::vector<bool>{false, true, true, false}));
  std::vector<float> all{1, 3, 3, 2};
  apply_top_k(all, 4);  // k >= vocabulary keeps everything
  EXPECT_EQ(all, (std::vector<float>{1, 3, 3, 2}));
}

TEST(Categorical, InvertsTheCdf) {
  const auto lp = logs({0.25, 0.25, 0.5});
  EXPECT_EQ(categorical_sample(lp, 1.0f, 0.1), 0);
  EXPECT_EQ(categorical_sample(lp, 1.0f, 0.3), 1);
  EXPECT_EQ(categorical_sample(lp, 1.0f, 0.49), 1);
  EXPECT_EQ(categorical_sample(lp, 1.0f, 0.51), 2);
  EXPECT_EQ(categorical_sample(lp, 1.0f, 0.999999), 2);
  EXPECT_EQ(categorical_sample(lp, 1.0f, 0.0), 0);
}

TEST(Categorical, SkipsRemovedTokens) {
  const auto lp = logs({0.5, 0.0, 0.5});
  EXPECT_EQ(categorical_sample(lp, 1.0f, 0.49), 0);
  EXPECT_EQ(categorical_sample(lp, 1.0f, 0.51), 2);
}

TEST(Categorical, TemperatureScalesLogprobs) {
  // At T = 0.5, probabilities square then renormalise: 1/6, 1/6, 2/3.
  const auto lp = logs({0.25, 0.25, 0.5});
  EXPECT_EQ(categorical_sample(lp, 0.5f, 0.16), 0);
  EXPECT_EQ(categorical_sample(lp, 0.5f, 0.2), 1);
  EXPECT_EQ(categorical_sample(lp, 0.5f, 0.34), 2);
  // At T = 2, square roots: 0.2929, 0.2929, 0.4142.
  EXPECT_EQ(categorical_sample(lp, 2.0f, 0.58), 1);
  EXPECT_EQ(categorical_sample(lp, 2.0f, 0.59), 2);
}

TEST(Argmax, TiesGoToLowestId) {
  EXPECT_EQ(argmax({1, 5, 5, 2}), 1);
  EXPECT_EQ(argmax({-kInf, -1, -kInf}), 1);
}

TEST(TopN, DescendingTiesToLowerId) {
  const auto top = top_n({0.1f, 0.5f, 0.5f, 0.2f}, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_EQ(top[1].token, 2);
  EXPECT_EQ(top[2].token, 3);
  EXPECT_EQ(top[2].logprob, 0.2f);
  EXPECT_EQ(top_n({1, 2}, 5).size(), 2u);
}

// --- the whole chain -------------------------------------------------------------------

SamplerParams params_with_temp(float t) {
  SamplerParams p;
  p.temperature = t;
  return p;
}

TEST(Sampler, GreedyIgnoresFiltersAndReportsLogprob) {
  SamplerParams p;
  p.top_k = 1;
  p.top_p = 0.1f;
  p.top_logprobs = 2;
  Sampler s(p, 4);
  const auto lp = logs({0.1, 0.4, 0.4, 0.1});
  const auto r = s.sample(lp, {}, 0);
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.logprob, std::log(0.4), 1e-6);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 1);
  EXPECT_EQ(r.top_logprobs[1].token, 2);
}

TEST(Sampler, RepetitionPenaltyChangesTheGreedyChoice) {
  SamplerParams p;
  p.repetition_penalty = 1.1f;
  Sampler s(p, 2);
  const std::vector<float> logits{3.0f, 2.9f};
  const std::vector<int32_t> history{0};
  EXPECT_EQ(s.sample(logits, history, 0).token, 1);  // 3 / 1.1 = 2.73 < 2.9
  EXPECT_EQ(s.sample(logits, {}, 0).token, 0);
}

TEST(Sampler, ProcessorsRunInOrderBiasThenPenalties) {
  // bias lifts token 0 from -1 to +1; only then does the repetition penalty divide it (if the
  // penalty ran first it would multiply -1 to -2 and the bias would give 0).
  SamplerParams p;
  p.logit_bias = {{0, 2.0f}};
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.25f;
  p.frequency_penalty = 0.125f;
  p.top_logprobs = 2;
  Sampler s(p, 2);
  const std::vector<float> logits{-1.0f, 0.0f};
  const std::vector<int32_t> history{0, 0};
  const auto r = s.sample(logits, history, 0);
  // token 0: (-1 + 2) / 2 - 0.25 - 2 * 0.125 = 0; token 1: 0. Equal: greedy picks 0, p = 0.5.
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(0.5), 1e-6);
}

TEST(Sampler, ChainedFiltersThenCategorical) {
  // top_p 0.9 keeps {1,2,3,4} (ascending cum of token 0 is 0.05 <= 0.1); min_p 0.3 removes
  // token 1 (0.1 < 0.12); top_k 2 keeps {3, 4}; the draw is over 3/7, 4/7.
  SamplerParams p = params_with_temp(1.0f);
  p.top_p = 0.9f;
  p.min_p = 0.3f;
  p.top_k = 2;
  p.seed = 77;
  Sampler s(p, 5);
  const auto lp = logs({0.05, 0.1, 0.15, 0.3, 0.4});
  int saw3 = 0, saw4 = 0;
  for (uint64_t step = 0; step < 64; ++step) {
    const double u = uniform01(77, step, RngStream::kCategorical);
    const auto r = s.sample(lp, {}, step);
    EXPECT_EQ(r.token, u < 3.0 / 7.0 ? 3 : 4) << "step " << step << " u " << u;
    EXPECT_NEAR(r.logprob, std::log(r.token == 3 ? 0.3 : 0.4), 1e-6);  // before filtering
    saw3 += r.token == 3;
    saw4 += r.token == 4;
  }
  EXPECT_GT(saw3, 0);
  EXPECT_GT(saw4, 0);
}

TEST(Sampler, XtcInTheChainSparesSpecialTokens) {
  // XTC always fires: of the tokens above 0.2 ({0: 0.5, 1: 0.3}) all but the least likely go,
  // except token 0 which is special. top_k 1 then leaves only token 0.
  SamplerParams p = params_with_temp(1.0f);
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.2f;
  p.top_k = 1;
  const auto lp = logs({0.5, 0.3, 0.2});
  p.xtc_special_tokens = {0};
  Sampler spare(p, 3);
  for (uint64_t step = 0; step < 8; ++step) EXPECT_EQ(spare.sample(lp, {}, step).token, 0);
  p.xtc_special_tokens.clear();
  Sampler remove(p, 3);
  for (uint64_t step = 0; step < 8; ++step) EXPECT_EQ(remove.sample(lp, {}, step).token, 1);
}

TEST(Sampler, SameSeedAndStepGiveTheSameTokenInAnyOrder) {
  SamplerParams p = params_with_temp(1.0f);
  p.seed = 9;
  Sampler a(p, 8), b(p, 8);
  const std::vector<float> logits{0.1f, 0.2f, 0.3f, 0.1f, 0.0f, 0.25f, 0.05f, 0.15f};
  std::vector<int32_t> forward;
  for (uint64_t step = 0; step < 32; ++step) forward.push_back(a.sample(logits, {}, step).token);
  for (uint64_t step = 32; step-- > 0;) EXPECT_EQ(b.sample(logits, {}, step).token, forward[step]);
  p.seed = 10;
  Sampler c(p, 8);
  int differ = 0;
  for (uint64_t step = 0; step < 32; ++step) differ += c.sample(logits, {}, step).token != forward[step];
  EXPECT_GT(differ, 0);
}

TEST(Sampler, FrequenciesMatchTheTemperedDistribution) {
  // Deterministic (fixed seed); the tolerance is ~6 standard errors.
  auto frequencies = [](float temp) {
    SamplerParams p = params_with_temp(temp);
    p.seed = 1234;
    Sampler s(p, 3);
    const auto lp = logs({0.25, 0.25, 0.5});
    std::vector<double> f(3, 0.0);
    constexpr int kN = 20000;
    for (int i = 0; i < kN; ++i) f[size_t(s.sample(lp, {}, uint64_t(i)).token)] += 1.0 / kN;
    return f;
  };
  const auto t1 = frequencies(1.0f);
  EXPECT_NEAR(t1[0], 0.25, 0.02);
  EXPECT_NEAR(t1[1], 0.25, 0.02);
  EXPECT_NEAR(t1[2], 0.5, 0.02);
  const auto t05 = frequencies(0.5f);
  EXPECT_NEAR(t05[0], 1.0 / 6, 0.02);
  EXPECT_NEAR(t05[2], 2.0 / 3, 0.02);
}

TEST(Sampler, RejectsBadParameters) {
  auto make = [](auto edit) {
    SamplerParams p;
    edit(p);
    return Sampler(p, 4);
  };
  EXPECT_THROW(make([](SamplerParams& p) { p.temperature = -1; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.top_p = 1.5f; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.min_p = 2.0f; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.min_tokens_to_keep = 0; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.top_k = -1; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.xtc_threshold = 0.6f; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.xtc_probability = 1.5f; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.xtc_special_tokens = {4}; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.repetition_penalty = -1; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.repetition_context_size = -1; }), Error);
  EXPECT_THROW(make([](SamplerParams& p) { p.logit_bias = {{4, 1.0f}}; }), Error);
  EXPECT_NO_THROW(make([](SamplerParams& p) { p.top_p = 1.0f; p.min_p = 1.0f; }));
}

TEST(Sampler, RejectsBadLogits) {
  Sampler s(SamplerParams{}, 3);
  EXPECT_THROW(s.sample(std::vector<float>{1, 2}, {}, 0), Error);
  EXPECT_THROW(s.sample(std::vector<float>{1, std::nanf(""), 2}, {}, 0), Error);
  EXPECT_THROW(s.sample(std::vector<float>{-kInf, -kInf, -kInf}, {}, 0), Error);
}

}  // namespace
}  // namespace kvlm
