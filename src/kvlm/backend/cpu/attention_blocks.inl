// The block kernels of attention (AttentionRowOps::score_block and accumulate,
// attention_kernels.h), written once over a 16-lane type. Included by attention_avx2.cpp and
// attention_avx512.cpp, which first define
//   KVLM_TARGET  the target attribute every function here carries, and
//   struct Lanes 16 f32 lanes: zero, load, store, set1, fma, add, mul, and
//                transpose16(k, i, out): out[c*16 + r] = k[r][i + c] for r, c < 16,
//   kScoreRows   how many query rows the scores keep in registers, and
//   kValueTile   how many 16-lane accumulators the value loop keeps in registers.
// The value loop needs head_dim % 16 == 0 (attention_row_ops falls back to portable otherwise).
#include <algorithm>

#define KVLM_UNROLL _Pragma("GCC unroll 16")

namespace kvlm::cpu {
namespace {

// kt[i*kKeyBlock + r] = k[r][i]: 16 elements of the 16 keys at a time by Lanes::transpose16, the
// elements past the last whole 16 one by one.
KVLM_TARGET void keys_across_simd(const float* const* k, int d, float* kt) {
  int i = 0;
  for (; i + 16 <= d; i += 16) Lanes::transpose16(k, i, kt + size_t(i) * kKeyBlock);
  for (; i < d; ++i)
    for (int r = 0; r < kKeyBlock; ++r) kt[size_t(i) * kKeyBlock + size_t(r)] = k[r][i];
}

// H query rows against the block: each row's 16 scores are one accumulator, its chains running
// side by side so that they hide the fma latency; each key element is loaded once for all H.
template <int H>
KVLM_TARGET void score_rows(const float* q, int d, const float* kt, float scale, float* s, size_t stride) {
  Lanes acc[H];
  KVLM_UNROLL for (int h = 0; h < H; ++h) acc[h] = Lanes::zero();
  for (int i = 0; i < d; ++i) {
    const Lanes k = Lanes::load(kt + size_t(i) * kKeyBlock);
    KVLM_UNROLL for (int h = 0; h < H; ++h) acc[h] = Lanes::fma(Lanes::set1(q[size_t(h) * size_t(d) + size_t(i)]), k, acc[h]);
  }
  KVLM_UNROLL for (int h = 0; h < H; ++h) Lanes::mul(acc[h], Lanes::set1(scale)).store(s + size_t(h) * stride);
}

// score_rows for n <= kScoreRows rows.
template <int H = kScoreRows>
KVLM_TARGET void score_rows_n(int n, const float* q, int d, const float* kt, float scale, float* s, size_t stride) {
  if constexpr (H > 0) {
    if (n == H) return score_rows<H>(q, d, kt, scale, s, stride);
    score_rows_n<H - 1>(n, q, d, kt, scale, s, stride);
  }
}

// The group's rows in tiles of at most kScoreRows, as even as they come (7 rows with room for 6:
// 4 and 3, not 6 and a lone row whose one chain waits on every fma).
KVLM_TARGET void score_block_simd(const float* q, int group, int d, const float* kt, float scale, float* s,
                                  size_t stride) {
  for (int g = 0, tiles = (group + kScoreRows - 1) / kScoreRows; tiles > 0; --tiles) {
    const int n = (group - g + tiles - 1) / tiles;
    score_rows_n(n, q + size_t(g) * size_t(d), d, kt, scale, s + size_t(g) * stride, stride);
    g += n;
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
