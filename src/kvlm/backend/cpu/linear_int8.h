#pragma once
// The optional int8 path of linear layers against MLX affine weights with 4- or 8-bit codes
// (ops::MatmulPath::kInt8). The activations of each token row are quantized per weight group
// (once per linear call) and every group's dot product is an exact integer:
//
//   amax_g = max |x_i| over the group,  d_g = amax_g / 127,
//   xq_i   = round-to-nearest-even(x_i * (127 / amax_g))   (all xq_i = 0 and d_g = 0 if amax_g = 0),
//   sx_g   = x_first + x_next + ... in index order (float adds),
//   m      = 2^(bits-1), the middle code,
//   idot_g = sum of (code_i - m) * xq_i over the group, in int32 (exact: no order matters),
//   t_g    = fma(s_g * d_g, float(idot_g), (b_g + s_g * m) * sx_g),
//   y      = the groups' t_g summed in dot.h's 16-lane order (lane k takes groups k, k+16, ...
//            starting from +0, then fold_lanes).
//
// Centring the codes on m moves the constant part of each weight into the exact bias term, so the
// activation rounding multiplies |code - m| <= m instead of code <= 2m: half the error.
//
// Every float operation above is elementwise or in that fixed order, so the portable, AVX2 and
// AVX-512 paths are bit-identical, and a token's outputs depend only on its own row (never on T,
// tiling or threads). Other code widths (2, 3, 5, 6 bits) and dense weights take the exact path.
#include <cstdint>
#include <vector>

#include "kvlm/backend/cpu/linear_rows.h"

namespace kvlm::cpu {

// Codes per chunk of a token's quantized row: rows are padded with zeros to whole chunks.
inline constexpr int64_t kInt8Chunk = 128;

// Position of activation i in a token's quantized row. 8-bit: i. 4-bit: within each chunk of 128,
// the even positions first (64 bytes) and then the odd ones, so that the low nibbles of 64 packed
// bytes (codes 0, 2, ..., 126) and the high nibbles (codes 1, 3, ..., 127) meet their activations
// as contiguous bytes, with no shuffle per weight.
inline int64_t int8_act_index(int64_t i, int bits) {
  if (bits != 4) return i;
  const int64_t p = i % kInt8Chunk;
  return i - p + (p % 2) * (kInt8Chunk / 2) + p / 2;
}

// The quantized activations of T token rows for one weight's group size and code width.
struct Int8Acts {
  std::vector<int8_t> q;     // [T, stride]: token t's xq_i at q[t * stride + int8_act_index(i)]
  std::vector<float> d, sx;  // [T, groups_pad]: d_g and sx_g, zero beyond `groups`
  std::vector<int32_t> qsum; // [T, groups_pad]: the sum of the group's xq_i (SIMD kernels sum
                             // code_i * xq_i and subtract m * qsum), zero beyond `groups`
  int64_t stride = 0, groups = 0, groups_pad = 0;  // groups_pad: groups rounded up to 16
};

Int8Acts quantize_int8_acts(const float* x, int64_t T, int64_t in, int group_size, int bits);

// b_g + s_g * m of the formula, for the `groups` scales s and biases b of one row (in place).
void int8_center_biases(const float* s, float* b, int64_t groups, int bits);

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
class LinearKernel {
 public:
  LinearKernel(Isa isa, const ops::Weight& w, const float* x, int64_t T);
  void operator()(const LinearRows& job) const;

 private:
  LinearRowsFn exact_ = nullptr;
  LinearInt8Fn int8_ = nullptr;
  Int8Acts acts_;
};

}  // namespace kvlm::cpu
