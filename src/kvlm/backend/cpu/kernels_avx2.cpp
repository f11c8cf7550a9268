// AVX2 (with FMA and F16C) paths: one 16-lane accumulator is a pair of ymm registers.
#include <immintrin.h>

#include <cstdint>

#include "kvlm/backend/cpu/vector_math.h"

#define KVLM_TARGET __attribute__((target("avx2,fma,f16c")))

namespace kvlm::cpu {
namespace {

struct Vec {
  __m256 lo, hi;  // lanes 0-7 and 8-15
  // Makes the value live in registers (kernels_simd.inl's tile says why).
  void in_register() { asm("" : "+x"(lo), "+x"(hi)); }

  static KVLM_TARGET Vec zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static KVLM_TARGET Vec load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static KVLM_TARGET __m256 bf16x8(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static KVLM_TARGET Vec widen_bf16(const uint16_t* p) {
    return {bf16x8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            bf16x8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  }
  static KVLM_TARGET Vec widen_f16(const uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  }
  // 32 bf16 at p as f32: even = elements 0, 2, .., 30, odd = 1, 3, .., 31.
  static KVLM_TARGET void widen_bf16_pairs(const uint16_t* p, Vec& even, Vec& odd) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
    const __m256i high = _mm256_set1_epi32(int(0xFFFF0000u));
    even = {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(b, 16))};
    odd = {_mm256_castsi256_ps(_mm256_and_si256(a, high)), _mm256_castsi256_ps(_mm256_and_si256(b, high))};
  }
  // The inverse order: lo = even0, odd0, .., even7, odd7; hi = even8, odd8, .., even15, odd15.
  static KVLM_TARGET void interleave(Vec even, Vec odd, Vec& lo, Vec& hi) {
    interleave8(even.lo, odd.lo, lo.lo, lo.hi);
    interleave8(even.hi, odd.hi, hi.lo, hi.hi);
  }
  static KVLM_TARGET void interleave8(__m256 e, __m256 o, __m256& first, __m256& second) {
    const __m256 l = _mm256_unpacklo_ps(e, o), h = _mm256_unpackhi_ps(e, o);  // e0 o0 e1 o1 | e4 o4 e5 o5
    first = _mm256_permute2f128_ps(l, h, 0x20);
    second = _mm256_permute2f128_ps(l, h, 0x31);
  }
  // 16 bytes at p as f32 lanes.
  static KVLM_TARGET Vec codes8(const uint8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)),
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)))};
  }
  // 16 bytes at p as two vectors of 4-bit codes: lo = their low nibbles, hi = their high nibbles.
  static KVLM_TARGET void nibbles(const uint8_t* p, Vec& lo, Vec& hi) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i w0 = _mm256_cvtepu8_epi32(b), w1 = _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));
    const __m256i mask = _mm256_set1_epi32(15);
    lo = {_mm256_cvtepi32_ps(_mm256_and_si256(w0, mask)), _mm256_cvtepi32_ps(_mm256_and_si256(w1, mask))};
    hi = {_mm256_cvtepi32_ps(_mm256_srli_epi32(w0, 4)), _mm256_cvtepi32_ps(_mm256_srli_epi32(w1, 4))};
  }
  static KVLM_TARGET Vec fma(Vec a, Vec b, Vec acc) {
    return {_mm256_fmadd_ps(a.lo, b.lo, acc.lo), _mm256_fmadd_ps(a.hi, b.hi, acc.hi)};
  }
  static KVLM_TARGET Vec set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  KVLM_TARGET void store(float* p) const { _mm256_storeu_ps(p, lo), _mm256_storeu_ps(p + 8, hi); }
  static KVLM_TARGET Vec add(Vec a, Vec b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static KVLM_TARGET Vec sub(Vec a, Vec b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  static KVLM_TARGET Vec mul(Vec a, Vec b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static KVLM_TARGET Vec div(Vec a, Vec b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
  static KVLM_TARGET Vec neg(Vec a) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return {_mm256_xor_ps(a.lo, sign), _mm256_xor_ps(a.hi, sign)};
  }
  // exp_portable's operations, lane by lane.
  static KVLM_TARGET __m256 exp8(__m256 x) {
    using namespace exp_constants;
    const __m256 xc = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(kHi)), _mm256_set1_ps(kLo));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), xc);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
    __m256 p = _mm256_set1_ps(kP[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[i]));
    const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 out = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    out = _mm256_blendv_ps(out, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, _mm256_set1_ps(kHi), _CMP_GT_OQ));
    out = _mm256_blendv_ps(out, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(kLo), _CMP_LT_OQ));
    return _mm256_blendv_ps(out, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  static KVLM_TARGET Vec exp(Vec x) { return {exp8(x.lo), exp8(x.hi)}; }
  // Lanes fold in halves: k + k+8 (lo + hi), k + k+4, k + k+2, k + k+1.
  static KVLM_TARGET float fold(Vec a) {
    const __m256 h = _mm256_add_ps(a.lo, a.hi);
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
  }
  static KVLM_TARGET Vec max(Vec a, Vec b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
  static KVLM_TARGET float fold_max(Vec a) {
    const __m256 h = _mm256_max_ps(a.lo, a.hi);
    const __m128 q = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 d = _mm_max_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_max_ss(d, _mm_movehdup_ps(d)));
  }
  template <int kPredicate>
  static KVLM_TARGET uint32_t mask(Vec a, Vec b) {
    return uint32_t(_mm256_movemask_ps(_mm256_cmp_ps(a.lo, b.lo, kPredicate))) |
           uint32_t(_mm256_movemask_ps(_mm256_cmp_ps(a.hi, b.hi, kPredicate))) << 8;
  }
  static KVLM_TARGET uint32_t nan_mask(Vec a) { return mask<_CMP_UNORD_Q>(a, a); }
  static KVLM_TARGET uint32_t equal_mask(Vec a, Vec b) { return mask<_CMP_EQ_OQ>(a, b); }
  static KVLM_TARGET uint32_t at_least_mask(Vec a, Vec b) { return mask<_CMP_GE_OQ>(a, b); }
};

