// The SIMD paths of dot.h, linear_rows.h and vector_math.h, written once over a 16-lane vector
// type. Included by kernels_avx2.cpp and kernels_avx512.cpp, which first define
//   KVLM_TARGET   the target attribute every function here carries, and
//   struct Vec    16 f32 lanes: zero, set1, iota16, load, store, widen_bf16, widen_f16,
//                 widen_bf16_pairs, interleave, lut4, codes8, codes_i32, affine, fma, add, sub, mul,
//                 div, neg, exp, fold,
//   kTileTokens, kTileRows, kDecodeRows   the register tiles of MLX affine rows (batches, decode)
//   kPrefillTokens, kPrefillRows          and of their prefill,
//   kPanelTokens, kPanelDecodePanels      and of dense panels (batches and prefill, decode).
// Dense weights keep rows across lanes and reduce along the input (panels.h). MLX affine rows run
// one 16-lane accumulator per output: fma in lane order over blocks of 16, a zero-padded last
// block, then Vec::fold, which is exactly dot_portable's order.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/cpu/linear_rows.h"
#include "kvlm/backend/cpu/panels.h"
#include "kvlm/base/error.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/affine.h"

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

// The rows a tile prefetches while it computes: NR rows further on, read at the tile's offset.
template <class Row, int NR>
struct RowsAhead {
  Row rows[NR];
  KVLM_INLINE void prefetch(int64_t i) const {
    KVLM_UNROLL for (int j = 0; j < NR; ++j) rows[j].prefetch(i);
  }
};

// Row-major f32 rows: the affine prefill's dequantized copy of a block of weight rows.
// row(r).load(i) yields weights i .. i+15 of row r (relative to the job's r0).
struct F32Rows {
  static constexpr bool kTables = false;
  const float* base;
  int64_t in;
  struct Row {
    const float* at;
    KVLM_TARGET Vec load(int64_t i) const { return Vec::load(at + i); }
    KVLM_INLINE void prefetch(int64_t i) const { __builtin_prefetch(at + i); }
  };
  Row row(int64_t r) const { return {base + r * in}; }
  template <int NR>
  RowsAhead<Row, NR> ahead(int64_t r) const {
    RowsAhead<Row, NR> a;
    KVLM_UNROLL for (int j = 0; j < NR; ++j) a.rows[j] = row(r + 2 * NR + j);
    return a;
  }
  KVLM_TARGET Vec tail(int64_t r, int64_t i, int64_t n) const {
    const float* p = base + r * in + i;
    return padded_tail(n, [p](int64_t k) { return p[k]; });
  }
};

// MLX affine rows, dequantized in registers: scale * float(code) + bias, the multiply and the add
// rounded separately as in affine_dequantize_row. kBits 8 unpacks with a vector widening, 0 means
// any width but 4 and 8, unpacked by scalar code. Groups (32/64/128) are whole 16-blocks.
// 4-bit rows compute each group's 16 possible values once (table) and look the codes up with
// permutes (lookup): the same values, with no conversion or arithmetic per weight.
template <int kBits>
struct AffineRows {
  static constexpr bool kTables = kBits == 4;
  const uint32_t* packed;
  int64_t words;                  // packed words per row
  const float *scales, *biases;   // widened, [rows, groups]
  int64_t groups, group_size;
  int bits;

  KVLM_TARGET Vec codes(int64_t r, int64_t i) const {
    const uint32_t* row = packed + r * words;
    if constexpr (kBits == 8) return Vec::codes8(reinterpret_cast<const uint8_t*>(row) + i);
    alignas(64) int32_t c[kDotLanes];
    for (int64_t k = 0; k < kDotLanes; ++k) c[k] = int32_t(affine_code(row, i + k, bits));
    return Vec::codes_i32(c);
  }
  KVLM_INLINE void prefetch(int64_t r, int64_t i) const {
    __builtin_prefetch(reinterpret_cast<const uint8_t*>(packed + r * words) + i * bits / 8);
  }
  KVLM_TARGET Vec load(int64_t r, int64_t i) const {
    const int64_t g = r * groups + i / group_size;
    return Vec::affine(codes(r, i), scales[g], biases[g]);
  }
  struct Row {
    const AffineRows* rows;
    int64_t r;
    KVLM_TARGET Vec load(int64_t i) const { return rows->load(r, i); }
    KVLM_INLINE void prefetch(int64_t i) const { rows->prefetch(r, i); }
  };
  Row row(int64_t r) const { return {this, r}; }
  template <int NR>
  RowsAhead<Row, NR> ahead(int64_t r) const {
    RowsAhead<Row, NR> a;
    KVLM_UNROLL for (int j = 0; j < NR; ++j) a.rows[j] = row(r + 2 * NR + j);
    return a;
  }
  KVLM_TARGET Vec table(int64_t r, int64_t i) const {
    const int64_t g = r * groups + i / group_size;
    return Vec::affine(Vec::iota16(), scales[g], biases[g]);
  }
  KVLM_TARGET Vec lookup(Vec table, int64_t r, int64_t i) const {
    return Vec::lut4(table, reinterpret_cast<const uint8_t*>(packed + r * words) + i / 2);
  }
  KVLM_TARGET Vec tail(int64_t r, int64_t i, int64_t n) const {
    const uint32_t* row = packed + r * words;
    const int64_t g = r * groups + i / group_size;
    return padded_tail(n, [&](int64_t k) {
      return scales[g] * float(affine_code(row, i + k, bits)) + biases[g];
    });
  }
};

