// AVX-512 (F, BW, VL, DQ) paths: one 16-lane accumulator is one zmm register.
// GCC 12 reports false "uninitialized __Y" warnings inside its own AVX-512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kvlm/backend/cpu/vector_math.h"

#define KVLM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

namespace kvlm::cpu {
namespace {

struct Vec {
  __m512 v;
  // Makes the value live in a register (kernels_simd.inl's tile says why).
  void in_register() { asm("" : "+v"(v)); }

  static KVLM_TARGET Vec zero() { return {_mm512_setzero_ps()}; }
  static KVLM_TARGET Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static KVLM_TARGET Vec widen_bf16(const uint16_t* p) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(h, 16))};
  }
  static KVLM_TARGET Vec widen_f16(const uint16_t* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  // 32 bf16 at p as f32: even = elements 0, 2, .., 30, odd = 1, 3, .., 31 (one load, two ALU ops).
  static KVLM_TARGET void widen_bf16_pairs(const uint16_t* p, Vec& even, Vec& odd) {
    const __m512i w = _mm512_loadu_si512(p);
    even = {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
    odd = {_mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int(0xFFFF0000u))))};
  }
  // The inverse order: lo = even0, odd0, .., even7, odd7; hi = even8, odd8, .., even15, odd15.
  static KVLM_TARGET void interleave(Vec even, Vec odd, Vec& lo, Vec& hi) {
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    lo = {_mm512_permutex2var_ps(even.v, first, odd.v)};
    hi = {_mm512_permutex2var_ps(even.v, second, odd.v)};
  }
  // 16 bytes at p as f32 lanes.
  static KVLM_TARGET Vec codes8(const uint8_t* p) {
    return {_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
  }
  // 16 bytes at p as two vectors of 4-bit codes: lo = their low nibbles, hi = their high nibbles.
  static KVLM_TARGET void nibbles(const uint8_t* p, Vec& lo, Vec& hi) {
    const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = {_mm512_cvtepi32_ps(_mm512_and_si512(w, _mm512_set1_epi32(15)))};
    hi = {_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 4))};
  }
  static KVLM_TARGET Vec fma(Vec a, Vec b, Vec acc) { return {_mm512_fmadd_ps(a.v, b.v, acc.v)}; }
  static KVLM_TARGET Vec set1(float x) { return {_mm512_set1_ps(x)}; }
  KVLM_TARGET void store(float* p) const { _mm512_storeu_ps(p, v); }
  static KVLM_TARGET Vec add(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
  static KVLM_TARGET Vec sub(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
  static KVLM_TARGET Vec mul(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
  static KVLM_TARGET Vec div(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
  static KVLM_TARGET Vec neg(Vec a) { return {_mm512_xor_ps(a.v, _mm512_set1_ps(-0.0f))}; }
  // exp_portable's operations, lane by lane.
  static KVLM_TARGET Vec exp(Vec x) {
    using namespace exp_constants;
    const __m512 xc = _mm512_max_ps(_mm512_min_ps(x.v, _mm512_set1_ps(kHi)), _mm512_set1_ps(kLo));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), xc);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kP[0]);
    for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[i]));
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 out = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    out = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x.v, _mm512_set1_ps(kHi), _CMP_GT_OQ), out,
                               _mm512_set1_ps(__builtin_inff()));
    out = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x.v, _mm512_set1_ps(kLo), _CMP_LT_OQ), out,
                               _mm512_setzero_ps());
    return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(x.v, x.v, _CMP_UNORD_Q), out, x.v)};
  }
  // Lanes fold in halves: k + k+8, k + k+4, k + k+2, k + k+1.
  static KVLM_TARGET float fold(Vec a) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a.v), _mm512_extractf32x8_ps(a.v, 1));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
  }
  static KVLM_TARGET Vec max(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
  static KVLM_TARGET float fold_max(Vec a) { return _mm512_reduce_max_ps(a.v); }
  static KVLM_TARGET uint32_t nan_mask(Vec a) { return _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q); }
  static KVLM_TARGET uint32_t equal_mask(Vec a, Vec b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_EQ_OQ); }
  static KVLM_TARGET uint32_t at_least_mask(Vec a, Vec b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_GE_OQ); }
};

struct F64x8 {
  __m512d v;
  static KVLM_TARGET F64x8 zero() { return {_mm512_setzero_pd()}; }
  static KVLM_TARGET F64x8 set1(double x) { return {_mm512_set1_pd(x)}; }
  static KVLM_TARGET F64x8 widen(const float* p) { return {_mm512_cvtps_pd(_mm256_loadu_ps(p))}; }
  static KVLM_TARGET F64x8 add(F64x8 a, F64x8 b) { return {_mm512_add_pd(a.v, b.v)}; }
  static KVLM_TARGET F64x8 sub(F64x8 a, F64x8 b) { return {_mm512_sub_pd(a.v, b.v)}; }
  KVLM_TARGET void store(double* p) const { _mm512_storeu_pd(p, v); }
  KVLM_TARGET void narrow(float* p) const { _mm256_storeu_ps(p, _mm512_cvtpd_ps(v)); }
};

// Panels (panels.h): 8 tokens x the 32 rows of a panel = 16 accumulators, each 64-byte line
// of bf16 weights feeding 16 fmas; one token reads 4 panels side by side (8 accumulators, 4
// streams).
constexpr int kPanelTokens = 8, kPanelDecodePanels = 4;
constexpr bool kPanelFetchEveryTile = false;  // 8-token tiles: a line per 16 fmas

}  // namespace
}  // namespace kvlm::cpu