struct F64x8 {
  __m256d lo, hi;  // lanes 0-3 and 4-7
  static KVLM_TARGET F64x8 zero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static KVLM_TARGET F64x8 set1(double x) { return {_mm256_set1_pd(x), _mm256_set1_pd(x)}; }
  static KVLM_TARGET F64x8 widen(const float* p) {
    return {_mm256_cvtps_pd(_mm_loadu_ps(p)), _mm256_cvtps_pd(_mm_loadu_ps(p + 4))};
  }
  static KVLM_TARGET F64x8 add(F64x8 a, F64x8 b) { return {_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)}; }
  static KVLM_TARGET F64x8 sub(F64x8 a, F64x8 b) { return {_mm256_sub_pd(a.lo, b.lo), _mm256_sub_pd(a.hi, b.hi)}; }
  KVLM_TARGET void store(double* p) const { _mm256_storeu_pd(p, lo), _mm256_storeu_pd(p + 4, hi); }
  KVLM_TARGET void narrow(float* p) const {
    _mm_storeu_ps(p, _mm256_cvtpd_ps(lo));
    _mm_storeu_ps(p + 4, _mm256_cvtpd_ps(hi));
  }
};

// Panels (panels.h) on 16 ymm registers: 2 tokens x 32 rows (8 accumulators), one token one panel.
constexpr int kPanelTokens = 2, kPanelDecodePanels = 1;
// A 2-token tile reads a panel's line for every 8 fmas, and a panel of 896 inputs (57 KB of
// bf16) outgrows the L1 cache: without prefetches the tiles after the first stalled on the
// panel's loads from L2 (perf: the samples on the widening after each load). 0.5B bf16, prefill
// 256 tokens, three interleaved pairs: 91-105 -> 122-147 tok/s.
constexpr bool kPanelFetchEveryTile = true;

}  // namespace
}  // namespace kvlm::cpu

#include "kvlm/backend/cpu/kernels_simd.inl"