// How a call of T tokens runs against MLX affine rows (dense weights: run_panels): one token
// streams the weights (decode); a small batch of up to two token tiles of kTileTokens streams them
// too (stream_rows); prefill blocks weights and tokens for the caches, in tiles of kPrefillTokens by
// kPrefillRows.
enum class Phase { kDecode, kBatch, kPrefill };
inline Phase phase(int64_t T) {
  if (T == 1) return Phase::kDecode;
  return T > 2 * kTileTokens ? Phase::kPrefill : Phase::kBatch;
}
inline int token_group(int64_t T, const ops::Weight& w) {
  if (!w.quant) return T == 1 ? 1 : kPanelTokens;
  switch (phase(T)) {
    case Phase::kDecode: return 1;
    case Phase::kBatch: return kTileTokens;
    case Phase::kPrefill: break;
  }
  return kPrefillTokens;
}

// A PackedX (linear_rows.h) of groups of G tokens: a tile reads all its tokens' inputs at fixed
// offsets from one pointer, where a pointer per token row (8 of them) spilled the general
// registers, and its last partial block needs no padded copy.
template <int G>
struct PackedTokens {
  const float* base;
  int64_t group;  // floats per group
  const float* from(int64_t t) const { return base + t / G * group + t % G * kDotLanes; }
};

template <int G>
PackedTokens<G> packed_tokens(const PackedX& x) {
  check(x.tokens == G, [&] {
    return "linear: inputs packed in groups of " + std::to_string(x.tokens) + " tokens, the kernel reads " +
           std::to_string(G);
  });
  return {x.data.get(), x.group};
}

// y[t * ldy + j] for NT tokens and weight rows r .. r+NR-1; x is the first token's block 0 in
// PackedTokens<G> order. `stream`: the weights come from memory for little arithmetic (decode), so
// prefetch them.
template <int G, int NT, int NR, class Rows>
KVLM_TARGET void tile(const float* x, int64_t in, const Rows& rows, int64_t r, float* y,
                      int64_t ldy, bool stream) {
  Vec acc[NT][NR];
  KVLM_UNROLL for (int t = 0; t < NT; ++t)
    KVLM_UNROLL for (int j = 0; j < NR; ++j) acc[t][j] = Vec::zero();
  [[maybe_unused]] Vec tables[NR] = {};  // set at i = 0 (a group starts there)
  typename Rows::Row row[NR];
  KVLM_UNROLL for (int j = 0; j < NR; ++j) row[j] = rows.row(r + j);
  const auto ahead = rows.template ahead<NR>(r);
  int64_t i = 0;
  for (; i + kDotLanes <= in; i += kDotLanes) {
    if constexpr (NT == 1 && !Rows::kTables) {
      // One token: each row's weights go straight into its fma, so a 16-row tile needs 16
      // accumulators and not 16 more registers of weights.
      if (stream) ahead.prefetch(i);
      Vec xv = Vec::load(x + i * G);
      xv.in_register();
      KVLM_UNROLL for (int j = 0; j < NR; ++j) acc[0][j] = Vec::fma(xv, row[j].load(i), acc[0][j]);
      continue;
    }
    Vec w[NR];
    if constexpr (Rows::kTables) {
      if (i % rows.group_size == 0)
        KVLM_UNROLL for (int j = 0; j < NR; ++j) tables[j] = rows.table(r + j, i);
      KVLM_UNROLL for (int j = 0; j < NR; ++j) w[j] = rows.lookup(tables[j], r + j, i);
    } else {
      KVLM_UNROLL for (int j = 0; j < NR; ++j) w[j] = row[j].load(i);
    }
    if (stream) ahead.prefetch(i);
    KVLM_UNROLL for (int t = 0; t < NT; ++t) {
      // Loaded once into a register: left to itself GCC folds the load into each of the NR fmas
      // (memory operands), tripling a prefill tile's loads (bench_kernels Linear/2/0/128
      // 17.3 -> 14.6 ms, Linear/2/0/8 1.07 -> 0.84 ms).
      Vec xv = Vec::load(x + i * G + t * kDotLanes);
      xv.in_register();
      KVLM_UNROLL for (int j = 0; j < NR; ++j) acc[t][j] = Vec::fma(xv, w[j], acc[t][j]);
    }
  }
  if (i < in) {
    const int64_t n = in - i;
    for (int j = 0; j < NR; ++j) {
      const Vec w = rows.tail(r + j, i, n);
      for (int t = 0; t < NT; ++t)
        acc[t][j] = Vec::fma(Vec::load(x + i * G + t * kDotLanes), w, acc[t][j]);
    }
  }
  KVLM_UNROLL for (int t = 0; t < NT; ++t)
    KVLM_UNROLL for (int j = 0; j < NR; ++j) y[t * ldy + j] = Vec::fold(acc[t][j]);
}

