// The block kernels of attention (AttentionRowOps::score_block and accumulate,
// attention_kernels.h), written once over a 16-lane type. Included by attention_avx2.cpp and
// attention_avx512.cpp, which first define
//   KVLM_TARGET  the target attribute every function here carries, and
//   struct Lanes 16 f32 lanes: zero, load, store, set1, fma, add, mul, and
//                reduce16(acc, out): out[r] = acc[r]'s lanes folded in halves, r < 16 (dot.h's
//                fold, done for 16 accumulators at once by a transpose-and-add tree), and
//   kValueTile   how many 16-lane accumulators the value loop keeps in registers.
// All of them need head_dim % 16 == 0 (attention_row_ops falls back to portable otherwise).
#include <algorithm>

#define KVLM_UNROLL _Pragma("GCC unroll 16")

namespace kvlm::cpu {
namespace {

// Each of the kKeyBlock scores is one 16-lane fma accumulator over the head dim (cpu::dot's
// order); the 16 accumulators of a head stay in registers and are folded together.
KVLM_TARGET void score_block_simd(const float* q, int group, int d, const float* const* k, int,
                                  float scale, float* s, size_t stride) {
  for (int g = 0; g < group; ++g) {
    const float* qg = q + size_t(g) * size_t(d);
    Lanes acc[kKeyBlock];
    KVLM_UNROLL for (int r = 0; r < kKeyBlock; ++r) acc[r] = Lanes::zero();
    for (int i = 0; i < d; i += 16) {
      const Lanes qi = Lanes::load(qg + i);
      KVLM_UNROLL for (int r = 0; r < kKeyBlock; ++r) acc[r] = Lanes::fma(qi, Lanes::load(k[r] + i), acc[r]);
    }
    alignas(64) float dots[kKeyBlock];
    Lanes::reduce16(acc, dots);
    Lanes::mul(Lanes::load(dots), Lanes::set1(scale)).store(s + size_t(g) * stride);
  }
}

// Heads g0 .. g0+H-1 by 16-float slices s0 .. s0+S-1 of the [group][d] output, H*S accumulators
// held in registers while the block's rows are added in order, a = fma(w, v, a) with head g's
// weight for row r at w[g*stride + r]. Each row loads its S slices once.
template <int H, int S>
KVLM_TARGET void accumulate_tile(float* acc, int d, int g0, int s0, const float* w, size_t stride,
                                 const float* const* v, int rows) {
  Lanes a[H][S];
  KVLM_UNROLL for (int h = 0; h < H; ++h)
    KVLM_UNROLL for (int s = 0; s < S; ++s) a[h][s] = Lanes::load(acc + size_t(g0 + h) * size_t(d) + size_t(s0 + s) * 16);
  for (int r = 0; r < rows; ++r) {
    Lanes vs[S];
    KVLM_UNROLL for (int s = 0; s < S; ++s) vs[s] = Lanes::load(v[r] + (s0 + s) * 16);
    KVLM_UNROLL for (int h = 0; h < H; ++h)
      KVLM_UNROLL for (int s = 0; s < S; ++s)
        a[h][s] = Lanes::fma(Lanes::set1(w[size_t(g0 + h) * stride + size_t(r)]), vs[s], a[h][s]);
  }
  KVLM_UNROLL for (int h = 0; h < H; ++h)
    KVLM_UNROLL for (int s = 0; s < S; ++s) a[h][s].store(acc + size_t(g0 + h) * size_t(d) + size_t(s0 + s) * 16);
}

// All heads for slices s0 .. s0+S-1: tiles of kValueTile / S heads, the last one smaller.
template <int S, int H = kValueTile / S>
KVLM_TARGET void accumulate_slices(int heads, float* acc, int d, int g0, int s0, const float* w,
                                   size_t stride, const float* const* v, int rows) {
  if constexpr (H > 0) {
    for (; heads >= H; heads -= H, g0 += H) accumulate_tile<H, S>(acc, d, g0, s0, w, stride, v, rows);
    if (heads > 0) accumulate_slices<S, H - 1>(heads, acc, d, g0, s0, w, stride, v, rows);
  }
}

KVLM_TARGET void accumulate_simd(float* acc, int group, int d, const float* w, size_t stride,
                                 const float* const* v, int rows) {
  constexpr int kSlices = kValueTile >= 4 ? 4 : kValueTile;  // slices per pass
  const int slices = d / 16;
  for (int s0 = 0; s0 < slices; s0 += kSlices) {
    switch (std::min(kSlices, slices - s0)) {
      case 1: accumulate_slices<1>(group, acc, d, 0, s0, w, stride, v, rows); break;
      case 2: accumulate_slices<2>(group, acc, d, 0, s0, w, stride, v, rows); break;
      case 3: accumulate_slices<3>(group, acc, d, 0, s0, w, stride, v, rows); break;
      default: accumulate_slices<kSlices>(group, acc, d, 0, s0, w, stride, v, rows); break;
    }
  }
}

}  // namespace
}  // namespace kvlm::cpu