namespace kvlm::cpu {
namespace {

// Integer dot products with plain AVX2 (no VNNI needed), exact, in the lanes vpdpbusd would use:
// a pair of ymm registers is the 16 rows of a tile. vpmaddubsw multiplies 4-bit values by int8
// activations (two products of at most 15 * 128 = 1920 per int16, so it never saturates); 8-bit
// codes are split into nibbles, code = 16 * high + low. The int16 pairs are summed in int16 lanes
// for 16 products (at most 30720) before one vpmaddwd widens them into the int32 sums, so a word
// costs a multiply and an add per half-tile instead of two multiplies and an add.
struct I8 {
  struct Acc {
    __m256i lo, hi;            // int32 sums of rows 0-7 and 8-15
    __m256i low[2], high[2];   // int16 sums since the last settle: low nibbles (4-bit codes, or
                               // the low halves of 8-bit codes) and high halves, rows 0-7 and 8-15
  };
  // Low and high nibbles of rows 0-7 and 8-15: 4-bit codes 0, 2, 4, 6 and 1, 3, 5, 7 of each
  // row's word; for 8-bit codes the two halves of each code.
  struct Nibbles {
    __m256i lo[2], hi[2];
  };
  using W4 = Nibbles;
  using W8 = Nibbles;
  static constexpr int kTileTokens = 2;
  static constexpr int kTilesAtOnce = 1;  // 16 registers: no room for a second tile
  static constexpr bool kHandTile = false;  // int8_tile's C++ loops serve every tile
  // int16 sums take no second chain: their adds have a latency of one cycle.
  static constexpr int kSplitChainsBelow = 0;
  // Words between settles: 4-bit words add 4 products to each int16 lane, 8-bit words 2 to each
  // of low and high.
  template <int kBits>
  static constexpr int64_t kSettleWords = kBits == 4 ? 4 : 8;

  static KVLM_TARGET Nibbles load(const uint8_t* p) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    Nibbles n;
    for (int h = 0; h < 2; ++h) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h));
      n.lo[h] = _mm256_and_si256(w, mask);
      n.hi[h] = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
    }
    return n;
  }
  static KVLM_TARGET W4 load4(const uint8_t* p) { return load(p); }
  static KVLM_TARGET W8 load8(const uint8_t* p) { return load(p); }
  static KVLM_TARGET __m256i add16(__m256i sum, __m256i codes, __m256i x) {
    return _mm256_add_epi16(sum, _mm256_maddubs_epi16(codes, x));
  }
  static KVLM_TARGET Acc dot4(Acc acc, const __m256i (&codes)[2], const int32_t* x) {
    const __m256i xv = _mm256_set1_epi32(*x);
    for (int h = 0; h < 2; ++h) acc.low[h] = add16(acc.low[h], codes[h], xv);
    return acc;
  }
  static KVLM_TARGET Acc dot4_lo(Acc acc, const W4& w, const int32_t* x) { return dot4(acc, w.lo, x); }
  static KVLM_TARGET Acc dot4_hi(Acc acc, const W4& w, const int32_t* x) { return dot4(acc, w.hi, x); }
  static KVLM_TARGET Acc dot8(Acc acc, const W8& w, const int32_t* x) {
    const __m256i xv = _mm256_set1_epi32(*x);
    for (int h = 0; h < 2; ++h) {
      acc.low[h] = add16(acc.low[h], w.lo[h], xv);
      acc.high[h] = add16(acc.high[h], w.hi[h], xv);
    }
    return acc;
  }
  // A half-tile's int16 sums as int32 lanes (the high halves of 8-bit codes weigh 16).
  template <int kBits>
  static KVLM_TARGET __m256i widen(__m256i low, __m256i high) {
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i s = _mm256_madd_epi16(low, one);
    if constexpr (kBits == 4) return s;
    return _mm256_add_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(high, one), 4));
  }
  // Moves the int16 sums into the int32 sums.
  template <int kBits>
  static KVLM_TARGET Acc settle(const Acc& a) {
    const __m256i z = _mm256_setzero_si256();
    return {_mm256_add_epi32(a.lo, widen<kBits>(a.low[0], a.high[0])),
            _mm256_add_epi32(a.hi, widen<kBits>(a.low[1], a.high[1])), {z, z}, {z, z}};
  }
  static KVLM_TARGET Acc set1(int32_t v) {
    const __m256i z = _mm256_setzero_si256();
    return {_mm256_set1_epi32(v), _mm256_set1_epi32(v), {z, z}, {z, z}};
  }
  static KVLM_TARGET Acc zero() { return set1(0); }
  // Of settled sums.
  static KVLM_TARGET Acc add(Acc a, Acc b) {
    const __m256i z = _mm256_setzero_si256();
    return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi), {z, z}, {z, z}};
  }
  static KVLM_TARGET Vec to_float(const Acc& a) { return {_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)}; }

  // max(|x|, m) keeps m for a NaN, as int8_group_scale's std::max(m, |x|) does.
  static KVLM_TARGET float amax(const float* x, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int64_t k = 0; k < n; k += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  }
  static KVLM_TARGET void store_codes(Vec r, int8_t* q, bool interleave) {
    __m256i lo = _mm256_cvttps_epi32(r.lo), hi = _mm256_cvttps_epi32(r.hi);
    if (interleave) {
      const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
      lo = _mm256_permutevar8x32_epi32(lo, order);
      hi = _mm256_permutevar8x32_epi32(hi, order);
    }
    // Packs within 128-bit lanes give lo 0-3, hi 0-3, lo 4-7, hi 4-7; the permute restores the order.
    const __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q),
                     _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1)));
  }
};

}  // namespace
}  // namespace kvlm::cpu