// Weight rows r0 .. r1-1 for NT tokens: full tiles of NR rows, then single rows.
template <int G, int NT, int NR, class Rows>
KVLM_TARGET void tile_rows(const float* x, int64_t in, const Rows& rows, int64_t r0, int64_t r1,
                           float* y, int64_t ldy) {
  int64_t r = r0;
  for (; r + NR <= r1; r += NR) tile<G, NT, NR>(x, in, rows, r, y + r, ldy, false);
  for (; r < r1; ++r) tile<G, NT, 1>(x, in, rows, r, y + r, ldy, false);
}

// Tokens t0 .. t1-1 against weight rows r0 .. r1-1: tiles of NT tokens by NR rows, the remaining
// tokens in halving tiles (NT/2, ..., 1).
template <int NT, int NR, int G, class Rows>
KVLM_TARGET void tile_tokens(const PackedTokens<G>& x, int64_t t0, int64_t t1, int64_t in,
                             const Rows& rows, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  int64_t t = t0;
  for (; t + NT <= t1; t += NT)
    tile_rows<G, NT, NR>(x.from(t), in, rows, r0, r1, y + t * ldy, ldy);
  if constexpr (NT > 1)
    if (t < t1) tile_tokens<NT / 2, NR>(x, t, t1, in, rows, r0, r1, y, ldy);
}

// Every token of x against the NR weight rows from r: token tiles of NT, then halving tiles. The
// first tile prefetches the rows ahead; the others find these rows in the L1 cache.
template <int NT, int NR, int G, class Rows>
KVLM_TARGET void tokens_on_rows(const PackedTokens<G>& x, int64_t t0, int64_t T, int64_t in,
                                const Rows& rows, int64_t r, float* y, int64_t ldy) {
  int64_t t = t0;
  for (; t + NT <= T; t += NT)
    tile<G, NT, NR>(x.from(t), in, rows, r, y + t * ldy + r, ldy, t == 0);
  if constexpr (NT > 1)
    if (t < T) tokens_on_rows<NT / 2, NR>(x, t, T, in, rows, r, y, ldy);
}

// Decode and small batches do little arithmetic per weight read: the weights stream from memory
// (prefetched ahead) and are read from memory once. One token tile passes each tile of NR rows in
// turn. With more tokens (up to 2 tiles), the first token tile streams a block of kStreamBlock
// rows and the other tiles then find those rows in L2: passing every token tile over each row
// tile instead alternated the tiles' inputs in L1, 2 x 28 KB at 896 wide (single layers of the
// 0.5B shape at 16 tokens, 2 threads: gate/up 238-240 -> 267-300 GFLOP/s, q/k/v and o +10-20%).
constexpr int64_t kStreamBlock = 48;

