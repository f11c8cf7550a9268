// Lloyd-Max generators and the MLX RNG reproduction: Threefry known answers, the seed's sign
// vectors and tables regenerated from MLX's RNG, the exact Gaussian optimum against published
// values, and the hard-coded gaussian tables against the generator.
#include "kvlm/quant/lloyd_max.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kvlm/base/error.h"
#include "kvlm/quant/turboquant_tables.h"

namespace kvlm {
namespace {

int ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return a == b ? 0 : 1 << 30;
  return std::abs(ia - ib);
}

TEST(MlxRng, ThreefryKnownAnswers) {
  // Random123's Threefry-2x32-20 known-answer vectors.
  EXPECT_EQ(threefry2x32({0u, 0u}, {0u, 0u}), std::make_pair(0x6b200159u, 0x99ba4efeu));
  EXPECT_EQ(threefry2x32({0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            std::make_pair(0x1cb996fcu, 0xbb002be7u));
  EXPECT_EQ(threefry2x32({0x13198a2eu, 0x03707344u}, {0x243f6a88u, 0x85a308d3u}),
            std::make_pair(0xc4923a9cu, 0x483df7a0u));
  // mx.random.bits((128,), key(42))[0] (turboquant.md §C.1).
  EXPECT_EQ(mlx_random_bits({0u, 42u}, 128)[0], 0xfed0b75eu);
  EXPECT_THROW(mlx_random_bits({0u, 0u}, 3), Error);
}

TEST(MlxRng, RegeneratesTheSeedSignVectors) {
  // Provenance: the seed's constants are MLX 0.31's randint(0, 2, (d,), key(42)) mapped to ±1.
  for (int d : kTurboHeadDims) {
    const std::vector<int8_t> s = mlx_seed_sign_vector(d);
    const auto seed = turbo_sign_vector(d);
    ASSERT_EQ(s.size(), seed.size());
    for (int i = 0; i < d; ++i) EXPECT_EQ(s[size_t(i)], seed[size_t(i)]) << d << " " << i;
  }
}

TEST(MlxRng, NormalSamplesSpanTheSeedEightBitTable) {
  // The seed's 8-bit fit started from linspace(min, max) and its extreme cells never moved, so
  // its end centroids are the sample extremes of normal((200000,), key(0)).
  const std::vector<float> x = mlx_random_normal({0u, 0u}, 200000);
  float lo = x[0], hi = x[0];
  double mean = 0, var = 0;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v), mean += v;
  mean /= double(x.size());
  for (float v : x) var += (v - mean) * (v - mean);
  var /= double(x.size());
  const LloydMaxTable& t8 = turbo_lloyd_max_table(TurboTables::kSeed, 8);
  EXPECT_EQ(lo, t8.centroids.front());
  EXPECT_EQ(hi, t8.centroids.back());
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.01);
}

TEST(LloydMax, SampleFitReproducesTheSeedTables) {
  // vllm-metal's procedure on MLX's samples. Stated tolerance: 2-bit bit-identical; 4/5/8-bit
  // within 3 float32 ulp (the seed was summed on a GPU in an order kvlm cannot replay), with
  // the same iteration counts. The 3-bit seed table is the hard-coded Max table, not a fit.
  const struct {
    int bits, iterations, max_ulp;
  } cases[] = {{2, 67, 0}, {4, 267, 3}, {5, 467, 3}, {8, 135, 3}};
  for (const auto& c : cases) {
    const LloydMaxFit fit = lloyd_max_mlx_samples(c.bits);
    const LloydMaxTable& seed = turbo_lloyd_max_table(TurboTables::kSeed, c.bits);
    EXPECT_TRUE(fit.converged) << c.bits;
    EXPECT_EQ(fit.iterations, c.iterations) << c.bits;
    ASSERT_EQ(fit.centroids.size(), seed.centroids.size());
    for (size_t k = 0; k < seed.centroids.size(); ++k)
      EXPECT_LE(ulp_distance(fit.centroids[k], seed.centroids[k]), c.max_ulp)
          << c.bits << " centroid " << k;
    for (size_t k = 0; k < seed.boundaries.size(); ++k)
      EXPECT_LE(ulp_distance(fit.boundaries[k], seed.boundaries[k]), c.max_ulp)
          << c.bits << " boundary " << k;
  }
}

TEST(LloydMax, GaussianOptimumMatchesPublishedValues) {
  // Positive centroids and MSE of the exact N(0,1) optimum (turboquant.md §A.4, §C.3; Max 1960).
  const std::vector<double> c1 = {0.797885}, c2 = {0.452780, 1.510418},
                            c3 = {0.245094, 0.756005, 1.343909, 2.151946},
                            c4 = {0.128395, 0.388048, 0.656759, 0.942340,
                                  1.256231, 1.618046, 2.069017, 2.732590};
  const struct {
    int bits;
    const std::vector<double>* positive;
    double mse;
  } cases[] = {{1, &c1, 0.363380}, {2, &c2, 0.117482},     {3, &c3, 0.034548},
               {4, &c4, 0.009501}, {5, nullptr, 0.002505}, {8, nullptr, 0.0000412}};
  for (const auto& c : cases) {
    const LloydMaxFit fit = lloyd_max_gaussian(c.bits);
    EXPECT_TRUE(fit.converged) << c.bits;
    const size_t n = fit.centroids.size();
    ASSERT_EQ(n, size_t(1) << c.bits);
    for (size_t k = 0; c.positive && k < c.positive->size(); ++k)
      EXPECT_NEAR(fit.centroids[n / 2 + k], (*c.positive)[k], 1e-6) << c.bits << " " << k;
    const double mse = gaussian_table_mse(fit.centroids, fit.boundaries);
    EXPECT_NEAR(mse, c.mse, 0.0005 * c.mse + 5e-7) << c.bits;
    // Optimality: moving any centroid alone (with its boundaries) does not lower the MSE.
    std::vector<float> moved = fit.centroids;
    moved[n / 2] += 1e-3f;
    std::vector<float> b(n - 1);
    for (size_t k = 0; k + 1 < n; ++k) b[k] = (moved[k] + moved[k + 1]) * 0.5f;
    EXPECT_GT(gaussian_table_mse(moved, b), mse) << c.bits;
  }
  // The 8-bit optimum reaches further into the tails than the seed's sample-range table.
  EXPECT_NEAR(lloyd_max_gaussian(8).centroids.back(), 4.6035, 1e-3);
  EXPECT_THROW(lloyd_max_gaussian(0), Error);
  EXPECT_THROW(lloyd_max_gaussian(9), Error);
}

TEST(LloydMax, GaussianTablesMatchGenerator) {
  // turboquant_tables.cpp hard-codes lloyd_max_gaussian's output; on a mismatch this prints the
  // fresh values to paste.
  for (int bits : {2, 3, 4, 5, 8}) {
    const LloydMaxFit fit = lloyd_max_gaussian(bits);
    const LloydMaxTable& t = turbo_lloyd_max_table(TurboTables::kGaussian, bits);
    const bool same = std::equal(fit.centroids.begin(), fit.centroids.end(), t.centroids.begin(),
                                 t.centroids.end()) &&
                      std::equal(fit.boundaries.begin(), fit.boundaries.end(), t.boundaries.begin(),
                                 t.boundaries.end());
    EXPECT_TRUE(same) << bits;
    if (!same) {
      std::printf("kGaussCentroids%d:", bits);
      for (float v : fit.centroids) std::printf(" %.9gf,", v);
      std::printf("\nkGaussBoundaries%d:", bits);
      for (float v : fit.boundaries) std::printf(" %.9gf,", v);
      std::printf("\n");
    }
  }
}

TEST(LloydMax, TableQualitySeedVersusGaussian) {
  // Analytic N(0,1) MSE (turboquant.md §C.3): the seed's 2/3/4/5-bit tables are within 0.3% of
  // optimal, its 8-bit table 2.4x worse (its fit stopped at a 1e-4 threshold).
  const struct {
    int bits;
    double seed, optimal;
  } cases[] = {{2, 0.117486, 0.117482},
               {3, 0.034548, 0.034548},
               {4, 0.009507, 0.009501},
               {5, 0.002512, 0.002505},
               {8, 0.0001003, 0.0000412}};
  for (const auto& c : cases) {
    const LloydMaxTable& s = turbo_lloyd_max_table(TurboTables::kSeed, c.bits);
    const LloydMaxTable& g = turbo_lloyd_max_table(TurboTables::kGaussian, c.bits);
    const double ms = gaussian_table_mse(s.centroids, s.boundaries);
    const double mg = gaussian_table_mse(g.centroids, g.boundaries);
    std::printf("[ table MSE ] bits %d: seed %.9g gaussian %.9g\n", c.bits, ms, mg);
    EXPECT_NEAR(ms, c.seed, 0.001 * c.seed) << c.bits;
    EXPECT_NEAR(mg, c.optimal, 0.001 * c.optimal) << c.bits;
    EXPECT_LE(mg, ms * (1 + 1e-6)) << c.bits;
  }
  // A one-level table: the mean of N(0,1) over R is 0 and the MSE is the variance.
  const float zero[] = {0.0f};
  EXPECT_NEAR(gaussian_table_mse(zero, {}), 1.0, 1e-12);
}

}  // namespace
}  // namespace kvlm