#include "kvlm/backend/cpu/kernels_simd.inl"

// The int8 kernels also need AVX-512 VNNI (vpdpbusd); int8_kernels checks for it.
#undef KVLM_TARGET
#define KVLM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))

namespace kvlm::cpu {
namespace {

// vpdpbusd multiplies unsigned codes by signed activations, 4 bytes into each int32 lane: one
// zmm register is the 16 rows of a tile, each lane one row's word of codes.
struct I8 {
  using Acc = __m512i;
  struct W4 {
    __m512i lo, hi;  // each row's codes 0, 2, 4, 6 and 1, 3, 5, 7 of the word
  };
  using W8 = __m512i;
  // 8 tokens: 8 integer and 8 float accumulators.
  static constexpr int kTileTokens = 8;
  // Tiles whose products share each broadcast of the activations (int8_tile).
  static constexpr int kTilesAtOnce = 2;
  // Below 4 tokens the accumulator's chain of vpdpbusd (latency 4-5) would bound the products.
  static constexpr int kSplitChainsBelow = 4;
  template <int kBits>
  static constexpr int64_t kSettleWords = 0;  // vpdpbusd sums in int32 lanes: nothing to settle
  template <int kBits>
  static KVLM_TARGET Acc settle(Acc a) { return a; }

  static KVLM_TARGET W4 load4(const uint8_t* p) {
    const __m512i w = _mm512_loadu_si512(p), mask = _mm512_set1_epi8(0x0F);
    return {_mm512_and_si512(w, mask), _mm512_and_si512(_mm512_srli_epi16(w, 4), mask)};
  }
  static KVLM_TARGET W8 load8(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static KVLM_TARGET Acc dot(Acc acc, __m512i codes, const int32_t* x) {
    return _mm512_dpbusd_epi32(acc, codes, _mm512_set1_epi32(*x));
  }
  static KVLM_TARGET Acc dot4_lo(Acc acc, const W4& w, const int32_t* x) { return dot(acc, w.lo, x); }
  static KVLM_TARGET Acc dot4_hi(Acc acc, const W4& w, const int32_t* x) { return dot(acc, w.hi, x); }
  static KVLM_TARGET Acc dot8(Acc acc, W8 w, const int32_t* x) { return dot(acc, w, x); }
  static KVLM_TARGET Acc set1(int32_t v) { return _mm512_set1_epi32(v); }
  static KVLM_TARGET Acc zero() { return _mm512_setzero_si512(); }
  static KVLM_TARGET Acc add(Acc a, Acc b) { return _mm512_add_epi32(a, b); }
  static KVLM_TARGET Vec to_float(Acc a) { return {_mm512_cvtepi32_ps(a)}; }

  // max(|x|, m) keeps m for a NaN, as int8_group_scale's std::max(m, |x|) does.
  static KVLM_TARGET float amax(const float* x, int64_t n) {
    __m512 m = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; k += 16) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + k)), m);
    return _mm512_reduce_max_ps(m);
  }
  static KVLM_TARGET void store_codes(Vec r, int8_t* q, bool interleave) {
    __m512i v = _mm512_cvttps_epi32(r.v);
    if (interleave)
      v = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15), v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(v));
  }
};

}  // namespace
}  // namespace kvlm::cpu

#include "kvlm/backend/cpu/linear_int8_simd.inl"

namespace kvlm::cpu {

void linear_int8_avx512(const LinearRows& job, const Int8Acts& acts) { linear_int8_simd(job, acts); }
void quantize_int8_row_avx512(const float* x, int group_size, int bits, Int8Acts& a, int64_t t, int64_t g0,
                              int64_t g1) {
  quantize_int8_row_simd(x, group_size, bits, a, t, g0, g1);
}

void linear_rows_avx512(const LinearRows& job, const PackedX& x) { linear_rows_simd(job, x); }
int linear_token_group_avx512(int64_t T) { return token_group(T); }
float dot_avx512(const float* a, const float* b, int64_t n) { return dot_simd(a, b, n); }
void exp_scaled_avx512(const float* x, float* y, int64_t n, float scale, float shift) {
  exp_scaled_simd(x, y, n, scale, shift);
}
void silu_mul_avx512(const float* g, const float* u, float* o, int64_t n) { silu_mul_simd(g, u, o, n); }
void rms_norm_row_avx512(const float* x, const float* w, int64_t n, float eps, float* y) {
  rms_norm_row_simd(x, w, n, eps, y);
}
void divide_avx512(float* x, int64_t n, float d) { divide_simd(x, n, d); }
void add_scaled_avx512(float* x, const float* y, int64_t n, float scale) { add_scaled_simd(x, y, n, scale); }
void rope_rotate_avx512(float* v, const float* cs, int64_t half) { rope_rotate_simd(v, cs, half); }
int64_t argmax_avx512(const float* x, int64_t n) { return argmax_simd(x, n); }
double sum_f64_avx512(const float* x, int64_t n) { return sum_f64_simd(x, n); }
void subtract_log_sum_avx512(float* x, int64_t n, float max, double log_sum) {
  subtract_log_sum_simd(x, n, max, log_sum);
}
int64_t select_at_least_avx512(const float* x, int64_t n, float floor, IndexedValue* out) {
  return select_at_least_simd(x, n, floor, out);
}
double sum_at_least_avx512(const float* w, const float* keys, int64_t n, float floor) {
  return sum_at_least_simd(w, keys, n, floor);
}

}  // namespace kvlm::cpu
