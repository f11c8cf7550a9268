// AVX2 dot-product blocks. One 8-float register holds the eight partial sums of cpu::dot; the
// multiply and the add stay separate instructions (no FMA) so every rounding matches the portable
// loop. Speed comes from register tiling: a tile of 4 token rows × 2 weight rows loads each vector
// once for several products.
#include <immintrin.h>

#include "kvlm/backend/cpu/dot_block.h"

namespace kvlm::cpu {
namespace {

constexpr int64_t kTileT = 4, kTileR = 2;

// The fixed combining tree of cpu::dot, then its scalar tail.
__attribute__((target("avx2"))) inline float finish(__m256 acc, const float* a, const float* b,
                                                    int64_t i, int64_t n) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  float s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

template <int64_t NT, int64_t NR>
__attribute__((target("avx2"))) void tile(const float* x, int64_t in, const float* const* rows,
                                          float* y, int64_t ldy) {
  __m256 acc[NT][NR];
  for (int64_t t = 0; t < NT; ++t)
    for (int64_t r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= in; i += 8) {
    __m256 w[NR];
    for (int64_t r = 0; r < NR; ++r) w[r] = _mm256_loadu_ps(rows[r] + i);
    for (int64_t t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * in + i);
      for (int64_t r = 0; r < NR; ++r)
        acc[t][r] = _mm256_add_ps(acc[t][r], _mm256_mul_ps(xv, w[r]));
    }
  }
  for (int64_t t = 0; t < NT; ++t)
    for (int64_t r = 0; r < NR; ++r) y[t * ldy + r] = finish(acc[t][r], x + t * in, rows[r], i, in);
}

// Dispatches the ragged edges to smaller tiles; the math per output is the same in all of them.
template <int64_t NT>
__attribute__((target("avx2"))) void tile_rows(const float* x, int64_t in, const float* const* rows,
                                               int64_t R, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + kTileR <= R; r += kTileR) tile<NT, kTileR>(x, in, rows + r, y + r, ldy);
  for (; r < R; ++r) tile<NT, 1>(x, in, rows + r, y + r, ldy);
}

}  // namespace

__attribute__((target("avx2"))) void dot_block_avx2(const float* x, int64_t T, int64_t in,
                                                    const float* const* rows, int64_t R, float* y,
                                                    int64_t ldy) {
  int64_t t = 0;
  for (; t + kTileT <= T; t += kTileT) tile_rows<kTileT>(x + t * in, in, rows, R, y + t * ldy, ldy);
  for (; t < T; ++t) tile_rows<1>(x + t * in, in, rows, R, y + t * ldy, ldy);
}

}  // namespace kvlm::cpu
