#include "kvlm/engine/rng.h"

#include <gtest/gtest.h>

#include <set>

namespace kvlm {
namespace {

// Random123's published known-answer vectors for Philox4x32-10.
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Uniform01, IsAPureFunctionOfSeedStepAndStream) {
  const double a = uniform01(42, 7, RngStream::kCategorical);
  uniform01(42, 8, RngStream::kCategorical);  // other draws in between change nothing
  uniform01(1, 7, RngStream::kCategorical);
  EXPECT_EQ(uniform01(42, 7, RngStream::kCategorical), a);
  EXPECT_NE(uniform01(42, 7, RngStream::kXtc), a);
  EXPECT_NE(uniform01(43, 7, RngStream::kCategorical), a);
  EXPECT_NE(uniform01(42, 6, RngStream::kCategorical), a);
  // The seed's high half and the step's high half both reach the key/counter.
  EXPECT_NE(uniform01(42 + (uint64_t(1) << 32), 7, RngStream::kCategorical), a);
  EXPECT_NE(uniform01(42, 7 + (uint64_t(1) << 32), RngStream::kCategorical), a);
}

TEST(Uniform01, StaysInUnitIntervalWithUniformMoments) {
  // A fixed seed makes this deterministic; the bounds are ~10 standard errors wide.
  constexpr int kN = 100000;
  double sum = 0, sum_sq = 0;
  int below_tenth = 0;
  std::set<double> seen;
  for (int i = 0; i < kN; ++i) {
    const double u = uniform01(2024, uint64_t(i), RngStream::kCategorical);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    below_tenth += u < 0.1;
    seen.insert(u);
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.01);
  EXPECT_NEAR(sum_sq / kN, 1.0 / 3.0, 0.01);
  EXPECT_NEAR(double(below_tenth) / kN, 0.1, 0.01);
  EXPECT_EQ(seen.size(), size_t(kN));  // 53-bit draws: no collisions expected
}

}  // namespace
}  // namespace kvlm
