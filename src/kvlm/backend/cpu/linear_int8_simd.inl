// The SIMD int8 kernels of linear_int8.h, written once. Included by kernels_avx2.cpp and
// kernels_avx512.cpp after kernels_simd.inl (whose Vec and KVLM_TARGET they reuse),
// which first define
//   struct I8   the integer side of one ISA over the formula's 16 lanes: Acc (16 int32 lanes),
//               W4/load4/dot4 and W8/load8/dot8 (one chunk of a row, and its lane sums of
//               code_i * xq_i for one token, started from Int8Acts::base), to_float, expand
//               (each lane's scale from the row's scales), and the register tile kTileTokens,
//               kTileRows, kDecodeRows.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/linear_int8.h"

namespace kvlm::cpu {
namespace {

struct Int8Job {
  const uint8_t* packed;  // the job's first row
  int64_t row_bytes;
  const Int8Acts* acts;
  const float *s, *b;     // widened scales and centred biases [R, groups], then 16 zeros
  int64_t groups;
  int64_t in, chunk;
  int group_shift;             // log2 of the group size (32, 64 or 128)
  const int32_t* lane_groups;  // int8_lane_groups
  float* y;
  int64_t ldy;
};

// Outputs of tokens t .. t+NT-1 and job rows r .. r+NR-1. The rows' chunks are loaded KB at a time
// and each block serves every token before the next is loaded: a tile of several tokens holds all
// its rows (KB = NR, each weight register reused NT times); a decode tile takes its rows one by one
// (KB = 1; their loads are independent, so they are still in flight together), because holding
// all 8 rows' codes and scales spilled registers.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tile(const Int8Job& j, int64_t t, int64_t r, bool stream) {
  using Weights = std::conditional_t<kBits == 4, I8::W4, I8::W8>;
  constexpr int KB = NT == 1 ? 1 : NR;
  const Int8Acts& a = *j.acts;
  const int64_t chunk_bytes = j.chunk * kBits / 8;
  const int64_t gp = a.groups_pad;
  const uint8_t* codes[NR];
  const float* scales[NR];
  Vec F[NT][NR];
  KVLM_UNROLL for (int k = 0; k < NR; ++k) {
    codes[k] = j.packed + (r + k) * j.row_bytes;
    scales[k] = j.s + (r + k) * j.groups;
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      F[u][k] = Vec::zero();
      for (int64_t g = 0; g < gp; g += kDotLanes)
        F[u][k] = Vec::fma(Vec::load(j.b + (r + k) * j.groups + g),
                           Vec::load(a.sx.data() + (t + u) * gp + g), F[u][k]);
    }
  }
  // Decode streams its weights: fetch the rows two tiles ahead while this tile computes.
  const int64_t ahead = 2 * NR * j.row_bytes;
  const int8_t* x = a.q.data() + t * a.stride;
  const float* d = a.d.data() + t * a.lanes;
  const int32_t* base = a.base.data() + t * a.lanes;
  for (int64_t i = 0, at = 0, lane = 0; i < j.in; i += j.chunk, at += chunk_bytes, lane += kDotLanes) {
    const int64_t nbytes = std::min(j.chunk, j.in - i) * kBits / 8;
    const int64_t g = i >> j.group_shift;
    KVLM_UNROLL for (int k0 = 0; k0 < NR; k0 += KB) {
      Weights w[KB];
      Vec scale[KB];
      KVLM_UNROLL for (int k = 0; k < KB; ++k) {
        if constexpr (kBits == 4) w[k] = I8::load4(codes[k0 + k] + at, nbytes);
        else w[k] = I8::load8(codes[k0 + k] + at, nbytes);
        if (stream) __builtin_prefetch(codes[k0 + k] + ahead + at);
        scale[k] = I8::expand(scales[k0 + k] + g, j.lane_groups);
      }
      KVLM_UNROLL for (int u = 0; u < NT; ++u) {
        const int8_t* xu = x + u * a.stride + i;
        const int32_t* bu = base + u * a.lanes + lane;
        const Vec du = Vec::load(d + u * a.lanes + lane);
        KVLM_UNROLL for (int k = 0; k < KB; ++k) {
          typename I8::Acc sum;
          if constexpr (kBits == 4) sum = I8::dot4(w[k], xu, bu);
          else sum = I8::dot8(w[k], xu, bu);
          F[u][k0 + k] = Vec::fma(Vec::mul(scale[k], du), I8::to_float(sum), F[u][k0 + k]);
        }
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
// first tile prefetches the rows ahead; the others find these rows in the L1 cache.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tokens_on_rows(const Int8Job& j, int64_t t0, int64_t t1, int64_t r, bool prefetch) {
  int64_t t = t0;
  for (; t + NT <= t1; t += NT) int8_tile<kBits, NT, NR>(j, t, r, prefetch && t == t0);
  if constexpr (NT > 1)
    if (t < t1) int8_tokens_on_rows<kBits, NT / 2, NR>(j, t, t1, r, prefetch && t == t0);
}

// Batched decode: each tile of rows serves every token tile before the next rows are read, so a
// batch of several tiles still reads the weights from memory once.
template <int kBits>
KVLM_TARGET void int8_stream_rows(const Int8Job& j, int64_t T, int64_t R) {
  constexpr int NR = I8::kTileRows;
  int64_t r = 0;
  for (; r + NR <= R; r += NR) int8_tokens_on_rows<kBits, I8::kTileTokens, NR>(j, 0, T, r, true);
  for (; r < R; ++r) int8_tokens_on_rows<kBits, I8::kTileTokens, 1>(j, 0, T, r, true);
}

// A float tensor (f32, f16 or bf16) read 16 elements at a time as f32.
struct FloatBlocks {
  DType dtype;
  const void* data;
  explicit FloatBlocks(const Tensor& t) : dtype(t.dtype()), data(t.raw()) {}
  KVLM_TARGET Vec load(int64_t at) const {
    switch (dtype) {
      case DType::kBF16: return Vec::widen_bf16(static_cast<const uint16_t*>(data) + at);
      case DType::kF16: return Vec::widen_f16(static_cast<const uint16_t*>(data) + at);
      default: return Vec::load(static_cast<const float*>(data) + at);
    }
  }
};

// n scales from `offset` widened into s_out and the matching biases centred into b_out by
// int8_center_biases' rule (b + s * m, the multiply and the add rounded separately), in one
// vector pass: done as three scalar passes it took a sixth of a decode call.
KVLM_TARGET void widen_centred(const Tensor& scales, const Tensor& biases, int64_t offset, int64_t n,
                               int bits, float* s_out, float* b_out) {
  const FloatBlocks s_in(scales), b_in(biases);
  const Vec m = Vec::set1(float(1 << (bits - 1)));
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) {
    const Vec s = s_in.load(offset + i);
    s.store(s_out + i);
    Vec::add(b_in.load(offset + i), Vec::mul(s, m)).store(b_out + i);
  }
  if (i == n) return;
  widen(scales, offset + i, n - i, s_out + i);
  widen(biases, offset + i, n - i, b_out + i);
  int8_center_biases(s_out + i, b_out + i, n - i, bits);
}

// Batches up to this many tokens stream their weights tile of rows by tile (int8_stream_rows).
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
  widen_centred(w.scales, w.biases, job.r0 * groups, job.R * groups, kBits, s.data(), b.data());
  std::fill(s.end() - kDotLanes, s.end(), 0.0f);
  std::fill(b.end() - kDotLanes, b.end(), 0.0f);
  alignas(64) int32_t lane_groups[kDotLanes];
  int8_lane_groups(int(G), kBits, lane_groups);
  const int64_t row_bytes = affine_packed_words(in, kBits) * 4;
  const Int8Job j{reinterpret_cast<const uint8_t*>(w.weight.data<uint32_t>()) + job.r0 * row_bytes,
                  row_bytes, &acts, s.data(), b.data(), groups, in, int8_chunk(kBits),
                  std::countr_zero(uint64_t(G)),
                  lane_groups, job.y, job.ldy};
  if (job.T == 1) return int8_rows<kBits, 1, I8::kDecodeRows>(j, 0, job.R, true);
  if (job.T <= kInt8StreamTokens) return int8_stream_rows<kBits>(j, job.T, job.R);
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