template <int NT, int NR, int G, class Rows>
KVLM_TARGET void stream_rows(const PackedTokens<G>& x, int64_t T, int64_t in, const Rows& rows,
                             int64_t R, float* y, int64_t ldy) {
  static_assert(kStreamBlock % NR == 0, "single-row tiles only at the end of the rows");
  const int64_t first = std::min<int64_t>(T, NT);  // the streaming token tile's tokens
  for (int64_t b = 0; b < R; b += kStreamBlock) {
    const int64_t e = std::min(R, b + kStreamBlock);
    int64_t r = b;
    for (; r + NR <= e; r += NR) tokens_on_rows<NT, NR>(x, 0, first, in, rows, r, y, ldy);
    for (; r < e; ++r) tokens_on_rows<NT, 1>(x, 0, first, in, rows, r, y, ldy);
    if (T > first) tile_tokens<NT, NR>(x, first, T, in, rows, b, e, y, ldy);
  }
}

// Row r of `rows` as f32: exactly the values the tiles compute in registers.
template <class Rows>
KVLM_TARGET void widen_row(const Rows& rows, int64_t r, int64_t in, float* out) {
  [[maybe_unused]] Vec table = Vec::zero();
  int64_t i = 0;
  for (; i + kDotLanes <= in; i += kDotLanes) {
    if constexpr (Rows::kTables) {
      if (i % rows.group_size == 0) table = rows.table(r, i);
      rows.lookup(table, r, i).store(out + i);
    } else {
      rows.row(r).load(i).store(out + i);
    }
  }
  if (i < in) {
    alignas(64) float buf[kDotLanes];
    rows.tail(r, i, in - i).store(buf);
    std::copy(buf, buf + (in - i), out + i);
  }
}

// Prefill blocking: a block of weight rows stays in the L2 cache while every token tile of a token
// block passes over it (one tile's inputs, at most 8 tokens, in L1/L2), so the weights are read
// from memory once per token block, however large the matrix. The token block lives in the
// last-level cache: 2 MB rather than an L2-sized 384 KB prefilled the 1B shape (MLP width 8192,
// 12-token blocks) at 76-82 instead of 56-68 tok/s. MLX affine rows are dequantized once per block
// into an f32 copy instead of once per tile of tokens. A token tile's inputs come from the
// last-level cache for the block's first row tile and from L2 for the others, so the block needs
// several row tiles: 512 KB (sized as f32) rather than 256 KB gave the 8192-wide down projection
// 15 rows instead of 6 (single core, 128 tokens: 117-120 -> 152-156 GFLOP/s). Dense panels use the
// same token blocks (run_panel_range).
constexpr int64_t kTokenBlockBytes = 2 * 1024 * 1024;
constexpr int64_t kWeightBlockBytes = 512 * 1024;

// MLX affine rows of any width.
template <class Rows>
KVLM_TARGET void run(const LinearRows& job, const PackedX& px, const Rows& rows) {
  const int64_t in = job.w->in_features;
  switch (phase(job.T)) {
    case Phase::kDecode:
      return stream_rows<1, kDecodeRows>(packed_tokens<1>(px), 1, in, rows, job.R, job.y, job.ldy);
    case Phase::kBatch:
      return stream_rows<kTileTokens, kTileRows>(packed_tokens<kTileTokens>(px), job.T, in, rows,
                                                 job.R, job.y, job.ldy);
    case Phase::kPrefill: break;
  }
  constexpr int NT = kPrefillTokens, NR = kPrefillRows;
  const PackedTokens<NT> x = packed_tokens<NT>(px);
  const int64_t token_block = std::max<int64_t>(NT, kTokenBlockBytes / (in * 4) / NT * NT);
  const int64_t row_block = std::max<int64_t>(NR, kWeightBlockBytes / (in * 4) / NR * NR);
  thread_local std::vector<float> widened;
  widened.resize(size_t(row_block * in));
  for (int64_t t = 0; t < job.T; t += token_block) {
    const int64_t t1 = std::min(t + token_block, job.T);
    for (int64_t r = 0; r < job.R; r += row_block) {
      const int64_t r1 = std::min(r + row_block, job.R);
      for (int64_t j = r; j < r1; ++j) widen_row(rows, j, in, widened.data() + (j - r) * in);
      tile_tokens<NT, NR>(x, t, t1, in, F32Rows{widened.data(), in}, 0, r1 - r, job.y + r, job.ldy);
    }
  }
}

