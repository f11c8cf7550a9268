// The block kernels of attention (AttentionRowOps::score_block and accumulate_block,
// attention_kernels.h), written once over a 16-lane type. Included by attention_avx2.cpp and
// attention_avx512.cpp, which first define
//   KVLM_TARGET  the target attribute every function here carries, and
//   struct Lanes 16 f32 lanes: zero, load, store, set1, fma, add, mul, and
//                reduce16(acc, out): out[r] = acc[r]'s lanes folded in halves, r < 16 (dot.h's
//                fold, done for 16 accumulators at once by a transpose-and-add tree), and
//   kValueTile   how many 16-lane accumulators the value loop keeps in registers.
// Both kernels need head_dim % 16 == 0 (attention_row_ops falls back to portable otherwise).
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

// N accumulators (16-float slices t0 .. t0+N-1 of the [group][d] output) held in registers
// while the block's rows are added in order: a[i] = a[i] + w * v[i], the product rounded first.
template <int N>
KVLM_TARGET void accumulate_tile(float* acc, int slices_per_head, int t0, const float* w,
                                 size_t stride, const float* const* v, int rows) {
  Lanes a[N];
  const float* wt[N];
  int at[N];
  KVLM_UNROLL for (int n = 0; n < N; ++n) {
    a[n] = Lanes::load(acc + size_t(t0 + n) * 16);
    wt[n] = w + size_t((t0 + n) / slices_per_head) * stride;
    at[n] = (t0 + n) % slices_per_head * 16;
  }
  for (int r = 0; r < rows; ++r) {
    KVLM_UNROLL for (int n = 0; n < N; ++n)
      a[n] = Lanes::add(a[n], Lanes::mul(Lanes::set1(wt[n][r]), Lanes::load(v[r] + at[n])));
  }
  KVLM_UNROLL for (int n = 0; n < N; ++n) a[n].store(acc + size_t(t0 + n) * 16);
}

// The last `count` (< kValueTile) slices, with a tile of exactly that size.
template <int N>
KVLM_TARGET void accumulate_rest(int count, float* acc, int slices_per_head, int t0,
                                 const float* w, size_t stride, const float* const* v, int rows) {
  if constexpr (N > 0) {
    if (count == N) return accumulate_tile<N>(acc, slices_per_head, t0, w, stride, v, rows);
    accumulate_rest<N - 1>(count, acc, slices_per_head, t0, w, stride, v, rows);
  }
}

KVLM_TARGET void accumulate_block_simd(float* acc, int group, int d, const float* w,
                                       size_t stride, const float* const* v, int rows) {
  const int per_head = d / 16, total = group * per_head;
  int t = 0;
  for (; t + kValueTile <= total; t += kValueTile)
    accumulate_tile<kValueTile>(acc, per_head, t, w, stride, v, rows);
  accumulate_rest<kValueTile - 1>(total - t, acc, per_head, t, w, stride, v, rows);
}

}  // namespace
}  // namespace kvlm::cpu
