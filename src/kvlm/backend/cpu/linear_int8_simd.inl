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
  int64_t groups;
  int64_t in, chunk;
  int group_shift;             // log2 of the group size (32, 64 or 128)
  const int32_t* lane_groups;  // int8_lane_groups
  float* y;
  int64_t ldy;
};

// The widened scales and centred biases of a tile's rows, [rows, groups] from the tile's first row
// and then 16 zeros (widen_centred).
struct Int8Scales {
  const float *s, *b;
};

// One chunk of the formula (codes i .. i+chunk-1, nbytes of them stored) for tokens t .. t+NT-1
// and the NR rows of `codes`. The rows' chunks are loaded KB at a time and each block serves every
// token before the next is loaded: a tile of several tokens holds all its rows (KB = NR, each
// weight register reused NT times); a decode tile takes its rows one by one (KB = 1; their loads
// are independent, so they are still in flight together), because holding all 8 rows' codes and
// scales spilled registers.
template <int kBits, int NT, int NR>
KVLM_TARGET KVLM_INLINE void int8_chunk_step(const Int8Job& j, const uint8_t* const (&codes)[NR],
                                             Int8Scales sc, int64_t t, int64_t i, int64_t nbytes,
                                             int64_t ahead, Vec (&F)[NT][NR]) {
  using Weights = std::conditional_t<kBits == 4, I8::W4, I8::W8>;
  constexpr int KB = NT == 1 ? 1 : NR;
  const Int8Acts& a = *j.acts;
  const int64_t at = i * kBits / 8, lane = i / j.chunk * kDotLanes, g = i >> j.group_shift;
  KVLM_UNROLL for (int k0 = 0; k0 < NR; k0 += KB) {
    Weights w[KB];
    Vec scale[KB];
    KVLM_UNROLL for (int k = 0; k < KB; ++k) {
      if constexpr (kBits == 4) w[k] = I8::load4(codes[k0 + k] + at, nbytes);
      else w[k] = I8::load8(codes[k0 + k] + at, nbytes);
      if (ahead) __builtin_prefetch(codes[k0 + k] + ahead + at);
      scale[k] = I8::expand(sc.s + (k0 + k) * j.groups + g, j.lane_groups);
    }
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      const int8_t* xu = a.q.data() + (t + u) * a.stride + i;
      const int32_t* bu = a.base.data() + (t + u) * a.lanes + lane;
      const Vec du = Vec::load(a.d.data() + (t + u) * a.lanes + lane);
      KVLM_UNROLL for (int k = 0; k < KB; ++k) {
        typename I8::Acc sum;
        if constexpr (kBits == 4) sum = I8::dot4(w[k], xu, bu);
        else sum = I8::dot8(w[k], xu, bu);
        F[u][k0 + k] = Vec::fma(Vec::mul(scale[k], du), I8::to_float(sum), F[u][k0 + k]);
      }
    }
  }
}

// Outputs of tokens t .. t+NT-1 and job rows r .. r+NR-1, whose scales are `sc`. Whole chunks
// first, with a constant length, then the row's last partial chunk. Decode streams its weights:
// `stream` fetches the rows two tiles ahead while this tile computes.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tile(const Int8Job& j, Int8Scales sc, int64_t t, int64_t r, bool stream) {
  const Int8Acts& a = *j.acts;
  const int64_t gp = a.groups_pad;
  const uint8_t* codes[NR];
  Vec F[NT][NR];
  KVLM_UNROLL for (int k = 0; k < NR; ++k) {
    codes[k] = j.packed + (r + k) * j.row_bytes;
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      F[u][k] = Vec::zero();
      for (int64_t g = 0; g < gp; g += kDotLanes)
        F[u][k] = Vec::fma(Vec::load(sc.b + k * j.groups + g), Vec::load(a.sx.data() + (t + u) * gp + g), F[u][k]);
    }
  }
  const int64_t ahead = stream ? 2 * NR * j.row_bytes : 0;
  const int64_t whole = j.in / j.chunk * j.chunk, chunk_bytes = j.chunk * kBits / 8;
  int64_t i = 0;
  for (; i < whole; i += j.chunk) int8_chunk_step<kBits, NT, NR>(j, codes, sc, t, i, chunk_bytes, ahead, F);
  if (i < j.in) int8_chunk_step<kBits, NT, NR>(j, codes, sc, t, i, (j.in - i) * kBits / 8, ahead, F);
  KVLM_UNROLL for (int u = 0; u < NT; ++u)
    KVLM_UNROLL for (int k = 0; k < NR; ++k) j.y[(t + u) * j.ldy + r + k] = Vec::fold(F[u][k]);
}

// Tokens t .. t+NT-1 (prefill; the job's scales widened in `all`): tiles of NR rows, then single rows.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_rows(const Int8Job& j, Int8Scales all, int64_t t, int64_t R) {
  int64_t r = 0;
  for (; r + NR <= R; r += NR) int8_tile<kBits, NT, NR>(j, {all.s + r * j.groups, all.b + r * j.groups}, t, r, false);
  for (; r < R; ++r) int8_tile<kBits, NT, 1>(j, {all.s + r * j.groups, all.b + r * j.groups}, t, r, false);
}

// Tokens t0 .. t1-1 in tiles of NT, the remainder in halving tiles (NT/2, ..., 1).
template <int kBits, int NT>
KVLM_TARGET void int8_tokens(const Int8Job& j, Int8Scales all, int64_t t0, int64_t t1, int64_t R) {
  int64_t t = t0;
  for (; t + NT <= t1; t += NT) int8_rows<kBits, NT, I8::kTileRows>(j, all, t, R);
  if constexpr (NT > 1)
    if (t < t1) int8_tokens<kBits, NT / 2>(j, all, t, t1, R);
}