template <int kBits>
KVLM_TARGET void run_affine(const LinearRows& job, const PackedX& x) {
  const ops::Weight& w = *job.w;
  const int64_t groups = w.in_features / w.quant->group_size;
  // This job's scales and biases widened once (the model dtype is usually bf16).
  thread_local std::vector<float> sb;
  sb.resize(size_t(2 * job.R * groups));
  widen(w.scales, job.r0 * groups, job.R * groups, sb.data());
  widen(w.biases, job.r0 * groups, job.R * groups, sb.data() + job.R * groups);
  const int64_t words = affine_packed_words(w.in_features, w.quant->bits);
  const AffineRows<kBits> rows{w.weight.data<uint32_t>() + job.r0 * words, words, sb.data(),
                               sb.data() + job.R * groups, groups, w.quant->group_size,
                               w.quant->bits};
  run(job, x, rows);
}

// Dense weights (panels.h): rows across lanes, every output a chain of fmas in input order.

// A panel's 32 rows at one input as two vectors a and b. bf16 splits one 64-byte line into its
// even and odd rows (one load and two ALU operations; two 32-byte halves, each widened, fed one
// token 45 GB/s where the split feeds 54), so `interleave` puts rows back in order; f16 and f32 load
// rows 0-15 and 16-31. kLines: cache lines per input.
struct PanelF32 {
  using T = float;
  static constexpr bool kInterleaved = false;
  static constexpr int kLines = 2;
  static KVLM_TARGET void load(const float* p, Vec& a, Vec& b) {
    a = Vec::load(p), b = Vec::load(p + kDotLanes);
  }
};
struct PanelBF16 {
  using T = uint16_t;
  static constexpr bool kInterleaved = true;
  static constexpr int kLines = 1;
  static KVLM_TARGET void load(const uint16_t* p, Vec& a, Vec& b) { Vec::widen_bf16_pairs(p, a, b); }
};
struct PanelF16 {
  using T = uint16_t;
  static constexpr bool kInterleaved = false;
  static constexpr int kLines = 1;
  static KVLM_TARGET void load(const uint16_t* p, Vec& a, Vec& b) {
    a = Vec::widen_f16(p), b = Vec::widen_f16(p + kDotLanes);
  }
};

// Prefetch distance along a panel's stream. A scratch program of this layout reading 8-token
// batches from memory on 2 threads: none 257-280 GFLOP/s, 1 KB 226-243, 4 KB 300-325, 8 KB
// 303-327.
constexpr int64_t kPanelAheadBytes = 4096;

