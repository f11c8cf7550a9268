// The SIMD paths of dot.h, linear_rows.h and vector_math.h, written once over a 16-lane vector
// type. Included by kernels_avx2.cpp and kernels_avx512.cpp, which first define
//   KVLM_TARGET   the target attribute every function here carries, and
//   struct Vec    16 f32 lanes: zero, set1, load, store, widen_bf16, widen_f16, widen_bf16_pairs,
//                 interleave, codes8, nibbles, fma, add, sub, mul, div, neg, exp, fold, max,
//                 fold_max, nan_mask, equal_mask, at_least_mask (lane masks, lane k at bit k),
//   struct F64x8  8 f64 lanes: zero, set1, widen (8 floats), add, sub, store, narrow (to floats),
//   kPanelTokens, kPanelDecodePanels   the register tiles of panels (batches and prefill, decode),
//   kPanelFetchEveryTile               whether every token tile of a batch prefetches its panel's
//                                      stream (or only the first, which brings it from memory).
// Linear layers keep rows across lanes and reduce along the input (panels.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/cpu/linear_rows.h"
#include "kvlm/backend/cpu/panels.h"
#include "kvlm/base/error.h"
#include "kvlm/base/half.h"

#define KVLM_UNROLL _Pragma("GCC unroll 16")
// For the prefetch helpers: a call left out of line is a void function without side effects to
// the optimizer, which then deletes it with its prefetches.
#define KVLM_INLINE __attribute__((always_inline)) inline

namespace kvlm::cpu {
namespace {

// Zero-padded copy of the last partial block of a row: the padding lanes then add fma(0, 0, acc).
template <class Load>
KVLM_TARGET inline Vec padded_tail(int64_t n, Load load_value) {
  alignas(64) float buf[kDotLanes] = {};
  for (int64_t k = 0; k < n; ++k) buf[k] = load_value(k);
  return Vec::load(buf);
}

// Tokens per PackedX group for T tokens.
inline int token_group(int64_t T) { return T == 1 ? 1 : kPanelTokens; }

// Token blocks: a panel serves every token tile of a block before the next panel, so the weights
// come from memory once per block, and the block's inputs stay in the last-level cache: 2 MB rather
// than an L2-sized 384 KB prefilled the 1B shape (MLP width 8192, 12-token blocks) at 76-82
// instead of 56-68 tok/s.
constexpr int64_t kTokenBlockBytes = 2 * 1024 * 1024;

// Prefetch distance along a panel's stream. A scratch program of this layout reading 8-token
// batches from memory on 2 threads: none 257-280 GFLOP/s, 1 KB 226-243, 4 KB 300-325, 8 KB
// 303-327.
constexpr int64_t kPanelAheadBytes = 4096;

// How the kernels read one format's panels. A policy L gives
//   Panel                    where a panel starts (panel_at(p) in run_panel_range),
//   kInterleaved             whether load yields the rows out of order (store_panel_tile mends it),
//   kDecodePanels            how many panels one token reads side by side,
//   group_inputs(in)         inputs that share one Group (the whole input for dense weights),
//   group(panel, g)          what group g's inputs need (an MLX affine group's scales and biases),
//   load(group, j, a, b)     the panel's 32 rows at input j of the group: rows 0-15 in a, 16-31 in b
//                            (dense bf16: even rows in a, odd in b),
//   prefetch(panel, g, j)    fetches the stream kPanelAheadBytes past input j of group g.
// The values are exactly cpu::weight_row's: widened floats, or scale * code + bias with the product
// rounded before the add.

// Dense f32, bf16 and f16. bf16 splits one 64-byte line into its even and odd rows (one load and two
// ALU operations; two 32-byte halves, each widened, fed one token 45 GB/s where the split feeds 54),
// so `interleave` puts rows back in order; f16 and f32 load rows 0-15 and 16-31.
template <class T, int kLines, bool kSplit>
struct PanelDense {
  using Panel = const T*;
  struct Group {
    const T* at;
  };
  static constexpr bool kInterleaved = kSplit;
  static constexpr int kDecodePanels = kPanelDecodePanels;
  int64_t group_inputs(int64_t in) const { return in; }
  KVLM_TARGET Group group(Panel p, int64_t) const { return {p}; }
  KVLM_TARGET KVLM_INLINE void load(const Group& g, int64_t j, Vec& a, Vec& b) const {
    const T* at = g.at + j * kPanelRows;
    if constexpr (kSplit) Vec::widen_bf16_pairs(at, a, b);
    else if constexpr (sizeof(T) == 4) a = Vec::load(at), b = Vec::load(at + kDotLanes);
    else a = Vec::widen_f16(at), b = Vec::widen_f16(at + kDotLanes);
  }
  KVLM_INLINE void prefetch(Panel p, int64_t, int64_t j) const {
    const char* at = reinterpret_cast<const char*>(p + j * kPanelRows) + kPanelAheadBytes;
    KVLM_UNROLL for (int l = 0; l < kLines; ++l) __builtin_prefetch(at + 64 * l);
  }
};
using PanelF32 = PanelDense<float, 2, false>;
using PanelBF16 = PanelDense<uint16_t, 1, true>;
using PanelF16 = PanelDense<uint16_t, 1, false>;

// MLX affine panels (panels.h) of codes in kBits containers (4 or 8), dequantized in registers. A
// group's scales and biases take four vectors per panel, so one token reads half as many panels at
// once.
template <int kBits>
struct PanelAffine {
  using Panel = const uint8_t*;
  struct Group {
    Vec scale_a, scale_b, bias_a, bias_b;
    const uint8_t* codes;
  };
  static constexpr bool kInterleaved = false;
  static constexpr int kDecodePanels = kPanelDecodePanels > 1 ? kPanelDecodePanels / 2 : 1;
  static constexpr int64_t kInputBytes = kPanelRows * kBits / 8;  // codes of one input
  static constexpr int64_t kParamBytes = 2 * kPanelRows * int64_t(sizeof(float));
  int64_t group_size, group_bytes;

