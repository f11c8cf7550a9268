// AVX2 dot-product blocks. One 8-float register holds the eight partial sums of cpu::dot; the
// multiply and the add stay separate instructions (no FMA) so every rounding matches the portable
// loop. bf16 and f16 weights are widened in registers (both widenings are exact), so a weight is
// read from memory once, in its stored size. Register tiling (4 token rows × 2 weight rows) loads
// each vector once for several products.
#include <immintrin.h>

#include "kvlm/backend/cpu/dot_block.h"
#include "kvlm/base/half.h"

namespace kvlm::cpu {
namespace {

constexpr int64_t kTileT = 4, kTileR = 2;

#define KVLM_AVX2 __attribute__((target("avx2,f16c")))

// Eight weights widened to f32.
template <DType D>
KVLM_AVX2 inline __m256 load8(const void* row, int64_t i) {
  if constexpr (D == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i));
    if constexpr (D == DType::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <DType D>
inline float load1(const void* row, int64_t i) {
  if constexpr (D == DType::kF32) return static_cast<const float*>(row)[i];
  const uint16_t h = static_cast<const uint16_t*>(row)[i];
  return D == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// The fixed combining tree of cpu::dot, then its scalar tail.
template <DType D>
KVLM_AVX2 inline float finish(__m256 acc, const float* a, const void* row, int64_t i, int64_t n) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  float s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  for (; i < n; ++i) s += a[i] * load1<D>(row, i);
  return s;
}

template <DType D, int64_t NT, int64_t NR>
KVLM_AVX2 void tile(const float* x, int64_t in, const void* const* rows, float* y, int64_t ldy) {
  __m256 acc[NT][NR];
  for (int64_t t = 0; t < NT; ++t)
    for (int64_t r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= in; i += 8) {
    __m256 w[NR];
    for (int64_t r = 0; r < NR; ++r) w[r] = load8<D>(rows[r], i);
    for (int64_t t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * in + i);
      for (int64_t r = 0; r < NR; ++r)
        acc[t][r] = _mm256_add_ps(acc[t][r], _mm256_mul_ps(xv, w[r]));
    }
  }
  for (int64_t t = 0; t < NT; ++t)
    for (int64_t r = 0; r < NR; ++r) y[t * ldy + r] = finish<D>(acc[t][r], x + t * in, rows[r], i, in);
}

// Dispatches the ragged edges to smaller tiles; the math per output is the same in all of them.
template <DType D, int64_t NT>
KVLM_AVX2 void tile_rows(const float* x, int64_t in, const void* const* rows, int64_t R, float* y,
                         int64_t ldy) {
  int64_t r = 0;
  for (; r + kTileR <= R; r += kTileR) tile<D, NT, kTileR>(x, in, rows + r, y + r, ldy);
  for (; r < R; ++r) tile<D, NT, 1>(x, in, rows + r, y + r, ldy);
}

template <DType D>
KVLM_AVX2 void dot_block(const float* x, int64_t T, int64_t in, const void* const* rows, int64_t R,
                         float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + kTileT <= T; t += kTileT) tile_rows<D, kTileT>(x + t * in, in, rows, R, y + t * ldy, ldy);
  for (; t < T; ++t) tile_rows<D, 1>(x + t * in, in, rows, R, y + t * ldy, ldy);
}

}  // namespace

void dot_block_avx2(const float* x, int64_t T, int64_t in, const void* const* rows, DType row_dtype,
                    int64_t R, float* y, int64_t ldy) {
  switch (row_dtype) {
    case DType::kBF16: return dot_block<DType::kBF16>(x, T, in, rows, R, y, ldy);
    case DType::kF16: return dot_block<DType::kF16>(x, T, in, rows, R, y, ldy);
    default: return dot_block<DType::kF32>(x, T, in, rows, R, y, ldy);
  }
}

}  // namespace kvlm::cpu
