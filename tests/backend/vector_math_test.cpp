// kvlm's exp: close to std::exp, defined at the edges, and bit-identical on every ISA path, as are
// the softmax numerators and SiLU built on it, the RMSNorm row, the division and the sampler's
// passes over a vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/cpu/vector_math.h"

namespace kvlm::cpu {
namespace {

// Distance in representable floats (both finite, same sign).
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(int64_t(ia) - int64_t(ib));
}

std::vector<float> sweep() {
  std::vector<float> x;
  for (float v = -90.0f; v <= 90.0f; v += 0.0137f) x.push_back(v);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, -87.0f, 88.0f, -87.0001f, 88.0001f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN()})
    x.push_back(v);
  return x;
}

TEST(VectorMath, ExpWithinTwoUlpOfStdExp) {
  int64_t worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.001f) worst = std::max(worst, ulp_distance(exp_portable(x), std::exp(x)));
  EXPECT_LE(worst, 2);
}

TEST(VectorMath, ExpEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_portable(0.0f), 1.0f);
  EXPECT_EQ(exp_portable(-87.5f), 0.0f);
  EXPECT_EQ(exp_portable(-inf), 0.0f);
  EXPECT_EQ(exp_portable(88.5f), inf);
  EXPECT_EQ(exp_portable(inf), inf);
  EXPECT_TRUE(std::isnan(exp_portable(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VectorMath, EveryIsaEqualsPortable) {
  const std::vector<float> x = sweep();
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> u(x.size());
  for (float& v : u) v = d(rng);
  // The norm and the division over the finite values, at a length that is no multiple of 16.
  const int64_t n = 1001;
  std::vector<float> want_exp = x, want_silu(x.size()), want_norm(static_cast<size_t>(n));
  std::vector<float> want_div(u.begin(), u.begin() + n);
  vector_math(Isa::kPortable).exp_scaled(x.data(), want_exp.data(), int64_t(x.size()), 1.0f, 1.5f);
  vector_math(Isa::kPortable).silu_mul(x.data(), u.data(), want_silu.data(), int64_t(x.size()));
  vector_math(Isa::kPortable).rms_norm_row(x.data(), u.data(), n, 1e-6f, want_norm.data());
  vector_math(Isa::kPortable).divide(want_div.data(), n, 3.7f);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    std::vector<float> got_exp = x, got_silu(x.size()), got_norm(static_cast<size_t>(n));
    std::vector<float> got_div(u.begin(), u.begin() + n);
    vector_math(isa).exp_scaled(x.data(), got_exp.data(), int64_t(x.size()), 1.0f, 1.5f);
    vector_math(isa).silu_mul(x.data(), u.data(), got_silu.data(), int64_t(x.size()));
    vector_math(isa).rms_norm_row(x.data(), u.data(), n, 1e-6f, got_norm.data());
    vector_math(isa).divide(got_div.data(), n, 3.7f);
    EXPECT_EQ(std::memcmp(got_exp.data(), want_exp.data(), x.size() * 4), 0) << isa_name(isa);
    EXPECT_EQ(std::memcmp(got_silu.data(), want_silu.data(), x.size() * 4), 0) << isa_name(isa);
    EXPECT_EQ(std::memcmp(got_norm.data(), want_norm.data(), size_t(n) * 4), 0) << isa_name(isa);
    EXPECT_EQ(std::memcmp(got_div.data(), want_div.data(), size_t(n) * 4), 0) << isa_name(isa);
  }
}

// The residual add and the RoPE rotation, at lengths with a partial last vector (a rotation's
// halves of 37: 32 values in vectors, 5 in the scalar tail).
TEST(VectorMath, AddScaledAndRopeRotateOfEveryIsaEqualPortable) {
  std::mt19937 rng(10);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> x(1001), y(1001), cs(74);
  for (float& v : x) v = d(rng);
  for (float& v : y) v = d(rng);
  for (size_t i = 0; i < 37; ++i) {
    const float angle = 0.37f * float(i);
    cs[i] = std::cos(angle);
    cs[37 + i] = std::sin(angle);
  }
  for (float scale : {1.0f, 0.7f}) {
    std::vector<float> want_add = x, want_rope(x.begin(), x.begin() + 74);
    vector_math(Isa::kPortable).add_scaled(want_add.data(), y.data(), int64_t(x.size()), scale);
    vector_math(Isa::kPortable).rope_rotate(want_rope.data(), cs.data(), 37);
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
      if (!isa_supported(isa)) continue;
      std::vector<float> got_add = x, got_rope(x.begin(), x.begin() + 74);
      vector_math(isa).add_scaled(got_add.data(), y.data(), int64_t(x.size()), scale);
      vector_math(isa).rope_rotate(got_rope.data(), cs.data(), 37);
      EXPECT_EQ(std::memcmp(got_add.data(), want_add.data(), x.size() * 4), 0) << isa_name(isa) << " " << scale;
      EXPECT_EQ(std::memcmp(got_rope.data(), want_rope.data(), 74 * 4), 0) << isa_name(isa);
    }
  }
}