  int64_t group_inputs(int64_t) const { return group_size; }
  KVLM_TARGET Group group(Panel p, int64_t g) const {
    const uint8_t* at = p + g * group_bytes;
    const float* f = reinterpret_cast<const float*>(at);
    return {Vec::load(f), Vec::load(f + kDotLanes), Vec::load(f + kPanelRows), Vec::load(f + kPanelRows + kDotLanes),
            at + kParamBytes};
  }
  KVLM_TARGET KVLM_INLINE void load(const Group& g, int64_t j, Vec& a, Vec& b) const {
    const uint8_t* at = g.codes + j * kInputBytes;
    if constexpr (kBits == 8) a = Vec::codes8(at), b = Vec::codes8(at + kDotLanes);
    else Vec::nibbles(at, a, b);
    a = Vec::add(Vec::mul(g.scale_a, a), g.bias_a);
    b = Vec::add(Vec::mul(g.scale_b, b), g.bias_b);
  }
  // One prefetch per cache line of the stream: the group's parameters with its first input, each
  // line of codes when an input starts it.
  KVLM_INLINE void prefetch(Panel p, int64_t g, int64_t j) const {
    const char* group = reinterpret_cast<const char*>(p + g * group_bytes) + kPanelAheadBytes;
    if (j == 0)
      KVLM_UNROLL for (int64_t l = 0; l < kParamBytes; l += 64) __builtin_prefetch(group + l);
    const int64_t at = kParamBytes + j * kInputBytes;
    if (at % 64 < kInputBytes) __builtin_prefetch(group + at);
  }
};

// Outputs of NT tokens for NP panels at `panels`: each input adds two fmas per panel and token.
// x: element k of token u at x[k * G + u]. With `ahead`, each panel's stream is prefetched.
template <int NT, int NP, int G, class L>
KVLM_TARGET void panel_tile(const L& l, const typename L::Panel (&panels)[NP], int64_t in, const float* x,
                            bool ahead, Vec (&out)[NP][2][NT]) {
  // Local: the vector type may alias anything, so accumulating into `out` would store it back
  // after every input.
  Vec acc[NP][2][NT];
  KVLM_UNROLL for (int i = 0; i < NP; ++i)
    KVLM_UNROLL for (int u = 0; u < NT; ++u) acc[i][0][u] = acc[i][1][u] = Vec::zero();
  const int64_t span = l.group_inputs(in);
  for (int64_t k0 = 0, g = 0; k0 < in; k0 += span, ++g) {
    typename L::Group group[NP];
    KVLM_UNROLL for (int i = 0; i < NP; ++i) group[i] = l.group(panels[i], g);
    const float* xg = x + k0 * G;
    for (int64_t j = 0; j < span; ++j) {
      Vec a[NP], b[NP];
      KVLM_UNROLL for (int i = 0; i < NP; ++i) {
        if (ahead) l.prefetch(panels[i], g, j);
        l.load(group[i], j, a[i], b[i]);
      }
      KVLM_UNROLL for (int u = 0; u < NT; ++u) {
        Vec xv = Vec::set1(xg[j * G + u]);
        xv.in_register();
        KVLM_UNROLL for (int i = 0; i < NP; ++i) {
          acc[i][0][u] = Vec::fma(a[i], xv, acc[i][0][u]);
          acc[i][1][u] = Vec::fma(b[i], xv, acc[i][1][u]);
        }
      }
    }
  }
  KVLM_UNROLL for (int i = 0; i < NP; ++i)
    KVLM_UNROLL for (int u = 0; u < NT; ++u) out[i][0][u] = acc[i][0][u], out[i][1][u] = acc[i][1][u];
}

// Stores 16 outputs of token row y for weight rows row0 .. row0+15, those in the job's [r0, r0+R).
KVLM_TARGET inline void store_rows(Vec v, int64_t row0, const LinearRows& job, float* y) {
  const int64_t lo = std::max(row0, job.r0), hi = std::min(row0 + kDotLanes, job.r0 + job.R);
  if (lo >= hi) return;
  if (hi - lo == kDotLanes) return v.store(y + (lo - job.r0));
  alignas(64) float lanes[kDotLanes];
  v.store(lanes);
  std::copy(lanes + (lo - row0), lanes + (hi - row0), y + (lo - job.r0));
}

// Stores tokens t .. t+NT-1 of the tile for panels p .. p+NP-1 (a panel may start before r0 or end
// past r0 + R: only the job's rows are written).
template <int NT, int NP, class L>
KVLM_TARGET void store_panel_tile(const Vec (&acc)[NP][2][NT], int64_t p, const LinearRows& job, int64_t t) {
  KVLM_UNROLL for (int i = 0; i < NP; ++i)
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      Vec lo = acc[i][0][u], hi = acc[i][1][u];
      if constexpr (L::kInterleaved) Vec::interleave(acc[i][0][u], acc[i][1][u], lo, hi);
      float* y = job.y + (t + u) * job.ldy;
      store_rows(lo, (p + i) * kPanelRows, job, y);
      store_rows(hi, (p + i) * kPanelRows + kDotLanes, job, y);
    }
}

// Tokens t .. t+n-1 (n <= G, the first at position u0 of its group at xg) against panel p: tiles
// of NT tokens, then halving tiles. The first tile streams the panel from memory; the others find
// it in the caches, and prefetch it from there too where kPanelFetchEveryTile.
template <int NT, int G, class L>
KVLM_TARGET void panel_tokens(const L& l, typename L::Panel panel, int64_t p, const float* xg, int u0,
                              int64_t n, const LinearRows& job, int64_t t, bool ahead) {
  const typename L::Panel panels[1] = {panel};
  for (; n >= NT; n -= NT, u0 += NT, t += NT, ahead = ahead && kPanelFetchEveryTile) {
    Vec acc[1][2][NT];
    panel_tile<NT, 1, G>(l, panels, job.w->in_features, xg + u0, ahead, acc);
    store_panel_tile<NT, 1, L>(acc, p, job, t);
  }
  if constexpr (NT > 1)
    if (n > 0) panel_tokens<NT / 2, G>(l, panel, p, xg, u0, n, job, t, ahead);
}

// Panels p .. p+NP-1 (panel q at panel_at(q)) for one token, side by side: NP streams, 2 * NP
// accumulators to hide the fma latency.
template <int NP, class L, class PanelAt>
KVLM_TARGET void decode_panels(const L& l, const LinearRows& job, const float* x, int64_t p,
                               const PanelAt& panel_at) {
  typename L::Panel panels[NP];
  KVLM_UNROLL for (int i = 0; i < NP; ++i) panels[i] = panel_at(p + i);
  Vec acc[NP][2][1];
  panel_tile<1, NP, 1>(l, panels, job.w->in_features, x, true, acc);
  store_panel_tile<1, NP, L>(acc, p, job, 0);
}

// The job's panels p0 .. p1-1. One token reads L::kDecodePanels panels at a time; more tokens go
// in blocks whose inputs stay in the last-level cache, and each panel serves every tile of
// kPanelTokens tokens of a block before the next panel.
template <class L, class PanelAt>
KVLM_TARGET void run_panel_range(const L& l, const LinearRows& job, const PackedX& px, int64_t p0,
                                 int64_t p1, const PanelAt& panel_at) {
  if (job.T == 1) {
    int64_t p = p0;
    for (; p + L::kDecodePanels <= p1; p += L::kDecodePanels)
      decode_panels<L::kDecodePanels>(l, job, px.data.get(), p, panel_at);
    for (; p < p1; ++p) decode_panels<1>(l, job, px.data.get(), p, panel_at);
    return;
  }
  constexpr int G = kPanelTokens;
  check(px.tokens == G, "linear: inputs not packed for the panel kernel");
  const int64_t in = job.w->in_features;
  const int64_t block = std::max<int64_t>(G, kTokenBlockBytes / (in * 4) / G * G);
  for (int64_t t0 = 0; t0 < job.T; t0 += block) {
    const int64_t t1 = std::min(job.T, t0 + block);
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t t = t0; t < t1; t += G)
        panel_tokens<G, G>(l, panel_at(p), p, px.data.get() + t / G * px.group, 0,
                           std::min<int64_t>(G, t1 - t), job, t, t == t0 || kPanelFetchEveryTile);
  }
}

