// The SIMD dot-product blocks must equal the portable loop bit for bit, for every shape.
#include "kvlm/backend/cpu/dot_block.h"
#include "kvlm/base/half.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace kvlm::cpu {
namespace {

// Rows of `w` in `dt` (rounded from the f32 values for bf16/f16), as the kernels read them.
std::vector<const void*> stored_rows(const std::vector<float>& w, int64_t R, int64_t in, DType dt,
                                     std::vector<uint16_t>& half) {
  std::vector<const void*> rows;
  half.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) half[i] = dt == DType::kBF16 ? f32_to_bf16(w[i]) : f32_to_f16(w[i]);
  for (int64_t r = 0; r < R; ++r)
    rows.push_back(dt == DType::kF32 ? static_cast<const void*>(w.data() + r * in)
                                     : static_cast<const void*>(half.data() + r * in));
  return rows;
}

TEST(DotBlock, Avx2EqualsPortableBitForBit) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t in : {1, 7, 8, 9, 64, 100, 384}) {
    for (int64_t T : {1, 3, 4, 5, 9}) {
      for (int64_t R : {1, 2, 3, 16}) {
        std::vector<float> x(size_t(T * in)), w(size_t(R * in));
        for (float& v : x) v = dist(rng);
        for (float& v : w) v = dist(rng);
        for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
          std::vector<uint16_t> half;
          const auto rows = stored_rows(w, R, in, dt, half);
          std::vector<float> a(size_t(T * R)), b(size_t(T * R));
          dot_block_portable(x.data(), T, in, rows.data(), dt, R, a.data(), R);
          dot_block_avx2(x.data(), T, in, rows.data(), dt, R, b.data(), R);
          EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
              << dtype_name(dt) << " in=" << in << " T=" << T << " R=" << R;
        }
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
  std::vector<uint16_t> half;
  const auto rows = stored_rows(w, R, in, DType::kBF16, half);
  std::vector<float> all(static_cast<size_t>(9 * R)), one(static_cast<size_t>(R));
  dot_block_kernel()(x.data(), 9, in, rows.data(), DType::kBF16, R, all.data(), R);
  for (int64_t t = 0; t < 9; ++t) {
    dot_block_kernel()(x.data() + t * in, 1, in, rows.data(), DType::kBF16, R, one.data(), R);
    EXPECT_EQ(std::memcmp(one.data(), all.data() + t * R, size_t(R) * sizeof(float)), 0) << t;
  }
}

}  // namespace
}  // namespace kvlm::cpu
