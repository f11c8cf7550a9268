// The SIMD int8 kernels of linear_int8.h, written once. Included by kernels_avx2.cpp and
// kernels_avx512.cpp after kernels_simd.inl (whose Vec and KVLM_TARGET they reuse),
// which first define
//   struct I8   the integer side of one ISA over the formula's 16 lanes: Acc (16 int32 lanes),
//               W4/load4/dot4 and W8/load8/dot8 (one chunk of a row, and its lane sums of
//               code_i * xq_i for one token, started from Int8Acts::base), to_float, expand
//               (each lane's scale from the row's scales), and the register tile kTileTokens,
//               kTileRows, kDecodeRows.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kvlm/backend/cpu/linear_int8.h"

namespace kvlm::cpu {
namespace {

struct Int8Job {
  const uint8_t* packed;  // the job's first row
  int64_t row_bytes;
  const Int8Acts* acts;
  const float *s, *b;     // widened scales and centred biases [R, groups], then 16 zeros
  int64_t groups;
  int64_t in, chunk, G;
  const int32_t* lane_groups;  // int8_lane_groups
  float* y;
  int64_t ldy;
};

// Outputs of tokens t .. t+NT-1 and job rows r .. r+NR-1.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tile(const Int8Job& j, int64_t t, int64_t r, bool stream) {
  using Weights = std::conditional_t<kBits == 4, I8::W4, I8::W8>;
  const Int8Acts& a = *j.acts;
  const int64_t chunk_bytes = j.chunk * kBits / 8;
  const int64_t gp = a.groups_pad;
  Vec F[NT][NR];
  KVLM_UNROLL for (int u = 0; u < NT; ++u)
    KVLM_UNROLL for (int k = 0; k < NR; ++k) {
      F[u][k] = Vec::zero();
      for (int64_t g = 0; g < gp; g += kDotLanes)
        F[u][k] = Vec::fma(Vec::load(j.b + (r + k) * j.groups + g),
                           Vec::load(a.sx.data() + (t + u) * gp + g), F[u][k]);
    }
  for (int64_t c = 0, i = 0; i < j.in; ++c, i += j.chunk) {
    const int64_t nbytes = std::min(j.chunk, j.in - i) * kBits / 8;
    Weights w[NR];
    Vec scale[NR];
    KVLM_UNROLL for (int k = 0; k < NR; ++k) {
      const uint8_t* p = j.packed + (r + k) * j.row_bytes + c * chunk_bytes;
      if constexpr (kBits == 4) w[k] = I8::load4(p, nbytes);
      else w[k] = I8::load8(p, nbytes);
      scale[k] = I8::expand(j.s + (r + k) * j.groups + i / j.G, j.lane_groups);
    }
    // Fetch the rows two tiles ahead while this tile computes (decode streams its weights).
    if (stream)
      KVLM_UNROLL for (int k = 0; k < NR; ++k)
        __builtin_prefetch(j.packed + (r + 2 * NR + k) * j.row_bytes + c * chunk_bytes);
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      const int64_t lane = (t + u) * a.lanes + c * kDotLanes;
      const int8_t* x = a.q.data() + (t + u) * a.stride + i;
      const Vec d = Vec::load(a.d.data() + lane);
      KVLM_UNROLL for (int k = 0; k < NR; ++k) {
        typename I8::Acc sum;
        if constexpr (kBits == 4) sum = I8::dot4(w[k], x, a.base.data() + lane);
        else sum = I8::dot8(w[k], x, a.base.data() + lane);
        F[u][k] = Vec::fma(Vec::mul(scale[k], d), I8::to_float(sum), F[u][k]);
      }
    }
  }
  KVLM_UNROLL for (int u = 0; u < NT; ++u)
    KVLM_UNROLL for (int k = 0; k < NR; ++k) j.y[(t + u) * j.ldy + r + k] = Vec::fold(F[u][k]);
}

// All R rows for tokens t .. t+NT-1: tiles of NR rows, then single rows.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_rows(const Int8Job& j, int64_t t, int64_t R, bool stream) {
  int64_t r = 0;
  for (; r + NR <= R; r += NR) int8_tile<kBits, NT, NR>(j, t, r, stream);
  for (; r < R; ++r) int8_tile<kBits, NT, 1>(j, t, r, stream);
}

