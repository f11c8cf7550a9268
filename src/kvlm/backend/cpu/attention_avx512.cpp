// AVX-512 operations of attention (attention_kernels.h): the block kernels of
// attention_blocks.inl, where one 16-lane accumulator is one zmm register, so a key block's 16
// score accumulators and the value loop's accumulators stay in registers; and the row decoders of
// attention_rows.inl 16 elements at a time. Both compute exactly the portable expressions, so every
// ISA gives the same bits.
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
    #pragma GCC unroll 16
    for (int p = 0; p < 8; ++p)
      b[p] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * p].v, acc[2 * p + 1].v, 0x44),
                           _mm512_shuffle_f32x4(acc[2 * p].v, acc[2 * p + 1].v, 0xEE));
    #pragma GCC unroll 16
    for (int q = 0; q < 4; ++q)
      c[q] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], 0x88),
                           _mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], 0xDD));
    #pragma GCC unroll 16
    for (int s = 0; s < 2; ++s)
      d[s] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, e));
  }
};

// 32 zmm registers: 16 accumulators (4 heads x 4 slices), 4 value slices, 4 weights. Seven heads
// (the 0.5B shape's group) then take tiles of 4 and 3 heads; with 12 accumulators they took 3, 3
// and a lone head whose four chains waited on the fma latency (AttentionTask 3-5% slower).
constexpr int kValueTile = 16;

// Codes i .. i+15 (i a multiple of 16) of a row's little-endian code stream as 16 32-bit lanes.
// Their 2*kBits bytes are loaded exactly (masked), copied to every 128-bit lane, and each lane
// picks the two bytes holding its code with a byte shuffle, then shifts and masks it out.
template <int kBits, bool kSigned = false>
KVLM_TARGET inline __m512i codes16(const uint8_t* stream, int i) {
  if constexpr (kBits == 8) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(stream + i));
    return kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
  } else {
    alignas(64) static constexpr auto kPick = [] {
      struct { int8_t bytes[64]; int32_t shifts[16]; } t{};
      for (int c = 0; c < 16; ++c) {
        const int bit = c * kBits;
        t.bytes[4 * c] = int8_t(bit / 8);
        t.bytes[4 * c + 1] = int8_t(bit / 8 + 1);  // byte 2*kBits at most: loaded as zero
        t.bytes[4 * c + 2] = t.bytes[4 * c + 3] = int8_t(0x80);  // zero
        t.shifts[c] = bit % 8;
      }
      return t;
    }();
    const __m128i b = _mm_maskz_loadu_epi8(__mmask16((1u << (2 * kBits)) - 1), stream + i / 8 * kBits);
    const __m512i pairs = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(b), _mm512_load_si512(kPick.bytes));
    return _mm512_and_si512(_mm512_srlv_epi32(pairs, _mm512_load_si512(kPick.shifts)),
                            _mm512_set1_epi32((1 << kBits) - 1));
  }
}

// 16 f32 lanes for the row decoders (attention_rows.inl).
struct RowVec {
  static constexpr int kWidth = 16;
  __m512 v;

  template <int kBits, bool kSigned = false>
  static KVLM_TARGET __m512i codes(const uint8_t* stream, int i) { return codes16<kBits, kSigned>(stream, i); }
  static KVLM_TARGET RowVec to_float(__m512i c) { return {_mm512_cvtepi32_ps(c)}; }
  template <bool kBF16>
  static KVLM_TARGET RowVec half(const uint8_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {kBF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h)};
  }
  static KVLM_TARGET RowVec set1(float x) { return {_mm512_set1_ps(x)}; }
  static KVLM_TARGET RowVec add(RowVec a, RowVec b) { return {_mm512_add_ps(a.v, b.v)}; }
  static KVLM_TARGET RowVec mul(RowVec a, RowVec b) { return {_mm512_mul_ps(a.v, b.v)}; }
  KVLM_TARGET void store(float* p) const { _mm512_storeu_ps(p, v); }
};

// centroid[code] for 16 codes: up to 32 centroids are selected by permutes from registers,
// wider tables gathered.
template <int kBits>
struct CentroidLookup {
  const float* table;
  __m512 lo, hi;  // centroids 0..15 and 16..31 (bits <= 5)

  KVLM_TARGET explicit CentroidLookup(const float* centroids) : table(centroids) {
    if constexpr (kBits <= 5) {
      alignas(64) float t[32] = {};
      for (int i = 0; i < (1 << kBits); ++i) t[i] = centroids[i];
      lo = _mm512_load_ps(t);
      hi = _mm512_load_ps(t + 16);
    }
  }
  KVLM_TARGET RowVec operator()(__m512i code) const {
    if constexpr (kBits <= 4) return {_mm512_permutexvar_ps(code, lo)};
    if constexpr (kBits == 5) return {_mm512_permutex2var_ps(lo, code, hi)};
    return {_mm512_i32gather_ps(code, table, 4)};
  }
};

}  // namespace
}  // namespace kvlm::cpu

#include "kvlm/backend/cpu/attention_blocks.inl"
#include "kvlm/backend/cpu/attention_rows.inl"

namespace kvlm::cpu {

AttentionRowOps attention_row_ops_avx512(const KVCodec& codec) {
  AttentionRowOps ops = attention_row_ops_avx2(codec);
  // Every loop here steps by 16; other head dims keep the AVX2 / portable operations.
  if (codec.head_dim() % 16 != 0) return ops;
  ops.score_block = score_block_simd;
  ops.accumulate = accumulate_simd;
  use_row_decoders(codec, ops);
  return ops;
}

}  // namespace kvlm::cpu