// Calls check(n, x) for every length n up to 40 (tails of every size after whole vectors) and for
// `long_n`, x a row of n normal values (standard deviation 4) drawn from `seed`.
template <class Check>
void for_each_random_row(unsigned seed, int64_t long_n, Check check) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 4.0f);
  std::vector<int64_t> lengths(41);
  for (int64_t n = 0; n <= 40; ++n) lengths[size_t(n)] = n;
  lengths.push_back(long_n);
  for (int64_t n : lengths) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = d(rng);
    check(n, x);
  }
}

// The sampler's passes: argmax (ties to the first, a NaN wins wherever it is), the sum in double,
// log-softmax and the temperature-scaled exponentials, at every length up to 40 (tails of every
// size after whole vectors) and at a vocabulary-like 32003.
TEST(VectorMath, SamplerPassesOfEveryIsaEqualPortable) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for_each_random_row(11, 32003, [&](int64_t n, const std::vector<float>& x) {
    std::vector<std::vector<float>> cases = {x};
    if (n > 0) {
      std::vector<float> tie = x, with_nan = x, low = x;
      tie[size_t(n) / 2] = tie[size_t(n) - 1] = 100.0f;  // equal maxima: the first wins
      with_nan[size_t(n) * 2 / 3] = nan;
      for (float& v : low) v = -inf;
      cases.insert(cases.end(), {tie, with_nan, low});
    }
    for (const std::vector<float>& c : cases) {
      const VectorMathKernels& ref = vector_math(Isa::kPortable);
      const int64_t want_arg = ref.argmax(c.data(), n);
      const double want_sum = ref.sum_f64(c.data(), n);
      std::vector<float> want_exp(c.size()), want_log = c;
      ref.exp_scaled(c.data(), want_exp.data(), n, 1.25f, 2.0f);
      ref.subtract_log_sum(want_log.data(), n, 3.0f, 1.7);
      for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
        if (!isa_supported(isa)) continue;
        const VectorMathKernels& k = vector_math(isa);
        std::vector<float> got_exp(c.size()), got_log = c;
        k.exp_scaled(c.data(), got_exp.data(), n, 1.25f, 2.0f);
        k.subtract_log_sum(got_log.data(), n, 3.0f, 1.7);
        EXPECT_EQ(k.argmax(c.data(), n), want_arg) << isa_name(isa) << " n " << n;
        const double got_sum = k.sum_f64(c.data(), n);
        EXPECT_EQ(std::memcmp(&got_sum, &want_sum, sizeof(double)), 0) << isa_name(isa) << " n " << n;
        EXPECT_EQ(std::memcmp(got_exp.data(), want_exp.data(), c.size() * 4), 0) << isa_name(isa) << " n " << n;
        EXPECT_EQ(std::memcmp(got_log.data(), want_log.data(), c.size() * 4), 0) << isa_name(isa) << " n " << n;
      }
    }
  });
}

