// AVX-512 block kernels of attention (attention_blocks.inl): one 16-lane accumulator is one zmm
// register, so a key block's 16 score accumulators and the value loop's accumulators stay in
// registers. Row decoders are the AVX2 ones (a row is only head_dim wide; they are not the cost).
// GCC 12 reports false "uninitialized __Y" warnings inside its own AVX-512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kvlm/backend/cpu/attention_kernels.h"

#define KVLM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

namespace kvlm::cpu {
namespace {

struct Lanes {
  __m512 v;

  static KVLM_TARGET Lanes zero() { return {_mm512_setzero_ps()}; }
  static KVLM_TARGET Lanes load(const float* p) { return {_mm512_loadu_ps(p)}; }
  KVLM_TARGET void store(float* p) const { _mm512_storeu_ps(p, v); }
  static KVLM_TARGET Lanes set1(float x) { return {_mm512_set1_ps(x)}; }
  static KVLM_TARGET Lanes fma(Lanes a, Lanes b, Lanes acc) { return {_mm512_fmadd_ps(a.v, b.v, acc.v)}; }
  static KVLM_TARGET Lanes add(Lanes a, Lanes b) { return {_mm512_add_ps(a.v, b.v)}; }
  static KVLM_TARGET Lanes mul(Lanes a, Lanes b) { return {_mm512_mul_ps(a.v, b.v)}; }

  // The fold of 16 accumulators, each step adding the halves of several rows at once:
  //   k + k+8: 256-bit halves of rows 2p, 2p+1 gathered into two registers and added;
  //   k + k+4: 128-bit quarters of four rows likewise (a register then holds 4 rows);
  //   k + k+2, k + k+1: shuffles within 128-bit lanes pair up two registers (8, then 16 rows).
  // The result holds row 4m + L in element 4L + m; one permute restores row order.
  static KVLM_TARGET void reduce16(const Lanes (&acc)[16], float* out) {
    __m512 b[8], c[4], d[2];
    for (int p = 0; p < 8; ++p)
      b[p] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * p].v, acc[2 * p + 1].v, 0x44),
                           _mm512_shuffle_f32x4(acc[2 * p].v, acc[2 * p + 1].v, 0xEE));
    for (int q = 0; q < 4; ++q)
      c[q] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], 0x88),
                           _mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], 0xDD));
    for (int s = 0; s < 2; ++s)
      d[s] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, e));
  }
};

// 32 zmm registers: 8 accumulators, the rest for rows and broadcast weights.
constexpr int kValueTile = 8;

}  // namespace
}  // namespace kvlm::cpu

#include "kvlm/backend/cpu/attention_blocks.inl"

namespace kvlm::cpu {

AttentionRowOps attention_row_ops_avx512(const KVCodec& codec) {
  AttentionRowOps ops = attention_row_ops_avx2(codec);
  if (codec.head_dim() % 16 == 0) {
    ops.score_block = score_block_simd;
    ops.accumulate_block = accumulate_block_simd;
  }
  return ops;
}

}  // namespace kvlm::cpu