// The job's first and one-past-last panels.
inline std::pair<int64_t, int64_t> job_panels(const LinearRows& job) {
  return {job.r0 / kPanelRows, (job.r0 + job.R + kPanelRows - 1) / kPanelRows};
}

// Each of the job's panels made by `make(p, scratch)` into a per-thread scratch panel first (the
// same values in the same order: the same bits as a stored panel).
template <class L, class T, class Make>
KVLM_TARGET void run_scratch_panels(const L& l, const LinearRows& job, const PackedX& px, Make make) {
  const auto [p0, p1] = job_panels(job);
  thread_local std::vector<T> scratch;
  scratch.resize(size_t(job.w->in_features * kPanelRows));
  for (int64_t p = p0; p < p1; ++p) {
    make(p, scratch.data());
    run_panel_range(l, job, px, p, p + 1, [&](int64_t) { return static_cast<const T*>(scratch.data()); });
  }
}

// Dense rows r0 .. r0+R-1: from the weight's panels, or for a row-major weight from each panel
// packed per call.
template <class L>
KVLM_TARGET void run_dense(const LinearRows& job, const PackedX& px) {
  using T = std::remove_cv_t<std::remove_pointer_t<typename L::Panel>>;
  const ops::Weight& w = *job.w;
  const int64_t in = w.in_features;
  const T* base = static_cast<const T*>(w.weight.raw());
  const L l;
  if (w.panels) {
    const auto [p0, p1] = job_panels(job);
    return run_panel_range(l, job, px, p0, p1, [&](int64_t p) { return base + p * in * kPanelRows; });
  }
  run_scratch_panels<L, T>(l, job, px, [&](int64_t p, T* dst) { pack_panel(base, w.out_features, in, p, dst); });
}