// Outputs of NT tokens for NP panels, panel i's input 0 at w[i]: each input adds two fmas per
// panel and token. x: element k of token u at x[k * G + u]. With `ahead`, each panel's stream is
// prefetched kPanelAheadBytes ahead.
template <int NT, int NP, int G, class L>
KVLM_TARGET void panel_tile(const typename L::T* const (&w)[NP], int64_t in, const float* x, bool ahead,
                            Vec (&out)[NP][2][NT]) {
  // Local: the vector type may alias anything, so accumulating into `out` would store it back
  // after every input.
  Vec acc[NP][2][NT];
  KVLM_UNROLL for (int i = 0; i < NP; ++i)
    KVLM_UNROLL for (int u = 0; u < NT; ++u) acc[i][0][u] = acc[i][1][u] = Vec::zero();
  for (int64_t k = 0; k < in; ++k) {
    Vec a[NP], b[NP];
    KVLM_UNROLL for (int i = 0; i < NP; ++i) {
      const typename L::T* at = w[i] + k * kPanelRows;
      if (ahead)
        KVLM_UNROLL for (int l = 0; l < L::kLines; ++l)
          __builtin_prefetch(reinterpret_cast<const char*>(at) + kPanelAheadBytes + 64 * l);
      L::load(at, a[i], b[i]);
    }
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      Vec xv = Vec::set1(x[k * G + u]);
      xv.in_register();
      KVLM_UNROLL for (int i = 0; i < NP; ++i) {
        acc[i][0][u] = Vec::fma(a[i], xv, acc[i][0][u]);
        acc[i][1][u] = Vec::fma(b[i], xv, acc[i][1][u]);
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
// it in the caches.
template <int NT, int G, class L>
KVLM_TARGET void panel_tokens(const typename L::T* panel, int64_t p, const float* xg, int u0, int64_t n,
                              const LinearRows& job, int64_t t, bool ahead) {
  const typename L::T* const w[1] = {panel};
  for (; n >= NT; n -= NT, u0 += NT, t += NT, ahead = false) {
    Vec acc[1][2][NT];
    panel_tile<NT, 1, G, L>(w, job.w->in_features, xg + u0, ahead, acc);
    store_panel_tile<NT, 1, L>(acc, p, job, t);
  }
  if constexpr (NT > 1)
    if (n > 0) panel_tokens<NT / 2, G, L>(panel, p, xg, u0, n, job, t, ahead);
}

// Panels p .. p+NP-1 (panel q at panel_at(q)) for one token, side by side: NP streams, 2 * NP
// accumulators to hide the fma latency.
template <int NP, class L, class PanelAt>
KVLM_TARGET void decode_panels(const LinearRows& job, const float* x, int64_t p, const PanelAt& panel_at) {
  const typename L::T* w[NP];
  KVLM_UNROLL for (int i = 0; i < NP; ++i) w[i] = panel_at(p + i);
  Vec acc[NP][2][1];
  panel_tile<1, NP, 1, L>(w, job.w->in_features, x, true, acc);
  store_panel_tile<1, NP, L>(acc, p, job, 0);
}

// The job's panels p0 .. p1-1. One token reads kPanelDecodePanels panels at a time; more tokens go
// in blocks whose inputs stay in the last-level cache, and each panel serves every tile of
// kPanelTokens tokens of a block before the next panel: the weights come from memory once per
// block.
template <class L, class PanelAt>
KVLM_TARGET void run_panel_range(const LinearRows& job, const PackedX& px, int64_t p0, int64_t p1,
                                 const PanelAt& panel_at) {
  if (job.T == 1) {
    int64_t p = p0;
    for (; p + kPanelDecodePanels <= p1; p += kPanelDecodePanels)
      decode_panels<kPanelDecodePanels, L>(job, px.data.get(), p, panel_at);
    for (; p < p1; ++p) decode_panels<1, L>(job, px.data.get(), p, panel_at);
    return;
  }
  constexpr int G = kPanelTokens;
  check(px.tokens == G && px.by_input, "linear: inputs not packed by input for the panel kernel");
  const int64_t in = job.w->in_features;
  const int64_t block = std::max<int64_t>(G, kTokenBlockBytes / (in * 4) / G * G);
  for (int64_t t0 = 0; t0 < job.T; t0 += block) {
    const int64_t t1 = std::min(job.T, t0 + block);
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t t = t0; t < t1; t += G)
        panel_tokens<G, G, L>(panel_at(p), p, px.data.get() + t / G * px.group, 0,
                              std::min<int64_t>(G, t1 - t), job, t, t == t0);
  }
}

// Dense rows r0 .. r0+R-1: from the weight's panels, or for a row-major weight from each panel
// packed into a scratch copy first (the same values in the same order: the same bits).
template <class L>
KVLM_TARGET void run_panels(const LinearRows& job, const PackedX& px) {
  using T = typename L::T;
  const ops::Weight& w = *job.w;
  const int64_t in = w.in_features, panel = in * kPanelRows;
  const int64_t p0 = job.r0 / kPanelRows, p1 = (job.r0 + job.R + kPanelRows - 1) / kPanelRows;
  const T* base = static_cast<const T*>(w.weight.raw());
  if (w.panels) return run_panel_range<L>(job, px, p0, p1, [&](int64_t p) { return base + p * panel; });
  thread_local std::vector<T> scratch;
  scratch.resize(size_t(panel));
  for (int64_t p = p0; p < p1; ++p) {
    pack_panel(base, w.out_features, in, p, scratch.data());
    run_panel_range<L>(job, px, p, p + 1, [&](int64_t) { return static_cast<const T*>(scratch.data()); });
  }
}

KVLM_TARGET void linear_rows_simd(const LinearRows& job, const PackedX& x) {
  const ops::Weight& w = *job.w;
  if (w.quant) {
    if (w.quant->bits == 4) return run_affine<4>(job, x);
    if (w.quant->bits == 8) return run_affine<8>(job, x);
    return run_affine<0>(job, x);
  }
  switch (w.weight.dtype()) {
    case DType::kBF16: return run_panels<PanelBF16>(job, x);
    case DType::kF16: return run_panels<PanelF16>(job, x);
    default: return run_panels<PanelF32>(job, x);
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

KVLM_TARGET void exp_shifted_simd(float* x, int64_t n, float shift) {
  const Vec s = Vec::set1(shift);
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) Vec::exp(Vec::sub(Vec::load(x + i), s)).store(x + i);
  for (; i < n; ++i) x[i] = exp_portable(x[i] - shift);
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

}  // namespace
}  // namespace kvlm::cpu
