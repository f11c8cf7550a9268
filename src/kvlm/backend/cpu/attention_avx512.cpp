// AVX-512 operations of attention (attention_kernels.h): the block kernels of
// attention_blocks.inl, where one 16-lane accumulator is one zmm register, so a query row's 16
// scores and the value loop's accumulators stay in registers; and the row decoders of
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

  // out[c*16 + r] = k[r][i + c]: rows paired within 128-bit lanes (unpack, then shuffle: lane L
  // of register 4q + m holds element 4L + m of rows 4q .. 4q+3), then the four row quads'
  // 128-bit lanes gathered into each output row. Inlined into keys_across' loop: called out of
  // line, each call's 16 loads waited for memory before the next call's were issued, and decode
  // over a cold KV (AttentionFromMemory) ran up to 10% slower.
  static KVLM_TARGET inline __attribute__((always_inline)) void transpose16(const float* const* k, int i, float* out) {
    __m512 a[16], b[16];
    #pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) a[r] = _mm512_loadu_ps(k[r] + i);
    #pragma GCC unroll 16
    for (int p = 0; p < 8; ++p) {
      b[2 * p] = _mm512_unpacklo_ps(a[2 * p], a[2 * p + 1]);
      b[2 * p + 1] = _mm512_unpackhi_ps(a[2 * p], a[2 * p + 1]);
    }
    #pragma GCC unroll 16
    for (int q = 0; q < 4; ++q) {
      a[4 * q] = _mm512_shuffle_ps(b[4 * q], b[4 * q + 2], 0x44);
      a[4 * q + 1] = _mm512_shuffle_ps(b[4 * q], b[4 * q + 2], 0xEE);
      a[4 * q + 2] = _mm512_shuffle_ps(b[4 * q + 1], b[4 * q + 3], 0x44);
      a[4 * q + 3] = _mm512_shuffle_ps(b[4 * q + 1], b[4 * q + 3], 0xEE);
    }
    #pragma GCC unroll 16
    for (int m = 0; m < 4; ++m) {
      const __m512 t0 = _mm512_shuffle_f32x4(a[m], a[4 + m], 0x44), t1 = _mm512_shuffle_f32x4(a[m], a[4 + m], 0xEE);
      const __m512 u0 = _mm512_shuffle_f32x4(a[8 + m], a[12 + m], 0x44), u1 = _mm512_shuffle_f32x4(a[8 + m], a[12 + m], 0xEE);
      _mm512_storeu_ps(out + 16 * m, _mm512_shuffle_f32x4(t0, u0, 0x88));
      _mm512_storeu_ps(out + 16 * (4 + m), _mm512_shuffle_f32x4(t0, u0, 0xDD));
      _mm512_storeu_ps(out + 16 * (8 + m), _mm512_shuffle_f32x4(t1, u1, 0x88));
      _mm512_storeu_ps(out + 16 * (12 + m), _mm512_shuffle_f32x4(t1, u1, 0xDD));
    }
  }
};

// Up to 8 query rows' score accumulators, the key vector and a broadcast fit the 32 zmm registers
// with room to spare; the 0.5B shape's group of 7 is one tile.
constexpr int kScoreRows = 8;

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
  ops.keys_across = keys_across_simd;
  ops.score_block = score_block_simd;
  // The value loop steps by 16; other head dims keep the AVX2 / portable operations.
  if (codec.head_dim() % 16 != 0) return ops;
  ops.accumulate = accumulate_simd;
  use_row_decoders(codec, ops);
  return ops;
}

}  // namespace kvlm::cpu