// Every token of t0 .. t1-1 against the NR rows from r: token tiles of NT, then halving tiles. The
// first tile prefetches the rows ahead; the others find these rows in the L1 cache.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tokens_on_rows(const Int8Job& j, Int8Scales sc, int64_t t0, int64_t t1, int64_t r,
                                     bool prefetch) {
  int64_t t = t0;
  for (; t + NT <= t1; t += NT) int8_tile<kBits, NT, NR>(j, sc, t, r, prefetch && t == t0);
  if constexpr (NT > 1)
    if (t < t1) int8_tokens_on_rows<kBits, NT / 2, NR>(j, sc, t, t1, r, prefetch && t == t0);
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

// The widened scales and centred biases (int8_center_biases' rule: b + s * m, the multiply and the
// add rounded separately) of some rows of a weight, in one vector pass (three scalar passes took a
// sixth of a decode call), then 16 zeros. Reads past the last row's last group (the bias lanes up
// to groups_pad, a chunk's expand up to 16 groups) see the next row's values or these zeros; they
// are multiplied by the zero sx or d of the padding, and F never holds -0 (it starts at +0), so
// they cannot change a bit.
class Int8ScaleBuffer {
 public:
  KVLM_TARGET Int8Scales rows(const ops::Weight& w, int64_t row, int64_t rows, int bits) {
    const int64_t groups = w.in_features / w.quant->group_size;
    const int64_t offset = row * groups, n = rows * groups;
    s_.resize(size_t(n + kDotLanes));
    b_.resize(size_t(n + kDotLanes));
    // Whole vectors may run into the next rows (overwritten by the zeros), never past the tensor.
    const int64_t vec = std::min(n + kDotLanes - 1, w.out_features * groups - offset) / kDotLanes * kDotLanes;
    const FloatBlocks s_in(w.scales), b_in(w.biases);
    const Vec m = Vec::set1(float(1 << (bits - 1)));
    for (int64_t i = 0; i < vec; i += kDotLanes) {
      const Vec s = s_in.load(offset + i);
      s.store(s_.data() + i);
      Vec::add(b_in.load(offset + i), Vec::mul(s, m)).store(b_.data() + i);
    }
    if (vec < n) {
      widen(w.scales, offset + vec, n - vec, s_.data() + vec);
      widen(w.biases, offset + vec, n - vec, b_.data() + vec);
      int8_center_biases(s_.data() + vec, b_.data() + vec, n - vec, bits);
    }
    std::fill(s_.begin() + n, s_.end(), 0.0f);
    std::fill(b_.begin() + n, b_.end(), 0.0f);
    return {s_.data(), b_.data()};
  }

 private:
  std::vector<float> s_, b_;
};

// Decode (NT = 1, NR = kDecodeRows) and batched decode: each tile of NR rows serves every token
// tile before the next rows are read, so a batch of several tiles still reads the weights from
// memory once. Each tile's scales are widened just before it: widened for a whole job, a decode
// job's scales outgrew the L2 cache.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_stream_rows(const Int8Job& j, const LinearRows& job, Int8ScaleBuffer& scales) {
  int64_t r = 0;
  for (; r + NR <= job.R; r += NR)
    int8_tokens_on_rows<kBits, NT, NR>(j, scales.rows(*job.w, job.r0 + r, NR, kBits), 0, job.T, r, true);
  for (; r < job.R; ++r)
    int8_tokens_on_rows<kBits, NT, 1>(j, scales.rows(*job.w, job.r0 + r, 1, kBits), 0, job.T, r, true);
}

// Batches up to this many tokens stream their weights tile of rows by tile (int8_stream_rows).
constexpr int64_t kInt8StreamTokens = 16;

template <int kBits>
KVLM_TARGET void linear_int8_simd_bits(const LinearRows& job, const Int8Acts& acts) {
  const ops::Weight& w = *job.w;
  const int64_t in = w.in_features, G = w.quant->group_size;
  alignas(64) int32_t lane_groups[kDotLanes];
  int8_lane_groups(int(G), kBits, lane_groups);
  const int64_t row_bytes = affine_packed_words(in, kBits) * 4;
  const Int8Job j{reinterpret_cast<const uint8_t*>(w.weight.data<uint32_t>()) + job.r0 * row_bytes,
                  row_bytes, &acts, acts.groups, in, int8_chunk(kBits),
                  std::countr_zero(uint64_t(G)), lane_groups, job.y, job.ldy};
  thread_local Int8ScaleBuffer scales;
  if (job.T == 1) return int8_stream_rows<kBits, 1, I8::kDecodeRows>(j, job, scales);
  if (job.T <= kInt8StreamTokens) return int8_stream_rows<kBits, I8::kTileTokens, I8::kTileRows>(j, job, scales);
  // Prefill: the job's scales widened once; token blocks whose activations stay in the L2 cache
  // while the weight rows pass.
  const Int8Scales all = scales.rows(w, job.r0, job.R, kBits);
  constexpr int64_t kBlockBytes = 384 * 1024;
  const int64_t block = std::max<int64_t>(
      I8::kTileTokens, kBlockBytes / acts.stride / I8::kTileTokens * I8::kTileTokens);
  for (int64_t t = 0; t < job.T; t += block)
    int8_tokens<kBits, I8::kTileTokens>(j, all, t, std::min(job.T, t + block), job.R);
}

KVLM_TARGET void linear_int8_simd(const LinearRows& job, const Int8Acts& acts) {
  if (job.w->quant->bits == 4) linear_int8_simd_bits<4>(job, acts);
  else linear_int8_simd_bits<8>(job, acts);
}

}  // namespace
}  // namespace kvlm::cpu