// GCC's reassociation of integer adds regroups a tile's int16 sums into trees that hold more
// values at once than 16 registers take, and spilled four of them to the stack in every step of
// the 4-bit word loop; in the written order the loop keeps all of them in registers. (Float
// sums are never reassociated without -ffast-math.)
#pragma GCC push_options
#pragma GCC optimize("no-tree-reassoc")
#include "kvlm/backend/cpu/linear_int8_simd.inl"
#pragma GCC pop_options

namespace kvlm::cpu {

void linear_int8_avx2(const LinearRows& job, const Int8Acts& acts) { linear_int8_simd(job, acts); }
void quantize_int8_row_avx2(const float* x, int group_size, int bits, Int8Acts& a, int64_t t, int64_t g0,
                            int64_t g1) {
  quantize_int8_row_simd(x, group_size, bits, a, t, g0, g1);
}

void linear_rows_avx2(const LinearRows& job, const PackedX& x) { linear_rows_simd(job, x); }
int linear_token_group_avx2(int64_t T) { return token_group(T); }
float dot_avx2(const float* a, const float* b, int64_t n) { return dot_simd(a, b, n); }
void exp_scaled_avx2(const float* x, float* y, int64_t n, float scale, float shift) {
  exp_scaled_simd(x, y, n, scale, shift);
}
void silu_mul_avx2(const float* g, const float* u, float* o, int64_t n) { silu_mul_simd(g, u, o, n); }
void rms_norm_row_avx2(const float* x, const float* w, int64_t n, float eps, float* y) {
  rms_norm_row_simd(x, w, n, eps, y);
}
void divide_avx2(float* x, int64_t n, float d) { divide_simd(x, n, d); }
float max_value_avx2(const float* x, int64_t n) { return max_value_simd(x, n); }
float sum_lanes_avx2(const float* x, int64_t n) { return sum_lanes_simd(x, n); }
void add_scaled_avx2(float* x, const float* y, int64_t n, float scale) { add_scaled_simd(x, y, n, scale); }
void rope_rotate_avx2(float* v, const float* cs, int64_t half) { rope_rotate_simd(v, cs, half); }
int64_t argmax_avx2(const float* x, int64_t n) { return argmax_simd(x, n); }
double sum_f64_avx2(const float* x, int64_t n) { return sum_f64_simd(x, n); }
void subtract_log_sum_avx2(float* x, int64_t n, float max, double log_sum) {
  subtract_log_sum_simd(x, n, max, log_sum);
}
int64_t select_at_least_avx2(const float* x, int64_t n, float floor, IndexedValue* out) {
  return select_at_least_simd(x, n, floor, out);
}
double sum_at_least_avx2(const float* w, const float* keys, int64_t n, float floor) {
  return sum_at_least_simd(w, keys, n, floor);
}

}  // namespace kvlm::cpu
