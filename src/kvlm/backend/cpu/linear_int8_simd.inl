// The SIMD int8 kernels of linear_int8.h, written once. Included by kernels_avx2.cpp and
// kernels_avx512.cpp after kernels_simd.inl (whose Vec and KVLM_TARGET they reuse), which first
// define
//   struct I8   integer dot products of one ISA: Acc (int32 lanes), kLanes, kChunk4/kChunk8
//               (codes per step), x4(c) (offset of 4-bit chunk c's even activations; the odd ones
//               follow 64 bytes later), W4/load4/dot4, W8/load8/dot8, zero, store_groups, and the register
//               tile kTileTokens, kTileRows, kDecodeRows.
// A step multiplies one chunk of codes by the token's activations into int32 lanes, each lane
// covering codes of a single group; store_groups adds the lanes of each group (L lanes apiece).
// Integer sums are exact, so the lane layout never shows in the result: only the float combine
// (int8_combine, the order of linear_int8.h) does, and it is the portable one.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kvlm/backend/cpu/linear_int8.h"

namespace kvlm::cpu {
namespace {

// fma(s_g * d_g, float(idot_g), b_g * sx_g) summed in the 16-lane order over groups_pad groups,
// with b already centred (int8_center_biases) and idot = the sum of code * xq, centred here.
KVLM_TARGET float int8_combine(int32_t* idot, const int32_t* qsum, int32_t m, const float* s,
                               const float* b, const float* d, const float* sx, int64_t groups_pad) {
  for (int64_t g = 0; g < groups_pad; ++g) idot[g] -= m * qsum[g];
  Vec acc = Vec::zero();
  for (int64_t g = 0; g < groups_pad; g += kDotLanes)
    acc = Vec::add(acc, Vec::fma(Vec::mul(Vec::load(s + g), Vec::load(d + g)), Vec::codes_i32(idot + g),
                                 Vec::mul(Vec::load(b + g), Vec::load(sx + g))));
  return Vec::fold(acc);
}

struct Int8Job {
  const uint8_t* packed;  // the job's first row
  int64_t row_bytes;
  const Int8Acts* acts;
  const float *s, *b;     // widened scales and biases, [R, groups_pad], zero-padded
  int64_t in, chunk, chunks_per_group, groups_per_chunk;
  int lanes_per_group;
  int32_t* idot;          // scratch: [tile accumulator][idot_stride]
  int64_t idot_stride;
  float* y;
  int64_t ldy;
};

// Outputs of tokens t .. t+NT-1 and job rows r .. r+NR-1.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tile(const Int8Job& j, int64_t t, int64_t r, bool stream) {
  using Weights = std::conditional_t<kBits == 4, I8::W4, I8::W8>;
  const Int8Acts& a = *j.acts;
  const int64_t chunk_bytes = j.chunk * kBits / 8;
  typename I8::Acc acc[NT][NR];
  KVLM_UNROLL for (int u = 0; u < NT; ++u)
    KVLM_UNROLL for (int k = 0; k < NR; ++k) acc[u][k] = I8::zero();
  int64_t g = 0;  // the first group of the lanes in acc
  for (int64_t c = 0, i = 0; i < j.in; ++c, i += j.chunk) {
    const int64_t nbytes = std::min(j.chunk, j.in - i) * kBits / 8;
    Weights w[NR];
    KVLM_UNROLL for (int k = 0; k < NR; ++k) {
      const uint8_t* p = j.packed + (r + k) * j.row_bytes + c * chunk_bytes;
      if constexpr (kBits == 4) w[k] = I8::load4(p, nbytes);
      else w[k] = I8::load8(p, nbytes);
    }
    // Fetch the rows two tiles ahead while this tile computes (decode streams its weights).
    if (stream)
      KVLM_UNROLL for (int k = 0; k < NR; ++k)
        __builtin_prefetch(j.packed + (r + 2 * NR + k) * j.row_bytes + c * chunk_bytes);
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      const int8_t* x = a.q.data() + (t + u) * a.stride;
      KVLM_UNROLL for (int k = 0; k < NR; ++k) {
        if constexpr (kBits == 4) acc[u][k] = I8::dot4(acc[u][k], w[k], x + I8::x4(c));
        else acc[u][k] = I8::dot8(acc[u][k], w[k], x + i);
      }
    }
    if ((c + 1) % j.chunks_per_group != 0) continue;
    KVLM_UNROLL for (int u = 0; u < NT; ++u)
      KVLM_UNROLL for (int k = 0; k < NR; ++k) {
        I8::store_groups(acc[u][k], j.lanes_per_group, j.idot + (u * NR + k) * j.idot_stride + g);
        acc[u][k] = I8::zero();
      }
    g += j.groups_per_chunk;
  }
  const int64_t gp = a.groups_pad;
  for (int u = 0; u < NT; ++u)
    for (int k = 0; k < NR; ++k)
      j.y[(t + u) * j.ldy + r + k] =
          int8_combine(j.idot + (u * NR + k) * j.idot_stride, a.qsum.data() + (t + u) * gp,
                       1 << (kBits - 1), j.s + (r + k) * gp, j.b + (r + k) * gp,
                       a.d.data() + (t + u) * gp, a.sx.data() + (t + u) * gp, gp);
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

template <int kBits>
KVLM_TARGET void linear_int8_simd_bits(const LinearRows& job, const Int8Acts& acts) {
  const ops::Weight& w = *job.w;
  const int64_t in = w.in_features, G = w.quant->group_size, gp = acts.groups_pad;
  const int64_t chunk = kBits == 4 ? I8::kChunk4 : I8::kChunk8;
  // This job's scales and centred biases widened once, each row zero-padded to groups_pad.
  thread_local std::vector<float> sb;
  sb.assign(size_t(2 * job.R * gp), 0.0f);
  for (int64_t r = 0; r < job.R; ++r) {
    widen(w.scales, (job.r0 + r) * acts.groups, acts.groups, sb.data() + r * gp);
    widen(w.biases, (job.r0 + r) * acts.groups, acts.groups, sb.data() + (job.R + r) * gp);
    int8_center_biases(sb.data() + r * gp, sb.data() + (job.R + r) * gp, acts.groups, kBits);
  }
  // A group's padding lanes must read 0; a partial last chunk writes exact zeros past `groups`,
  // hence the slack of one chunk's groups after groups_pad.
  thread_local std::vector<int32_t> idot;
  const int64_t idot_stride = gp + kDotLanes;
  idot.assign(size_t(I8::kTileTokens * I8::kDecodeRows * idot_stride), 0);
  const int64_t row_bytes = affine_packed_words(in, kBits) * 4;
  const Int8Job j{reinterpret_cast<const uint8_t*>(w.weight.data<uint32_t>()) + job.r0 * row_bytes,
                  row_bytes, &acts, sb.data(), sb.data() + job.R * gp, in, chunk,
                  std::max<int64_t>(1, G / chunk), std::max<int64_t>(1, chunk / G),
                  int(I8::kLanes * std::min(G, chunk) / chunk), idot.data(), idot_stride, job.y,
                  job.ldy};
  // Token blocks whose activations stay in the L2 cache while the weight rows stream past.
  constexpr int64_t kBlockBytes = 384 * 1024;
  const int64_t block = std::max<int64_t>(
      I8::kTileTokens, kBlockBytes / acts.stride / I8::kTileTokens * I8::kTileTokens);
  const bool stream = job.T <= 2 * I8::kTileTokens;
  for (int64_t t = 0; t < job.T; t += block)
    int8_tokens<kBits, I8::kTileTokens>(j, t, std::min(job.T, t + block), job.R, stream);
}

KVLM_TARGET void linear_int8_simd(const LinearRows& job, const Int8Acts& acts) {
  if (job.w->quant->bits == 4) linear_int8_simd_bits<4>(job, acts);
  else linear_int8_simd_bits<8>(job, acts);
}

}  // namespace
}  // namespace kvlm::cpu
