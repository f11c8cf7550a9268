// AVX2 (+F16C) operations of attention (attention_kernels.h): the row decoders of
// attention_rows.inl eight elements at a time, and the block kernels of attention_blocks.inl on 16
// lanes held as two ymm registers. Both compute exactly the portable expressions, so attention gives
// the same bits with either ISA.
#include <immintrin.h>

#include "kvlm/backend/cpu/attention_kernels.h"

#define KVLM_TARGET __attribute__((target("avx2,fma,f16c")))

namespace kvlm::cpu {
namespace {

// Codes i .. i+7 (i a multiple of 8) of a row's little-endian code stream, as eight 32-bit
// lanes: 8-bit codes are bytes (signed for TurboQuant keys); narrower ones occupy kBits bytes per
// eight codes, which are read exactly (never past the codes) and split by variable shifts.
template <int kBits, bool kSigned = false>
KVLM_TARGET inline __m256i codes8(const uint8_t* stream, int i) {
  if constexpr (kBits == 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(stream + i));
    return kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
  } else {
    // Assembled from single bytes: a kBits-byte memcpy into a wider variable stalled on store
    // forwarding for the odd widths (3, 5), costing several times the whole row.
    const uint8_t* at = stream + i / 8 * kBits;
    uint64_t v = 0;
    for (int b = 0; b < kBits; ++b) v |= uint64_t(at[b]) << (8 * b);
    const int lo = int(uint32_t(v)), hi = int(uint32_t(v >> (4 * kBits)));
    const __m256i words = _mm256_set_epi32(hi, hi, hi, hi, lo, lo, lo, lo);
    const __m256i shifts = _mm256_set_epi32(3 * kBits, 2 * kBits, kBits, 0, 3 * kBits, 2 * kBits, kBits, 0);
    return _mm256_and_si256(_mm256_srlv_epi32(words, shifts), _mm256_set1_epi32((1 << kBits) - 1));
  }
}

// Eight f32 lanes for the row decoders (attention_rows.inl).
struct RowVec {
  static constexpr int kWidth = 8;
  __m256 v;

  template <int kBits, bool kSigned = false>
  static KVLM_TARGET __m256i codes(const uint8_t* stream, int i) { return codes8<kBits, kSigned>(stream, i); }
  static KVLM_TARGET RowVec to_float(__m256i c) { return {_mm256_cvtepi32_ps(c)}; }
  template <bool kBF16>
  static KVLM_TARGET RowVec half(const uint8_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {kBF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h)};
  }
  static KVLM_TARGET RowVec set1(float x) { return {_mm256_set1_ps(x)}; }
  static KVLM_TARGET RowVec add(RowVec a, RowVec b) { return {_mm256_add_ps(a.v, b.v)}; }
  static KVLM_TARGET RowVec mul(RowVec a, RowVec b) { return {_mm256_mul_ps(a.v, b.v)}; }
  KVLM_TARGET void store(float* p) const { _mm256_storeu_ps(p, v); }
};

// centroid[code] for eight codes. Up to 16 centroids stay in registers and are selected with
// permutes (a gather costs tens of cycles on some cores); wider tables are gathered.
template <int kBits>
struct CentroidLookup {
  const float* table;
  __m256 lo, hi;  // centroids 0..7 and 8..15 (bits <= 4)

  KVLM_TARGET explicit CentroidLookup(const float* centroids) : table(centroids) {
    if constexpr (kBits <= 4) {
      alignas(32) float t[16] = {};
      for (int i = 0; i < (1 << kBits); ++i) t[i] = centroids[i];
      lo = _mm256_load_ps(t);
      hi = _mm256_load_ps(t + 8);
    }
  }
  KVLM_TARGET RowVec operator()(__m256i code) const {
    if constexpr (kBits <= 3) return {_mm256_permutevar8x32_ps(lo, code)};
    if constexpr (kBits == 4) {
      // permutevar8x32 uses the low 3 bits of each index; bit 3 picks the upper eight.
      const __m256 upper = _mm256_castsi256_ps(_mm256_slli_epi32(code, 28));
      return {_mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, code),
                               _mm256_permutevar8x32_ps(hi, code), upper)};
    }
    return {_mm256_i32gather_ps(table, code, 4)};
  }
};

// 16 lanes as two ymm registers for the block kernels.
struct Lanes {
  __m256 lo, hi;

  static KVLM_TARGET Lanes zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static KVLM_TARGET Lanes load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  KVLM_TARGET void store(float* p) const { _mm256_storeu_ps(p, lo), _mm256_storeu_ps(p + 8, hi); }
  static KVLM_TARGET Lanes set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static KVLM_TARGET Lanes fma(Lanes a, Lanes b, Lanes acc) {
    return {_mm256_fmadd_ps(a.lo, b.lo, acc.lo), _mm256_fmadd_ps(a.hi, b.hi, acc.hi)};
  }
  static KVLM_TARGET Lanes add(Lanes a, Lanes b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static KVLM_TARGET Lanes mul(Lanes a, Lanes b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }

  // The fold of 16 accumulators, each step adding two rows' halves at once:
  //   k + k+8: lo + hi, one row per register;
  //   k + k+4: 128-bit halves of rows 2p, 2p+1 side by side, added (a register holds 2 rows);
  //   k + k+2, k + k+1: shuffles within 128-bit lanes pair up two registers (4, then 8 rows).
  // Register e[t] then holds row 8t + 2m + L in element 4L + m; one permute restores row order.
  static KVLM_TARGET void reduce16(const Lanes (&acc)[16], float* out) {
    __m256 b[16], c[8], d[4];
    #pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) b[r] = _mm256_add_ps(acc[r].lo, acc[r].hi);
    #pragma GCC unroll 16
    for (int p = 0; p < 8; ++p)
      c[p] = _mm256_add_ps(_mm256_permute2f128_ps(b[2 * p], b[2 * p + 1], 0x20),
                           _mm256_permute2f128_ps(b[2 * p], b[2 * p + 1], 0x31));
    #pragma GCC unroll 16
    for (int s = 0; s < 4; ++s)
      d[s] = _mm256_add_ps(_mm256_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm256_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    #pragma GCC unroll 16
    for (int t = 0; t < 2; ++t) {
      const __m256 e = _mm256_add_ps(_mm256_shuffle_ps(d[2 * t], d[2 * t + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm256_shuffle_ps(d[2 * t], d[2 * t + 1], _MM_SHUFFLE(3, 1, 3, 1)));
      _mm256_storeu_ps(out + 8 * t, _mm256_permutevar8x32_ps(e, order));
    }
  }
};

// 16 ymm registers: 4 accumulators of two registers each (one head x 4 slices), the rest for
// value slices and the weight.
constexpr int kValueTile = 4;

}  // namespace
}  // namespace kvlm::cpu

#include "kvlm/backend/cpu/attention_blocks.inl"
#include "kvlm/backend/cpu/attention_rows.inl"

namespace kvlm::cpu {

AttentionRowOps attention_row_ops_avx2(const KVCodec& codec) {
  // Every vector loop here steps by 8; odd head dims stay portable.
  AttentionRowOps ops = attention_row_ops_portable(codec);
  if (codec.head_dim() % 8 != 0) return ops;
  use_row_decoders(codec, ops);
  if (codec.head_dim() % 16 == 0) {
    ops.score_block = score_block_simd;
    ops.accumulate = accumulate_simd;
  }
  return ops;
}

}  // namespace kvlm::cpu
