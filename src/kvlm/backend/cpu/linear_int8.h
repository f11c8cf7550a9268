#pragma once
// The optional int8 path of linear layers against MLX affine weights with 4- or 8-bit codes
// (ops::MatmulPath::kInt8). The activations of each token row are quantized per weight group
// (once per linear call) and the dot products run on integers:
//
//   amax_g = max |x_i| over group g,  d_g = amax_g / 127,
//   xq_i   = round-to-nearest-even(x_i * (127 / amax_g))   (all xq_i = 0 and d_g = 0 if amax_g = 0),
//   sx_g   = the group's float sum in 16 lanes: lane k adds x_k, x_16+k, x_32+k, ... of the
//            group in turn, and the lanes fold as dot.h's fold_lanes (the order of a vector sum),
//   m      = 2^(bits-1), the middle code,  b'_g = b_g + s_g * m  (float mul, then add),
//   P_g    = sum over the group of (code_i - m) * xq_i   (int32, exact),
//
// and for token t and row r, y starts at +0 and for g = 0, 1, ... in turn
//
//   y = fma(b'_g, sx_g, y),  then  y = fma(s_g * d_g, float(P_g), y).
//
// Integer sums are exact in any instruction order and the float steps follow this one chain, so
// the portable, AVX2 and AVX-512 paths are bit-identical, and a token's outputs depend only on its
// own row (never on T, tiling or threads). Centring the codes on m moves the constant part of each
// weight into the bias term, which uses the exact sums sx: the activation rounding then multiplies
// |code - m| <= m instead of code <= 2m, half the error. Other code widths (2, 3, 5, 6 bits) and
// dense weights take the exact path.
//
// The weight is copied once (ops::int8_weight, at model load) into tiles of 16 rows, so that one
// vector register holds one 4-byte word of each of 16 rows and its lanes are 16 output rows: the
// lane sums of vpdpbusd are then whole groups of one row, and the float steps run once per group
// for 16 rows, with no horizontal sums. Tile k holds rows 16k .. 16k+15 (rows past the weight's
// end are zero), group by group:
//
//   [word 0 of rows 0..15][word 1 of rows 0..15] ... (u32 each, the checkpoint's packed words)
//   [the 16 rows' scales][the 16 rows' biases]       (in the checkpoint's dtype)
//
// one sequential stream per tile. A word holds 8 codes (4 bits) or 4 (8 bits) of consecutive
// inputs; a token's quantized row stores each word's activations as vpdpbusd meets them
// (int8_act_index).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvlm/backend/cpu/linear_rows.h"