// Attention's softmax reductions: the maximum that skips NaN (std::max from -inf) and the sum in
// dot.h's 16-lane order (the dot product with a row of ones), at every length up to 40 and at 513,
// with NaN among the values, and rows of -inf and of negative zeros.
TEST(VectorMath, SoftmaxReductionsOfEveryIsaEqualPortable) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for_each_random_row(13, 513, [&](int64_t n, const std::vector<float>& x) {
    std::vector<std::vector<float>> cases = {x};
    if (n > 0) {
      std::vector<float> with_nan = x, low = x, zeros(x.size(), -0.0f);
      with_nan[0] = with_nan[size_t(n) - 1] = nan;
      for (float& v : low) v = -inf;
      cases.insert(cases.end(), {with_nan, low, zeros});
    }
    const std::vector<float> ones(x.size(), 1.0f);
    for (const std::vector<float>& c : cases) {
      float want_max = -inf;
      for (float v : c) want_max = std::max(want_max, v);
      const float want_sum = dot_portable(c.data(), ones.data(), n);
      for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
        if (!isa_supported(isa)) continue;
        const float got_max = vector_math(isa).max_value(c.data(), n);
        const float got_sum = vector_math(isa).sum_lanes(c.data(), n);
        EXPECT_EQ(std::memcmp(&got_max, &want_max, 4), 0) << isa_name(isa) << " n " << n;
        EXPECT_EQ(std::memcmp(&got_sum, &want_sum, 4), 0) << isa_name(isa) << " n " << n;
      }
    }
  });
}

// The tokens at or above a floor and their mass, in index order: floors that keep none, some and
// all of the values, NaN never kept.
TEST(VectorMath, SelectionsAboveAFloorOfEveryIsaEqualPortable) {
  std::mt19937 rng(12);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (int64_t n : {0, 1, 15, 16, 17, 40, 32003}) {
    std::vector<float> x(static_cast<size_t>(n)), w(static_cast<size_t>(n));
    for (float& v : x) v = d(rng);
    for (float& v : w) v = std::exp(d(rng));
    if (n > 3) x[2] = std::numeric_limits<float>::quiet_NaN();
    for (float floor : {-std::numeric_limits<float>::infinity(), -1.0f, 4.0f, 100.0f}) {
      std::vector<IndexedValue> want(x.size());
      const int64_t want_n = vector_math(Isa::kPortable).select_at_least(x.data(), n, floor, want.data());
      const double want_sum = vector_math(Isa::kPortable).sum_at_least(w.data(), x.data(), n, floor);
      for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
        if (!isa_supported(isa)) continue;
        std::vector<IndexedValue> got(x.size());
        const int64_t got_n = vector_math(isa).select_at_least(x.data(), n, floor, got.data());
        ASSERT_EQ(got_n, want_n) << isa_name(isa) << " n " << n << " floor " << floor;
        for (int64_t i = 0; i < got_n; ++i) {
          EXPECT_EQ(got[size_t(i)].id, want[size_t(i)].id) << isa_name(isa) << " n " << n;
          EXPECT_EQ(got[size_t(i)].value, want[size_t(i)].value) << isa_name(isa) << " n " << n;
        }
        const double got_sum = vector_math(isa).sum_at_least(w.data(), x.data(), n, floor);
        EXPECT_EQ(std::memcmp(&got_sum, &want_sum, sizeof(double)), 0) << isa_name(isa) << " n " << n;
      }
    }
  }
  const std::vector<float> x = {3.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f, 5.0f};
  std::vector<IndexedValue> out(4);
  ASSERT_EQ(vector_math(Isa::kPortable).select_at_least(x.data(), 4, 2.0f, out.data()), 2);
  EXPECT_EQ(out[0].id, 0);
  EXPECT_EQ(out[1].id, 3);
}

TEST(VectorMath, ArgmaxPicksTheFirstNanOrTheFirstLargest) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1.0f, 5.0f, -inf, 5.0f, nan, 7.0f, nan};
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    EXPECT_EQ(vector_math(isa).argmax(x.data(), 4), 1) << isa_name(isa);
    EXPECT_EQ(vector_math(isa).argmax(x.data(), 7), 4) << isa_name(isa);
    EXPECT_EQ(vector_math(isa).argmax(x.data(), 0), -1) << isa_name(isa);
  }
}

}  // namespace
}  // namespace kvlm::cpu