// MLX affine rows from the weight's affine panels, whose codes sit in kBits containers.
template <int kBits>
KVLM_TARGET void run_affine(const LinearRows& job, const PackedX& px) {
  const ops::Weight& w = *job.w;
  const int G = w.quant->group_size;
  const PanelAffine<kBits> l{G, affine_group_bytes(G, w.quant->bits)};
  const auto* base = static_cast<const uint8_t*>(w.affine_panels.raw());
  const int64_t panel = affine_panel_bytes(w.in_features, G, w.quant->bits);
  const auto [p0, p1] = job_panels(job);
  run_panel_range(l, job, px, p0, p1, [&](int64_t p) { return base + p * panel; });
}

KVLM_TARGET void linear_rows_simd(const LinearRows& job, const PackedX& x) {
  const ops::Weight& w = *job.w;
  if (w.quant) {
    if (w.affine_panels.defined())
      return affine_container_bits(w.quant->bits) == 4 ? run_affine<4>(job, x) : run_affine<8>(job, x);
    return run_scratch_panels<PanelF32, float>(PanelF32{}, job, x,
                                               [&](int64_t p, float* dst) { dequantize_panel(w, p, dst); });
  }
  switch (w.weight.dtype()) {
    case DType::kBF16: return run_dense<PanelBF16>(job, x);
    case DType::kF16: return run_dense<PanelF16>(job, x);
    default: return run_dense<PanelF32>(job, x);
  }
}