namespace kvlm::cpu {

// Rows per tile of the int8 layout.
inline constexpr int64_t kInt8TileRows = 16;

// Position of activation i in a token's quantized row. 8-bit: i. 4-bit: within each word of 8
// codes, the activations of the 4 low nibbles (codes 0, 2, 4, 6) and then those of the 4 high
// nibbles, so that each half is one 4-byte broadcast against the word's masked nibbles.
inline int64_t int8_act_index(int64_t i, int bits) {
  if (bits != 4) return i;
  return i - i % 8 + (i % 2) * 4 + (i % 8) / 2;
}

// Bytes of one group of one tile (words, then scales and biases), and of one tile.
inline int64_t int8_group_bytes(int group_size, int bits, DType params) {
  return group_size * bits / 8 * kInt8TileRows + 2 * kInt8TileRows * int64_t(dtype_size(params));
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

inline Int8Scale int8_scale_of(float amax) {
  if (amax == 0.0f) return {};
  return {amax / 127.0f, 127.0f / amax};
}

inline Int8Scale int8_group_scale(const float* x, int64_t n) {
  // Four running maxima (a maximum does not depend on the order; one chain waited on every max).
  float m[4] = {};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int j = 0; j < 4; ++j) m[j] = std::max(m[j], std::fabs(x[k + j]));
  for (; k < n; ++k) m[0] = std::max(m[0], std::fabs(x[k]));
  return int8_scale_of(std::max(std::max(m[0], m[1]), std::max(m[2], m[3])));
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

// One group's activation scalars of 8 consecutive tokens, side by side: the layout Int8Acts keeps
// them in, which an ISA's hand-scheduled int8 tile reads as it is.
struct Int8TokenGroup {
  float d[8], sx[8];
  int32_t base[8];
};

// The quantized activations of T token rows for one weight's group size and code width. The codes
// and the scalars share one allocation: a decode step quantizes activations about a hundred
// times, and the larger arrays went through the allocator's slow path. Uninitialised when made:
// the quantizer writes every code and scalar of every group.
struct Int8Acts {
  Int8Acts(int64_t T, int64_t width, int group_size, int bits);

  // Token t's scalars of group g: its d_g, sx_g and base (-m * the group's sum of xq_i: started
  // from it, the SIMD kernels' sums of code_i * xq_i are the P_g of the formula).
  float& d(int64_t t, int64_t g) { return scalars_of(t, g).d[t % 8]; }
  float& sx(int64_t t, int64_t g) { return scalars_of(t, g).sx[t % 8]; }
  int32_t& base(int64_t t, int64_t g) { return scalars_of(t, g).base[t % 8]; }
  float d(int64_t t, int64_t g) const { return scalars_of(t, g).d[t % 8]; }
  float sx(int64_t t, int64_t g) const { return scalars_of(t, g).sx[t % 8]; }
  int32_t base(int64_t t, int64_t g) const { return scalars_of(t, g).base[t % 8]; }
  // The scalars of tokens t .. t+7 (t a multiple of 8), group after group.
  const Int8TokenGroup* token_tile(int64_t t) const { return scalars.data() + t / 8 * groups; }

  // An all-zero group g of token t: zero codes, d and base (its sx is 0 as well).
  void clear_group(int64_t t, int64_t g) {
    const int64_t G = in / groups;
    std::fill_n(q.data() + t * in + g * G, G, int8_t(0));
    d(t, g) = 0.0f;
    base(t, g) = 0;
  }

  std::span<int8_t> q;                  // [T, in]: token t's xq_i at q[t * in + int8_act_index(i)]
  std::span<Int8TokenGroup> scalars;    // [ceil(T / 8), groups]
  int64_t in = 0, groups = 0;
  int bits = 0;  // of the weights they are for: 4-bit rows keep int8_act_index's order

 private:
  Int8TokenGroup& scalars_of(int64_t t, int64_t g) { return scalars[size_t(t / 8 * groups + g)]; }
  const Int8TokenGroup& scalars_of(int64_t t, int64_t g) const { return scalars[size_t(t / 8 * groups + g)]; }
  std::unique_ptr<std::byte[]> storage_;
};

// Quantizes groups g0 .. g1-1 of token t of `a` from x, that token's `in` values (groups are
// independent: the threads that compute parts of a row may each quantize theirs).
void quantize_int8_row_portable(const float* x, int group_size, int bits, Int8Acts& a, int64_t t, int64_t g0, int64_t g1);
void quantize_int8_row_avx2(const float* x, int group_size, int bits, Int8Acts& a, int64_t t, int64_t g0, int64_t g1);
void quantize_int8_row_avx512(const float* x, int group_size, int bits, Int8Acts& a, int64_t t, int64_t g0, int64_t g1);
using QuantizeInt8RowFn = void (*)(const float* x, int group_size, int bits, Int8Acts& a, int64_t t, int64_t g0,
                                   int64_t g1);

// The int8 tiles of an MLX affine weight with 4- or 8-bit codes (u8, tile after tile).
Tensor int8_tiles(const ops::Weight& w);

// True when w takes the int8 path: it asks for it and holds int8 tiles (4- or 8-bit codes).
bool uses_int8(const ops::Weight& w);

// Outputs r0 .. r0+R-1 for the T tokens of `acts` (job.x is not read).
void linear_int8_portable(const LinearRows& job, const Int8Acts& acts);
void linear_int8_avx2(const LinearRows& job, const Int8Acts& acts);
void linear_int8_avx512(const LinearRows& job, const Int8Acts& acts);

using LinearInt8Fn = void (*)(const LinearRows& job, const Int8Acts& acts);

// The int8 path's kernels for one ISA (the AVX-512 ones need VNNI; without it the AVX2 ones
// compute the same bits).
struct Int8Kernels {
  LinearInt8Fn linear;
  QuantizeInt8RowFn quantize;
};
Int8Kernels int8_kernels(Isa isa);

// The T token rows of x [T, in] quantized for one weight's group size and code width, the rows in
// parallel.
Int8Acts quantize_int8_acts(Isa isa, const float* x, int64_t T, int64_t in, int group_size, int bits);

// The int8 activations of an op's result quantized by the op itself, for the linear layer `next`
// that reads the result (ops::QuantizedInput): each thread quantizes the whole groups it has just
// written, while they are in its cache, and the layer needs no quantization round of its own.
// Empty (and write() not to be called) unless `next` takes the int8 path with `width` inputs and,
// when threads write the row in parts of `part` columns, each part spans whole groups.
class Int8ActsWriter {
 public:
  Int8ActsWriter(const ops::Weight* next, int64_t T, int64_t width, int64_t part = 0);
  explicit operator bool() const { return acts_ != nullptr; }
  int group_size() const { return group_size_; }
  // Quantizes columns [c0, c1) of token t, whole groups, from `row` (all of the token's values).
  void write(const float* row, int64_t t, int64_t c0, int64_t c1) const {
    quantize_(row, group_size_, acts_->bits, *acts_, t, c0 / group_size_, c1 / group_size_);
  }
  // Hands the activations (null when empty) to *out once every group of every token is written.
  void finish(std::shared_ptr<const Int8Acts>* out) {
    if (out) *out = std::move(acts_);
  }

 private:
  std::shared_ptr<Int8Acts> acts_;
  int group_size_ = 1;
  QuantizeInt8RowFn quantize_ = nullptr;
};

// The kernel ops::linear runs for one call: the exact kernel with x packed for its tiles, or for a
// weight that uses_int8 the int8 kernel with x quantized, either done here, once, before the output
// rows are split among threads. `same_input` are kernels already built for the same x
// (linear_many's other weights): packed x, and int8 activations quantized for the same group size
// and code width, are shared, not recomputed.
class LinearKernel {
 public:
  // On the int8 path the kernel quantizes x, unless a kernel of same_input already did for the
  // same group size and bits, or `quantized` holds x's activations for them.
  LinearKernel(Isa isa, const ops::Weight& w, const float* x, int64_t T,
               std::span<const LinearKernel> same_input = {},
               const std::shared_ptr<const Int8Acts>& quantized = nullptr);
  void operator()(const LinearRows& job) const;

 private:
  LinearRowsKernel exact_ = {};
  std::shared_ptr<const PackedX> packed_;
  LinearInt8Fn int8_ = nullptr;
  int group_size_ = 0, bits_ = 0;
  std::shared_ptr<const Int8Acts> acts_;
};

}  // namespace kvlm::cpu