// Tokens t0 .. t1-1 in tiles of NT, the remainder in halving tiles (NT/2, ..., 1).
template <int kBits, int NT>
KVLM_TARGET void int8_tokens(const Int8Job& j, int64_t t0, int64_t t1, int64_t R, bool stream) {
  int64_t t = t0;
  for (; t + NT <= t1; t += NT) {
    if constexpr (NT == 1) int8_rows<kBits, 1, I8::kDecodeRows>(j, t, R, stream);
    else int8_rows<kBits, NT, I8::kTileRows>(j, t, R, stream);
  }
  if constexpr (NT > 1)
    if (t < t1) int8_tokens<kBits, NT / 2>(j, t, t1, R, stream);
}

// Every token of t0 .. t1-1 against the NR rows from r: token tiles of NT, then halving tiles. The
// first tile prefetches the rows ahead; the others find this panel in the L1 cache.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tokens_on_panel(const Int8Job& j, int64_t t0, int64_t t1, int64_t r, bool prefetch) {
  int64_t t = t0;
  for (; t + NT <= t1; t += NT) int8_tile<kBits, NT, NR>(j, t, r, prefetch && t == t0);
  if constexpr (NT > 1)
    if (t < t1) int8_tokens_on_panel<kBits, NT / 2, NR>(j, t, t1, r, prefetch && t == t0);
}

// Batched decode: each panel of rows serves every token tile before the next panel is read, so a
// batch of several tiles still reads the weights from memory once.
template <int kBits>
KVLM_TARGET void int8_stream_panels(const Int8Job& j, int64_t T, int64_t R) {
  constexpr int NR = I8::kTileRows;
  int64_t r = 0;
  for (; r + NR <= R; r += NR) int8_tokens_on_panel<kBits, I8::kTileTokens, NR>(j, 0, T, r, true);
  for (; r < R; ++r) int8_tokens_on_panel<kBits, I8::kTileTokens, 1>(j, 0, T, r, true);
}

// Batches up to this many tokens stream their weights panel by panel (int8_stream_panels).
constexpr int64_t kInt8StreamTokens = 16;

template <int kBits>
KVLM_TARGET void linear_int8_simd_bits(const LinearRows& job, const Int8Acts& acts) {
  const ops::Weight& w = *job.w;
  const int64_t in = w.in_features, G = w.quant->group_size, groups = acts.groups;
  // This job's scales and centred biases, widened once for all its rows (one call each: per-row
  // calls cost more than the dot products in decode). Reads past a row's last group (the bias
  // lanes up to groups_pad, a chunk's expand up to 16 groups) see the next row's values or the 16
  // zeros after the last row; they are multiplied by the zero sx or d of the padding, and F never
  // holds -0 (it starts at +0), so they cannot change a bit.
  thread_local std::vector<float> s, b;
  s.resize(size_t(job.R * groups + kDotLanes));
  b.resize(size_t(job.R * groups + kDotLanes));
  widen(w.scales, job.r0 * groups, job.R * groups, s.data());
  widen(w.biases, job.r0 * groups, job.R * groups, b.data());
  int8_center_biases(s.data(), b.data(), job.R * groups, kBits);
  std::fill(s.end() - kDotLanes, s.end(), 0.0f);
  std::fill(b.end() - kDotLanes, b.end(), 0.0f);
  alignas(64) int32_t lane_groups[kDotLanes];
  int8_lane_groups(int(G), kBits, lane_groups);
  const int64_t row_bytes = affine_packed_words(in, kBits) * 4;
  const Int8Job j{reinterpret_cast<const uint8_t*>(w.weight.data<uint32_t>()) + job.r0 * row_bytes,
                  row_bytes, &acts, s.data(), b.data(), groups, in, int8_chunk(kBits), G,
                  lane_groups, job.y, job.ldy};
  if (job.T == 1) return int8_rows<kBits, 1, I8::kDecodeRows>(j, 0, job.R, true);
  if (job.T <= kInt8StreamTokens) return int8_stream_panels<kBits>(j, job.T, job.R);
  // Prefill: token blocks whose activations stay in the L2 cache while the weight rows pass.
  constexpr int64_t kBlockBytes = 384 * 1024;
  const int64_t block = std::max<int64_t>(
      I8::kTileTokens, kBlockBytes / acts.stride / I8::kTileTokens * I8::kTileTokens);
  for (int64_t t = 0; t < job.T; t += block)
    int8_tokens<kBits, I8::kTileTokens>(j, t, std::min(job.T, t + block), job.R, false);
}

KVLM_TARGET void linear_int8_simd(const LinearRows& job, const Int8Acts& acts) {
  if (job.w->quant->bits == 4) linear_int8_simd_bits<4>(job, acts);
  else linear_int8_simd_bits<8>(job, acts);
}

}  // namespace
}  // namespace kvlm::cpu