KVLM_TARGET float dot_simd(const float* a, const float* b, int64_t n) {
  Vec acc = Vec::zero();
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) acc = Vec::fma(Vec::load(a + i), Vec::load(b + i), acc);
  if (i < n) {
    const float *ta = a + i, *tb = b + i;
    acc = Vec::fma(padded_tail(n - i, [ta](int64_t k) { return ta[k]; }),
                   padded_tail(n - i, [tb](int64_t k) { return tb[k]; }), acc);
  }
  return Vec::fold(acc);
}

KVLM_TARGET void exp_scaled_simd(const float* x, float* y, int64_t n, float scale, float shift) {
  const Vec m = Vec::set1(scale), s = Vec::set1(shift);
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) Vec::exp(Vec::sub(Vec::mul(Vec::load(x + i), m), s)).store(y + i);
  for (; i < n; ++i) y[i] = exp_portable(x[i] * scale - shift);
}

KVLM_TARGET void silu_mul_simd(const float* g, const float* u, float* o, int64_t n) {
  const Vec one = Vec::set1(1.0f);
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) {
    const Vec gv = Vec::load(g + i);
    Vec::mul(Vec::div(gv, Vec::add(one, Vec::exp(Vec::neg(gv)))), Vec::load(u + i)).store(o + i);
  }
  for (; i < n; ++i) o[i] = (g[i] / (1.0f + exp_portable(-g[i]))) * u[i];
}

KVLM_TARGET void rms_norm_row_simd(const float* x, const float* w, int64_t n, float eps, float* y) {
  const float inv = 1.0f / std::sqrt(dot_simd(x, x, n) / float(n) + eps);
  const Vec s = Vec::set1(inv);
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) Vec::mul(Vec::load(w + i), Vec::mul(Vec::load(x + i), s)).store(y + i);
  for (; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}

KVLM_TARGET void divide_simd(float* x, int64_t n, float d) {
  const Vec dv = Vec::set1(d);
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) Vec::div(Vec::load(x + i), dv).store(x + i);
  for (; i < n; ++i) x[i] /= d;
}

// Vec::max(v, m) keeps m where v is NaN, as std::max(m, v) does; m never holds a NaN.
KVLM_TARGET float max_value_simd(const float* x, int64_t n) {
  Vec m = Vec::set1(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) m = Vec::max(Vec::load(x + i), m);
  float best = Vec::fold_max(m);
  for (; i < n; ++i) best = std::max(best, x[i]);
  return best;
}

KVLM_TARGET float sum_lanes_simd(const float* x, int64_t n) {
  Vec acc = Vec::zero();
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) acc = Vec::add(acc, Vec::load(x + i));
  if (i < n) {
    const float* t = x + i;
    acc = Vec::add(acc, padded_tail(n - i, [t](int64_t k) { return t[k]; }));
  }
  return Vec::fold(acc);
}

