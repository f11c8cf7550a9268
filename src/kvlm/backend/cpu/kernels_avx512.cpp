// AVX-512 (F, BW, VL, DQ) paths: one 16-lane accumulator is one zmm register.
// GCC 12 reports false "uninitialized __Y" warnings inside its own AVX-512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kvlm/backend/cpu/linear_int8.h"
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
  // int8_tile's batch tile (2 tiles x 8 tokens: batched decode and prefill) with registers
  // assigned by hand, each group's epilogue included. Compiled from C++, the word loop ran at
  // 84-86% of the vpdpbusd peak, but a third of the tile's time went between word loops (about
  // 380 instructions per group: the accumulators' setup, pointers, spills). Zen 4, the two
  // alternating in one process: ops::linear on 2 threads, 512 tokens 570-598 -> 581-617 GOP/s,
  // 8 tokens from memory +2-6%; LinearInt8/2/*/128 (one thread) 285-288 -> 326-331 GOP/s. The
  // epilogue's two fmas and a multiply per 16 vpdpbusd (FMA pipes) now bound it.
  // Registers: tile i's accumulator of token u in zmm(8i+u); per word the two tiles' codes in
  // zmm16-19 (zmm20-23 for the second word of a step); the activations' broadcasts in zmm24-27;
  // the nibble mask in zmm28; a group's scales and biases in zmm29-30. Token u's activations are
  // read at r8 + u*r11 (r9 = r8 + 3*r11 and r10 = r8 + 6*r11 reach the multiples an address
  // cannot scale); rax and rcx hold the prefetch distance for tile 0 and tile 1.
  static constexpr bool kHandTile = true;
  struct alignas(64) HandTile {
    float F[2][8][16];     // zero in; out: per tile and token, the 16 rows' outputs
    const uint8_t *x0, *x3, *x6;  // tokens 0, 3 and 6's activations of group 0
    int64_t in;                   // bytes between tokens
    int64_t code_bytes, skip;    // codes of one tile's group; bytes from there to the next group
    int64_t ahead;               // prefetch distance (0: none)
    const uint8_t* tile_end;     // tile 0's end: prefetches that pass it serve the next tiles
  };
  // The tiles' scales and biases as f32, kParams: 0 f32, 1 bf16, 2 f16.
  template <int kBits, bool kFetch, int kParams>
  static KVLM_TARGET void tile_2x8(HandTile& io, const uint8_t* p, int64_t tile_bytes, const Int8TokenGroup* tokens,
                                   const Int8TokenGroup* tokens_end) {
#define KVLM_X0 "(%%r8)"
#define KVLM_X1 "(%%r8,%%r11)"
#define KVLM_X2 "(%%r8,%%r11,2)"
#define KVLM_X3 "(%%r9)"
#define KVLM_X4 "(%%r8,%%r11,4)"
#define KVLM_X5 "(%%r9,%%r11,2)"
#define KVLM_X6 "(%%r10)"
#define KVLM_X7 "(%%r10,%%r11)"
// Into L2 (prefetcht1): on the Zen 4 host, prefetcht0 left the batches from memory waiting (0.5B
// q8 at 8 sequences: linears 16.3-19.7 -> 12.1-14.7 ms a step, 345-397 -> 455-498 tok/s; 1B q8
// 130-159 -> 183-218; q4 within noise; 16 KB ahead instead of 8 no better).
#define KVLM_FETCH(off) "prefetcht1 " #off "(%[p],%%rax)\n\tprefetcht1 " #off "(%[p],%%rcx)\n\t"
#define KVLM_Q4_CODES(off, A, B, C, D)                                                           \
  "vmovdqu64 " #off "(%[p]), %%zmm" #A "\n\tvmovdqu64 " #off "(%[p],%[tb]), %%zmm" #B "\n\t"  \
  "vpsrlw $4, %%zmm" #A ", %%zmm" #C "\n\tvpsrlw $4, %%zmm" #B ", %%zmm" #D "\n\t"             \
  "vpandd %%zmm28, %%zmm" #A ", %%zmm" #A "\n\tvpandd %%zmm28, %%zmm" #B ", %%zmm" #B "\n\t"    \
  "vpandd %%zmm28, %%zmm" #C ", %%zmm" #C "\n\tvpandd %%zmm28, %%zmm" #D ", %%zmm" #D "\n\t"
// Token u (tile 1's accumulator zmm r = zmm(8+u), activations at X): low nibbles A (tile 0) and
// B (tile 1) against the word's first 4 activations, high nibbles C and D against the next 4.
#define KVLM_Q4_TOKEN(u, r, X, off, A, B, C, D, T0, T1)                                              \
  "vpbroadcastd " #off X ", %%zmm" #T0 "\n\tvpbroadcastd 4+" #off X ", %%zmm" #T1 "\n\t"            \
  "vpdpbusd %%zmm" #T0 ", %%zmm" #A ", %%zmm" #u "\n\tvpdpbusd %%zmm" #T0 ", %%zmm" #B ", %%zmm" #r "\n\t" \
  "vpdpbusd %%zmm" #T1 ", %%zmm" #C ", %%zmm" #u "\n\tvpdpbusd %%zmm" #T1 ", %%zmm" #D ", %%zmm" #r "\n\t"
#define KVLM_Q4_WORD(code_off, x_off, A, B, C, D)                                                                  \
  KVLM_Q4_CODES(code_off, A, B, C, D)                                                                             \
  KVLM_Q4_TOKEN(0, 8, KVLM_X0, x_off, A, B, C, D, 24, 25) KVLM_Q4_TOKEN(1, 9, KVLM_X1, x_off, A, B, C, D, 26, 27)   \
  KVLM_Q4_TOKEN(2, 10, KVLM_X2, x_off, A, B, C, D, 24, 25) KVLM_Q4_TOKEN(3, 11, KVLM_X3, x_off, A, B, C, D, 26, 27) \
  KVLM_Q4_TOKEN(4, 12, KVLM_X4, x_off, A, B, C, D, 24, 25) KVLM_Q4_TOKEN(5, 13, KVLM_X5, x_off, A, B, C, D, 26, 27) \
  KVLM_Q4_TOKEN(6, 14, KVLM_X6, x_off, A, B, C, D, 24, 25) KVLM_Q4_TOKEN(7, 15, KVLM_X7, x_off, A, B, C, D, 26, 27)
#define KVLM_Q8_TOKEN(u, r, X, off, A, B, T)                                     \
  "vpbroadcastd " #off X ", %%zmm" #T "\n\t"                                       \
  "vpdpbusd %%zmm" #T ", %%zmm" #A ", %%zmm" #u "\n\tvpdpbusd %%zmm" #T ", %%zmm" #B ", %%zmm" #r "\n\t"
#define KVLM_Q8_WORD(code_off, x_off, A, B)                                                             \
  "vmovdqu64 " #code_off "(%[p]), %%zmm" #A "\n\tvmovdqu64 " #code_off "(%[p],%[tb]), %%zmm" #B "\n\t" \
  KVLM_Q8_TOKEN(0, 8, KVLM_X0, x_off, A, B, 24) KVLM_Q8_TOKEN(1, 9, KVLM_X1, x_off, A, B, 25)         \
  KVLM_Q8_TOKEN(2, 10, KVLM_X2, x_off, A, B, 26) KVLM_Q8_TOKEN(3, 11, KVLM_X3, x_off, A, B, 27)       \
  KVLM_Q8_TOKEN(4, 12, KVLM_X4, x_off, A, B, 24) KVLM_Q8_TOKEN(5, 13, KVLM_X5, x_off, A, B, 25)       \
  KVLM_Q8_TOKEN(6, 14, KVLM_X6, x_off, A, B, 26) KVLM_Q8_TOKEN(7, 15, KVLM_X7, x_off, A, B, 27)
// A group's start: the prefetch distance (past tile 0's end, one tile further) and token u's
// base in both tiles' accumulators.
#define KVLM_BASE(u, r) "vpbroadcastd 64+4*" #u "(%[tok]), %%zmm" #u "\n\tvmovdqa64 %%zmm" #u ", %%zmm" #r "\n\t"
#define KVLM_GROUP_START                                                                 \
  "mov 1072(%[io]), %%rax\n\tlea (%[p],%%rax), %%rcx\n\tcmp 1080(%[io]), %%rcx\n\t"    \
  "jb 3f\n\tadd %[tb], %%rax\n3:\n\tlea (%%rax,%[tb]), %%rcx\n\t"                      \
  KVLM_BASE(0, 8) KVLM_BASE(1, 9) KVLM_BASE(2, 10) KVLM_BASE(3, 11)                      \
  KVLM_BASE(4, 12) KVLM_BASE(5, 13) KVLM_BASE(6, 14) KVLM_BASE(7, 15)
// A tile's scales s (zmm29) and biases + s * 2^(bits-1) (zmm30), after its codes at `at`.
#define KVLM_PARAMS_F32(at, b_off) "vmovups " at ", %%zmm29\n\tvmovups " #b_off at ", %%zmm30\n\t"
#define KVLM_PARAMS_BF16(at, b_off)                                                                \
  "vpmovzxwd " at ", %%zmm29\n\tvpslld $16, %%zmm29, %%zmm29\n\t"                                   \
  "vpmovzxwd " #b_off at ", %%zmm30\n\tvpslld $16, %%zmm30, %%zmm30\n\t"
#define KVLM_PARAMS_F16(at, b_off) "vcvtph2ps " at ", %%zmm29\n\tvcvtph2ps " #b_off at ", %%zmm30\n\t"
#define KVLM_BIAS "vmulps %[mid]%{1to16%}, %%zmm29, %%zmm31\n\tvaddps %%zmm31, %%zmm30, %%zmm30\n\t"
// F[i][u] = fma(b, sx, F); F = fma(s * d, float(P), F): int8_tile's epilogue, in its order.
#define KVLM_EPI(i, u, acc, F, T)                                                      \
  "vmovaps 64*(8*" #i "+" #u ")(%[io]), %%zmm" #F "\n\t"                              \
  "vfmadd231ps 32+4*" #u "(%[tok])%{1to16%}, %%zmm30, %%zmm" #F "\n\t"                 \
  "vmulps 4*" #u "(%[tok])%{1to16%}, %%zmm29, %%zmm" #T "\n\t"                         \
  "vcvtdq2ps %%zmm" #acc ", %%zmm" #acc "\n\t"                                         \
  "vfmadd231ps %%zmm" #T ", %%zmm" #acc ", %%zmm" #F "\n\t"                            \
  "vmovaps %%zmm" #F ", 64*(8*" #i "+" #u ")(%[io])\n\t"
#define KVLM_EPI_TILE(i, a0, a1, a2, a3, a4, a5, a6, a7)                                                      \
  KVLM_EPI(i, 0, a0, 16, 24) KVLM_EPI(i, 1, a1, 17, 25) KVLM_EPI(i, 2, a2, 18, 26) KVLM_EPI(i, 3, a3, 19, 27) \
  KVLM_EPI(i, 4, a4, 20, 24) KVLM_EPI(i, 5, a5, 21, 25) KVLM_EPI(i, 6, a6, 22, 26) KVLM_EPI(i, 7, a7, 23, 27)
#define KVLM_TILE_ASM(words, x_step, fetch_params, params, b_off)                                             \
  asm volatile(                                                                                               \
      "vpbroadcastd %[mask], %%zmm28\n\t"                                                                     \
      "mov 1024(%[io]), %%r8\n\tmov 1032(%[io]), %%r9\n\tmov 1040(%[io]), %%r10\n\tmov 1048(%[io]), %%r11\n\t" \
      "1:\n\t" KVLM_GROUP_START                                                                               \
      "mov 1056(%[io]), %%rdx\n\tadd %[p], %%rdx\n\t"                                                         \
      "2:\n\t" words                                                                                          \
      "add $" #x_step ", %%r8\n\tadd $" #x_step ", %%r9\n\tadd $" #x_step ", %%r10\n\t"                      \
      "add $128, %[p]\n\tcmp %%rdx, %[p]\n\tjb 2b\n\t" fetch_params                                          \
      params("(%[p])", b_off) KVLM_BIAS KVLM_EPI_TILE(0, 0, 1, 2, 3, 4, 5, 6, 7)                             \
      params("(%[p],%[tb])", b_off) KVLM_BIAS KVLM_EPI_TILE(1, 8, 9, 10, 11, 12, 13, 14, 15)                 \
      "add 1064(%[io]), %[p]\n\tadd $96, %[tok]\n\tcmp %[end], %[tok]\n\tjb 1b\n\t"                          \
      : [p] "+r"(p), [tok] "+r"(tokens)                                                                       \
      : [io] "r"(&io), [tb] "r"(tile_bytes), [end] "r"(tokens_end), [mask] "m"(kNibbleMask),                  \
        [mid] "m"(kMid<kBits>)                                                                                \
      : "rax", "rcx", "rdx", "r8", "r9", "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",        \
        "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",       \
        "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",   \
        "xmm28", "xmm29", "xmm30", "xmm31", "cc", "memory")
#define KVLM_TILE_PARAMS(words, x_step, fetch_params)                                             \
  if constexpr (kParams == 0) KVLM_TILE_ASM(words, x_step, fetch_params, KVLM_PARAMS_F32, 64);    \
  else if constexpr (kParams == 1) KVLM_TILE_ASM(words, x_step, fetch_params, KVLM_PARAMS_BF16, 32); \
  else KVLM_TILE_ASM(words, x_step, fetch_params, KVLM_PARAMS_F16, 32);
    static_assert(sizeof(Int8TokenGroup) == 96 && offsetof(Int8TokenGroup, sx) == 32 &&
                  offsetof(Int8TokenGroup, base) == 64);
    static_assert(offsetof(HandTile, x0) == 1024 && offsetof(HandTile, in) == 1048 &&
                  offsetof(HandTile, code_bytes) == 1056 && offsetof(HandTile, skip) == 1064 &&
                  offsetof(HandTile, ahead) == 1072 && offsetof(HandTile, tile_end) == 1080);
    if constexpr (kBits == 4 && kFetch) {
      KVLM_TILE_PARAMS(KVLM_FETCH(0) KVLM_Q4_WORD(0, 0, 16, 17, 18, 19) KVLM_FETCH(64) KVLM_Q4_WORD(64, 8, 20, 21, 22, 23),
                       16, KVLM_FETCH(0))
    } else if constexpr (kBits == 4) {
      KVLM_TILE_PARAMS(KVLM_Q4_WORD(0, 0, 16, 17, 18, 19) KVLM_Q4_WORD(64, 8, 20, 21, 22, 23), 16, "")
    } else if constexpr (kFetch) {
      KVLM_TILE_PARAMS(KVLM_FETCH(0) KVLM_Q8_WORD(0, 0, 16, 17) KVLM_FETCH(64) KVLM_Q8_WORD(64, 4, 20, 21), 8,
                       KVLM_FETCH(0))
    } else {
      KVLM_TILE_PARAMS(KVLM_Q8_WORD(0, 0, 16, 17) KVLM_Q8_WORD(64, 4, 20, 21), 8, "")
    }
#undef KVLM_TILE_PARAMS
#undef KVLM_TILE_ASM
#undef KVLM_EPI_TILE
#undef KVLM_EPI
#undef KVLM_BIAS
#undef KVLM_PARAMS_F16
#undef KVLM_PARAMS_BF16
#undef KVLM_PARAMS_F32
#undef KVLM_GROUP_START
#undef KVLM_BASE
#undef KVLM_Q8_WORD
#undef KVLM_Q8_TOKEN
#undef KVLM_Q4_WORD
#undef KVLM_Q4_TOKEN
#undef KVLM_Q4_CODES
#undef KVLM_FETCH
#undef KVLM_X0
#undef KVLM_X1
#undef KVLM_X2
#undef KVLM_X3
#undef KVLM_X4
#undef KVLM_X5
#undef KVLM_X6
#undef KVLM_X7
  }
  static constexpr int32_t kNibbleMask = 0x0F0F0F0F;
  template <int kBits>
  static constexpr float kMid = float(1 << (kBits - 1));
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
float max_value_avx512(const float* x, int64_t n) { return max_value_simd(x, n); }
float sum_lanes_avx512(const float* x, int64_t n) { return sum_lanes_simd(x, n); }
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
