// Token packing for the SIMD linear kernels (linear_rows.h: PackedX).
#include <immintrin.h>

#include <algorithm>

#include "kvlm/backend/cpu/linear_rows.h"
#include "kvlm/backend/ops.h"
#include "kvlm/base/thread_pool.h"

// Only the AVX2 and AVX-512 kernels read packed tokens, so packing may use AVX2.
#define KVLM_TARGET __attribute__((target("avx2")))

namespace kvlm::cpu {
namespace {

// Inputs k .. k+7 of 8 token rows (row u at x + u * in) written input by input, each input's 8
// tokens side by side: an 8 x 8 transpose in registers (unpack pairs, then quads, then halves).
KVLM_TARGET void transpose_8x8(const float* x, int64_t in, float* dst) {
  __m256 r[8], t[8], s[8];
#pragma GCC unroll 8
  for (int u = 0; u < 8; ++u) r[u] = _mm256_loadu_ps(x + u * in);
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    t[2 * p] = _mm256_unpacklo_ps(r[2 * p], r[2 * p + 1]);      // inputs 0, 1 | 4, 5 of rows 2p, 2p+1
    t[2 * p + 1] = _mm256_unpackhi_ps(r[2 * p], r[2 * p + 1]);  // inputs 2, 3 | 6, 7
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // rows 4h .. 4h+3: input j | j+4 in s[4h + j]
    s[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(dst + 8 * j, _mm256_permute2f128_ps(s[j], s[4 + j], 0x20));
    _mm256_storeu_ps(dst + 8 * (j + 4), _mm256_permute2f128_ps(s[j], s[4 + j], 0x31));
  }
}

// Inputs k .. k+7 of 2 token rows, interleaved.
KVLM_TARGET void interleave_2x8(const float* x, int64_t in, float* dst) {
  const __m256 a = _mm256_loadu_ps(x), b = _mm256_loadu_ps(x + in);
  const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(lo, hi, 0x20));
  _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

// One group: `real` token rows from x into `tokens` columns (padding tokens read zeros).
KVLM_TARGET void pack_group(const float* x, int64_t in, int tokens, int64_t real, float* dst) {
  int64_t k = 0;
  if (real == tokens && tokens == 8)
    for (; k + 8 <= in; k += 8) transpose_8x8(x + k, in, dst + k * 8);
  else if (real == tokens && tokens == 2)
    for (; k + 8 <= in; k += 8) interleave_2x8(x + k, in, dst + k * 2);
  for (; k < in; ++k) {
    for (int64_t u = 0; u < real; ++u) dst[k * tokens + u] = x[u * in + k];
    std::fill(dst + k * tokens + real, dst + (k + 1) * tokens, 0.0f);
  }
}

}  // namespace

PackedX pack_x(const float* x, int64_t T, int64_t in, int tokens) {
  PackedX p;
  p.tokens = tokens;
  p.group = in * tokens;
  const int64_t groups = (T + tokens - 1) / tokens;
  p.data.reset(new float[size_t(groups * p.group)]);
  // Pieces of at least 64K values: a pool round costs more than packing a few small groups (16
  // tokens of 384 inputs: 0.87 us on two threads, 0.19 us a group).
  const size_t grain = size_t(std::max<int64_t>(1, (int64_t(1) << 16) / p.group));
  ops::thread_pool().parallel_for(size_t(groups), grain, [&](size_t b, size_t e) {
    for (int64_t g = int64_t(b); g < int64_t(e); ++g)
      pack_group(x + g * tokens * in, in, tokens, std::min<int64_t>(tokens, T - g * tokens),
                 p.data.get() + g * p.group);
  });
  return p;
}

}  // namespace kvlm::cpu
