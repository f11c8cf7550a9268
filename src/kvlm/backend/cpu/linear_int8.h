#pragma once
// The optional int8 path of linear layers against MLX affine weights with 4- or 8-bit codes
// (ops::MatmulPath::kInt8). The activations of each token row are quantized per weight group
// (once per linear call) and the dot products run on integers:
//
//   amax_g = max |x_i| over group g,  d_g = amax_g / 127,
//   xq_i   = round-to-nearest-even(x_i * (127 / amax_g))   (all xq_i = 0 and d_g = 0 if amax_g = 0),
//   sx_g   = x_first + x_next + ... in index order (float adds),
//   m      = 2^(bits-1), the middle code,  b'_g = b_g + s_g * m  (float mul, then add).
//
// The codes of a row are cut into chunks of 16 lanes: a lane is 8 consecutive codes for 4 bits
// (chunks of 128) and 4 for 8 bits (chunks of 64), so each lane lies in one group g(lane) and is
// exactly what one int32 lane of vpdpbusd sums. For token t and row r, 16 float lanes F start as
// the bias term's lanes in dot.h's order, F[k] = fma(b'_g, sx_g, F[k]) for g = k, k+16, ... from
// +0 (zero-padded to a multiple of 16 groups); then for lane k of every chunk c in turn
//
//   P      = sum over the lane's codes of (code_i - m) * xq_i        (int32, exact)
//   F[k]   = fma(s_g * d_g, float(P), F[k])
//
// with s_g = d_g = 0 for lanes past the row's end, and finally y = fold_lanes(F).
//
// Integer lane sums are exact in any instruction order, and the float steps are elementwise or in
// the fixed orders above, so the portable, AVX2 and AVX-512 paths are bit-identical, and a token's
// outputs depend only on its own row (never on T, tiling or threads). The float work is one fma
// per 16 lanes of a chunk, no horizontal sum per group. Centring the codes on m moves the constant
// part of each weight into the bias term, which uses the exact sums sx: the activation rounding
// then multiplies |code - m| <= m instead of code <= 2m, half the error. Other code widths
// (2, 3, 5, 6 bits) and dense weights take the exact path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvlm/backend/cpu/linear_rows.h"

namespace kvlm::cpu {

// A token's quantized row is padded with zeros to whole blocks of this many codes.
inline constexpr int64_t kInt8Block = 128;

// Codes per chunk of the formula: 16 lanes of 8 codes (4 bits) or of 4 codes (8 bits).
inline int64_t int8_chunk(int bits) { return bits == 4 ? 128 : 64; }

// Position of activation i in a token's quantized row. 8-bit: i. 4-bit: within each block of 128,
// the even positions first (64 bytes) and then the odd ones, so that the low nibbles of 64 packed
// bytes (codes 0, 2, ..., 126) and the high nibbles (codes 1, 3, ..., 127) meet their activations
// as contiguous bytes, with no shuffle per weight.
inline int64_t int8_act_index(int64_t i, int bits) {
  if (bits != 4) return i;
  const int64_t p = i % kInt8Block;
  return i - p + (p % 2) * (kInt8Block / 2) + p / 2;
}

// Rounds v (|v| <= 127.5) to the nearest integer, ties to even: adding and subtracting 1.5 * 2^23
// leaves no fraction bits, and the add rounds to nearest even. Plain float adds, so it costs no
// library call and vectorizes.
inline int8_t round_to_int8(float v) {
  constexpr float kMagic = 12582912.0f;
  return int8_t(int32_t((v + kMagic) - kMagic));
}

// d_g of one group and the factor 127/amax_g that quantizes it (both 0 for an all-zero group).
struct Int8Scale {
  float d = 0.0f, inv = 0.0f;
};

inline Int8Scale int8_group_scale(const float* x, int64_t n) {
  // Four running maxima (a maximum does not depend on the order; one chain waited on every max).
  float m[4] = {};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int j = 0; j < 4; ++j) m[j] = std::max(m[j], std::fabs(x[k + j]));
  for (; k < n; ++k) m[0] = std::max(m[0], std::fabs(x[k]));
  const float amax = std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
  if (amax == 0.0f) return {};
  return {amax / 127.0f, 127.0f / amax};
}

// One group's d_g and sx_g.
struct Int8Group {
  float d = 0.0f, sum = 0.0f;
};

// Quantizes the n values of one group by the rule above: store(k, xq_k) receives every code
// (nothing when the group is all zero, whose codes are 0).
template <class Store>
Int8Group quantize_int8_group(const float* x, int64_t n, Store store) {
  Int8Group g;
  for (int64_t k = 0; k < n; ++k) g.sum += x[k];
  const Int8Scale sc = int8_group_scale(x, n);
  g.d = sc.d;
  if (sc.d == 0.0f) return g;
  for (int64_t k = 0; k < n; ++k) store(k, round_to_int8(x[k] * sc.inv));
  return g;
}

// The quantized activations of T token rows for one weight's group size and code width.
struct Int8Acts {
  std::vector<int8_t> q;      // [T, stride]: token t's xq_i at q[t * stride + int8_act_index(i)]
  std::vector<float> d;       // [T, lanes]: d_g of each lane's group, 0 past the row's end
  std::vector<int32_t> base;  // [T, lanes]: -m * (the lane's sum of xq_i): started from it, the
                              // SIMD kernels' sums of code_i * xq_i are the sums of (code_i - m) * xq_i
  std::vector<float> sx;      // [T, groups_pad], zero past `groups`
  int64_t stride = 0, lanes = 0, groups = 0, groups_pad = 0;  // lanes: 16 per chunk;
                                                              // groups_pad: a multiple of 16
};

Int8Acts quantize_int8_acts(const float* x, int64_t T, int64_t in, int group_size, int bits);

// b'_g = b_g + s_g * m of the formula, for the `groups` scales s and biases b of one row (in place).
void int8_center_biases(const float* s, float* b, int64_t groups, int bits);

// The group of every lane of one chunk relative to the chunk's first group (c * chunk / G):
// lane k's codes start at k * chunk / 16.
void int8_lane_groups(int group_size, int bits, int32_t (&out)[16]);

// True when w takes the int8 path: it asks for it and stores 4- or 8-bit affine codes.
bool uses_int8(const ops::Weight& w);

// Outputs r0 .. r0+R-1 for the T tokens of `acts` (job.x is not read).
void linear_int8_portable(const LinearRows& job, const Int8Acts& acts);
void linear_int8_avx2(const LinearRows& job, const Int8Acts& acts);
void linear_int8_avx512(const LinearRows& job, const Int8Acts& acts);

using LinearInt8Fn = void (*)(const LinearRows& job, const Int8Acts& acts);
LinearInt8Fn linear_int8_kernel(Isa isa);

// The kernel ops::linear runs for one call: the exact kernel, or for a weight that uses_int8 the
// int8 kernel with x quantized here, once, before the output rows are split among threads.
// `same_input` are kernels already built for the same x (linear_many's other weights): int8
// activations quantized for the same group size and code width are shared, not recomputed.
class LinearKernel {
 public:
  LinearKernel(Isa isa, const ops::Weight& w, const float* x, int64_t T,
               std::span<const LinearKernel> same_input = {});
  void operator()(const LinearRows& job) const;

 private:
  LinearRowsFn exact_ = nullptr;
  LinearInt8Fn int8_ = nullptr;
  int group_size_ = 0, bits_ = 0;
  std::shared_ptr<const Int8Acts> acts_;
};

}  // namespace kvlm::cpu