KVLM_TARGET void add_scaled_simd(float* x, const float* y, int64_t n, float scale) {
  const Vec s = Vec::set1(scale);
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) Vec::add(Vec::load(x + i), Vec::mul(Vec::load(y + i), s)).store(x + i);
  for (; i < n; ++i) x[i] = x[i] + y[i] * scale;
}

KVLM_TARGET void rope_rotate_simd(float* v, const float* cs, int64_t half) {
  int64_t i = 0;
  for (; i + kDotLanes <= half; i += kDotLanes) {
    const Vec a = Vec::load(v + i), b = Vec::load(v + half + i);
    const Vec c = Vec::load(cs + i), s = Vec::load(cs + half + i);
    Vec::add(Vec::mul(a, c), Vec::mul(Vec::neg(b), s)).store(v + i);
    Vec::add(Vec::mul(b, c), Vec::mul(a, s)).store(v + half + i);
  }
  for (; i < half; ++i) rope_pair(v[i], v[half + i], cs[i], cs[half + i]);
}

// A pass for the maximum (and any NaN), then one for its first index: without a NaN the maximum
// is exact in any order.
KVLM_TARGET int64_t argmax_simd(const float* x, int64_t n) {
  Vec m = Vec::set1(-std::numeric_limits<float>::infinity());
  uint32_t nan = 0;
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) {
    const Vec v = Vec::load(x + i);
    nan |= Vec::nan_mask(v);
    m = Vec::max(m, v);
  }
  float best = Vec::fold_max(m);
  for (; i < n; ++i) {
    nan |= std::isnan(x[i]) ? 1u : 0u;
    best = std::max(best, x[i]);
  }
  if (nan || n == 0) return argmax_portable(x, n);
  const Vec b = Vec::set1(best);
  for (i = 0; i + kDotLanes <= n; i += kDotLanes)
    if (const uint32_t eq = Vec::equal_mask(Vec::load(x + i), b)) return i + __builtin_ctz(eq);
  while (x[i] != best) ++i;  // best is one of the tail's values
  return i;
}

// A selection over a vocabulary keeps few of its values: each 16 are compared at once, and only
// a vector with a selected lane is visited lane by lane, in index order.
template <class Visit>
KVLM_TARGET void for_each_at_least(const float* x, int64_t n, float floor, Visit visit) {
  const Vec f = Vec::set1(floor);
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes)
    for (uint32_t m = Vec::at_least_mask(Vec::load(x + i), f); m != 0; m &= m - 1) visit(i + __builtin_ctz(m));
  for (; i < n; ++i)
    if (x[i] >= floor) visit(i);
}

KVLM_TARGET int64_t select_at_least_simd(const float* x, int64_t n, float floor, IndexedValue* out) {
  int64_t k = 0;
  for_each_at_least(x, n, floor, [&](int64_t i) { out[k++] = {x[i], int32_t(i)}; });
  return k;
}

KVLM_TARGET double sum_at_least_simd(const float* w, const float* keys, int64_t n, float floor) {
  double sum = 0.0;
  for_each_at_least(keys, n, floor, [&](int64_t i) { sum += double(w[i]); });
  return sum;
}

KVLM_TARGET double sum_f64_simd(const float* x, int64_t n) {
  F64x8 acc = F64x8::zero();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = F64x8::add(acc, F64x8::widen(x + i));
  alignas(64) double lane[8];
  acc.store(lane);
  for (int64_t k = 0; i < n; ++i, ++k) lane[k] += double(x[i]);
  double sum = 0.0;
  for (double l : lane) sum += l;
  return sum;
}

KVLM_TARGET void subtract_log_sum_simd(float* x, int64_t n, float max, double log_sum) {
  const Vec m = Vec::set1(max);
  const F64x8 l = F64x8::set1(log_sum);
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) {
    alignas(64) float d[kDotLanes];
    Vec::sub(Vec::load(x + i), m).store(d);
    F64x8::sub(F64x8::widen(d), l).narrow(x + i);
    F64x8::sub(F64x8::widen(d + 8), l).narrow(x + i + 8);
  }
  for (; i < n; ++i) x[i] = float(double(x[i] - max) - log_sum);
}

}  // namespace
}  // namespace kvlm::cpu
