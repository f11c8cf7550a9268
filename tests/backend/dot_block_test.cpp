// The SIMD dot-product blocks must equal the portable loop bit for bit, for every shape.
#include "kvlm/backend/cpu/dot_block.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace kvlm::cpu {
namespace {

TEST(DotBlock, Avx2EqualsPortableBitForBit) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t in : {1, 7, 8, 9, 64, 100, 384}) {
    for (int64_t T : {1, 3, 4, 5, 9}) {
      for (int64_t R : {1, 2, 3, 16}) {
        std::vector<float> x(size_t(T * in)), w(size_t(R * in));
        for (float& v : x) v = dist(rng);
        for (float& v : w) v = dist(rng);
        std::vector<const float*> rows;
        for (int64_t r = 0; r < R; ++r) rows.push_back(w.data() + r * in);
        std::vector<float> a(size_t(T * R)), b(size_t(T * R));
        dot_block_portable(x.data(), T, in, rows.data(), R, a.data(), R);
        dot_block_avx2(x.data(), T, in, rows.data(), R, b.data(), R);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
            << "in=" << in << " T=" << T << " R=" << R;
      }
    }
  }
}

TEST(DotBlock, ResultOfARowDoesNotDependOnTheOtherRows) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t in = 77, R = 5;
  std::vector<float> x(size_t(9 * in)), w(size_t(R * in));
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  std::vector<const float*> rows;
  for (int64_t r = 0; r < R; ++r) rows.push_back(w.data() + r * in);
  std::vector<float> all(static_cast<size_t>(9 * R)), one(static_cast<size_t>(R));
  dot_block_kernel()(x.data(), 9, in, rows.data(), R, all.data(), R);
  for (int64_t t = 0; t < 9; ++t) {
    dot_block_kernel()(x.data() + t * in, 1, in, rows.data(), R, one.data(), R);
    EXPECT_EQ(std::memcmp(one.data(), all.data() + t * R, size_t(R) * sizeof(float)), 0) << t;
  }
}

}  // namespace
}  // namespace kvlm::cpu
