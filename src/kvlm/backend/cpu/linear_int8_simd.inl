// The SIMD int8 kernels of linear_int8.h, written once. Included by kernels_avx2.cpp and
// kernels_avx512.cpp after kernels_simd.inl (whose Vec and KVLM_TARGET they reuse), which first
// define
//   struct I8   the integer side of one ISA over the 16 rows of a tile: Acc (16 int32 lanes),
//               W4/load4 and W8/load8 (one 64-byte block of a tile: the same word of its 16 rows,
//               ready for the products), dot4_lo/dot4_hi/dot8 (Acc += each row's codes times the 4
//               activations at a pointer, the same for every row), set1, zero, add, to_float, the
//               token tile kTileTokens, the tiles that share a broadcast kTilesAtOnce, the token
//               count below which each token keeps two chains of products kSplitChainsBelow,
//               kSettleWords<kBits> with settle<kBits> (sums kept in narrower lanes go into Acc's
//               int32 lanes at least every kSettleWords words and before add or to_float; 0: no
//               narrower sums), and for the quantizer amax (max |x| over a multiple of 16 values)
//               and store_codes (16 integral floats stored as int8, in the 4-bit order of
//               int8_act_index when asked), and kHandTile: true where the ISA has a hand-scheduled
//               batch tile (HandTile, tile_2x8<kBits, kFetch, kParams>: int8_hand_tile says what
//               it computes).
#include <algorithm>
#include <cstdint>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/linear_int8.h"

namespace kvlm::cpu {
namespace {

struct Int8Job {
  const uint8_t* tiles;   // the weight's first tile
  int64_t tile_bytes, group_bytes, groups;
  int64_t words;          // 4-byte words per group of one row
  DType params;
  const Int8Acts* acts;
  float* y;  // output row r of token t at y[t * ldy + r - r0]
  int64_t ldy, r0;
};

// 16 scales or biases of a tile (f32, f16 or bf16) as f32.
KVLM_TARGET KVLM_INLINE Vec int8_params(const uint8_t* p, DType dtype) {
  switch (dtype) {
    case DType::kBF16: return Vec::widen_bf16(reinterpret_cast<const uint16_t*>(p));
    case DType::kF16: return Vec::widen_f16(reinterpret_cast<const uint16_t*>(p));
    default: return Vec::load(reinterpret_cast<const float*>(p));
  }
}

// Outputs of tokens t .. t+NT-1 for the 16 rows of each of NR consecutive tiles, into out[i][u]
// (row k of tile i in lane k). Each block of a tile is loaded once for all NT tokens, and each
// token's activations once for all NR tiles: with one tile, the broadcasts of the activations
// (one load per product) rather than the products bound the kernel. Below kSplitChainsBelow
// tokens, two accumulators per token (4 bits: low and high nibbles; 8 bits: even and odd words)
// halve the chains of dependent products; from there on, the tokens' chains are enough. The
// integer sums of a group are exact in any order, and each tile's float sums keep their order, so
// NR changes no output bit. `ahead` > 0 fetches the tiles that far ahead while these compute.
//
// One token fetches ahead with prefetchnta: each 16-row block is read once, so its line need not
// stay in any cache. The prefetch into L2 (prefetcht1), which a Zen 5 host preferred to
// prefetcht0, held back a core that streams for one thread alone, as each core does when the
// vCPUs sit on separate cores. Zen 4 host, 1 GB of copies, the two hints alternating in one
// process, 16 rounds, q4 and q8 at 4864 x 896, 896 x 4864 and 1152 x 896: a pool of one thread
// 19.6-23.5 -> 23.2-28.3 GB/s (faster in 6 of 6; no prefetch at all 18.1-29.1), two threads on
// one core 24.2-32.1 -> 25.1-33.4 (6 of 6). Batches fetch into L2 (prefetcht1), as the AVX-512
// hand tile does (kernels_avx512.cpp): with prefetcht0 their lines waited on memory. The AVX2
// tiles on the Zen 4 host, the binaries alternating (3 and 2 rounds): 0.5B q8 at 8 sequences
// 205-227 -> 229-251 tok/s (linears 32.0-34.7 -> 28.7-31.3 ms a step), q4 345-360 -> 367-384.
template <int NT>
KVLM_INLINE void int8_prefetch(const uint8_t* p) {
  if constexpr (NT == 1) __builtin_prefetch(p, 0, 0);
  else __builtin_prefetch(p, 0, 2);
}

// int8_tile of 2 tiles x 8 tokens from token t (a multiple of 8) on an ISA's hand-scheduled tile
// (I8::tile_2x8), which reads the tokens' scalars where Int8Acts keeps them: the same values and
// the same float operations in the same order as int8_tile.
template <int kBits, class Ops>
KVLM_TARGET void int8_hand_tile(const Int8Job& j, const uint8_t* tile, int64_t t, int64_t ahead, Vec (&out)[2][8]) {
  const Int8Acts& a = *j.acts;
  typename Ops::HandTile io;
  KVLM_UNROLL for (int i = 0; i < 2; ++i)
    KVLM_UNROLL for (int u = 0; u < 8; ++u) Vec::zero().store(io.F[i][u]);
  io.x0 = reinterpret_cast<const uint8_t*>(a.q.data() + t * a.in);
  io.in = a.in;
  io.x3 = io.x0 + 3 * a.in;
  io.x6 = io.x3 + 3 * a.in;
  io.code_bytes = j.words * 64;
  io.skip = j.group_bytes - io.code_bytes;
  io.ahead = ahead;
  io.tile_end = tile + j.tile_bytes;
  const Int8TokenGroup* tokens = a.token_tile(t);
  const Int8TokenGroup* end = tokens + j.groups;
  const auto run = [&]<int kParams>() {
    if (ahead) Ops::template tile_2x8<kBits, true, kParams>(io, tile, j.tile_bytes, tokens, end);
    else Ops::template tile_2x8<kBits, false, kParams>(io, tile, j.tile_bytes, tokens, end);
  };
  switch (j.params) {
    case DType::kBF16: run.template operator()<1>(); break;
    case DType::kF16: run.template operator()<2>(); break;
    default: run.template operator()<0>(); break;
  }
  KVLM_UNROLL for (int i = 0; i < 2; ++i)
    KVLM_UNROLL for (int u = 0; u < 8; ++u) out[i][u] = Vec::load(io.F[i][u]);
}

template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tile(const Int8Job& j, const uint8_t* tile, int64_t t, int64_t ahead, Vec (&out)[NR][NT]) {
  const Int8Acts& a = *j.acts;
  const int64_t esize = dtype_size(j.params), code_bytes = j.words * 64;
  const Vec m = Vec::set1(float(1 << (kBits - 1)));
  constexpr int kAccs = NT < I8::kSplitChainsBelow ? 2 : 1;
  constexpr int64_t kSettle = I8::template kSettleWords<kBits>;
  static_assert(kSettle % 2 == 0, "the word loop settles after pairs of words");
  Vec F[NR][NT];
  KVLM_UNROLL for (int i = 0; i < NR; ++i)
    KVLM_UNROLL for (int u = 0; u < NT; ++u) F[i][u] = Vec::zero();
  for (int64_t g = 0; g < j.groups; ++g) {
    const uint8_t* block[NR];
    KVLM_UNROLL for (int i = 0; i < NR; ++i) block[i] = tile + i * j.tile_bytes + g * j.group_bytes;
    // The stream runs through NR tiles side by side: a prefetch that passes the end of its tile
    // belongs to the next NR tiles, not to the neighbour that is being read now.
    const int64_t fetch = ahead + (g * j.group_bytes + ahead >= j.tile_bytes ? (NR - 1) * j.tile_bytes : 0);
    typename I8::Acc acc[NR][NT][kAccs];
    const int32_t* x[NT];
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      KVLM_UNROLL for (int i = 0; i < NR; ++i) {
        acc[i][u][0] = I8::set1(a.base(t + u, g));
        if constexpr (kAccs == 2) acc[i][u][1] = I8::zero();
      }
      x[u] = reinterpret_cast<const int32_t*>(a.q.data() + (t + u) * a.in) + g * j.words * (kBits == 4 ? 2 : 1);
    }
    // Two words per step (a group has at least 4): with a constant index each accumulator stays
    // in a register.
    for (int64_t w = 0; w < j.words; w += 2) {
      KVLM_UNROLL for (int h = 0; h < 2; ++h) {
        if constexpr (kBits == 4) {
          typename I8::W4 codes[NR];
          KVLM_UNROLL for (int i = 0; i < NR; ++i) {
            const uint8_t* p = block[i] + (w + h) * 64;
            if (ahead) int8_prefetch<NT>(p + fetch);
            codes[i] = I8::load4(p);
          }
          KVLM_UNROLL for (int u = 0; u < NT; ++u)
            KVLM_UNROLL for (int i = 0; i < NR; ++i) {
              acc[i][u][0] = I8::dot4_lo(acc[i][u][0], codes[i], x[u] + 2 * (w + h));
              acc[i][u][kAccs - 1] = I8::dot4_hi(acc[i][u][kAccs - 1], codes[i], x[u] + 2 * (w + h) + 1);
            }
        } else {
          typename I8::W8 codes[NR];
          KVLM_UNROLL for (int i = 0; i < NR; ++i) {
            const uint8_t* p = block[i] + (w + h) * 64;
            if (ahead) int8_prefetch<NT>(p + fetch);
            codes[i] = I8::load8(p);
          }
          KVLM_UNROLL for (int u = 0; u < NT; ++u)
            KVLM_UNROLL for (int i = 0; i < NR; ++i)
              acc[i][u][h % kAccs] = I8::dot8(acc[i][u][h % kAccs], codes[i], x[u] + w + h);
        }
      }
      if constexpr (kSettle > 0)
        if ((w + 2) % kSettle == 0 || w + 2 >= j.words)
          KVLM_UNROLL for (int i = 0; i < NR; ++i)
            KVLM_UNROLL for (int u = 0; u < NT; ++u)
              KVLM_UNROLL for (int k = 0; k < kAccs; ++k) acc[i][u][k] = I8::template settle<kBits>(acc[i][u][k]);
    }
    KVLM_UNROLL for (int i = 0; i < NR; ++i) {
      if (ahead) int8_prefetch<NT>(block[i] + code_bytes + fetch);
      const Vec s = int8_params(block[i] + code_bytes, j.params);
      const Vec b = Vec::add(int8_params(block[i] + code_bytes + 16 * esize, j.params), Vec::mul(s, m));
      KVLM_UNROLL for (int u = 0; u < NT; ++u) {
        F[i][u] = Vec::fma(b, Vec::set1(a.sx(t + u, g)), F[i][u]);
        const typename I8::Acc P = kAccs == 2 ? I8::add(acc[i][u][0], acc[i][u][kAccs - 1]) : acc[i][u][0];
        F[i][u] = Vec::fma(Vec::mul(s, Vec::set1(a.d(t + u, g))), I8::to_float(P), F[i][u]);
      }
    }
  }
  KVLM_UNROLL for (int i = 0; i < NR; ++i)
    KVLM_UNROLL for (int u = 0; u < NT; ++u) out[i][u] = F[i][u];
}

// Rows lo .. hi-1 of the job (within NR tiles from the one whose first job row is `first`) for
// tokens t .. t+NT-1.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tile_rows(const Int8Job& j, const uint8_t* tile, int64_t t, int64_t first,
                                int64_t lo, int64_t hi, int64_t ahead) {
  Vec out[NR][NT];
  if constexpr (NT == 8 && NR == 2 && I8::kHandTile) int8_hand_tile<kBits, I8>(j, tile, t, ahead, out);
  else int8_tile<kBits, NT, NR>(j, tile, t, ahead, out);
  KVLM_UNROLL for (int i = 0; i < NR; ++i) {
    const int64_t f = first + i * kInt8TileRows;
    const int64_t l = std::max(lo, f), h = std::min(hi, f + kInt8TileRows);
    KVLM_UNROLL for (int u = 0; u < NT; ++u) {
      float* y = j.y + (t + u) * j.ldy + (l - j.r0);
      if (l == f && h == f + kInt8TileRows) {
        out[i][u].store(y);
      } else {
        alignas(64) float lanes[kInt8TileRows];
        out[i][u].store(lanes);
        std::copy(lanes + (l - f), lanes + (h - f), y);
      }
    }
  }
}

// Tokens t0 .. t1-1 against NR tiles: token tiles of NT, the remainder in halving tiles. The first
// token tile prefetches ahead; the others find the tiles in the L1 or L2 cache.
template <int kBits, int NT, int NR>
KVLM_TARGET void int8_tokens_on_tiles(const Int8Job& j, const uint8_t* tile, int64_t t0, int64_t t1,
                                      int64_t first, int64_t lo, int64_t hi, int64_t ahead) {
  int64_t t = t0;
  for (; t + NT <= t1; t += NT) {
    int8_tile_rows<kBits, NT, NR>(j, tile, t, first, lo, hi, t == t0 ? ahead : 0);
  }
  if constexpr (NT > 1)
    if (t < t1) int8_tokens_on_tiles<kBits, NT / 2, NR>(j, tile, t, t1, first, lo, hi, t == t0 ? ahead : 0);
}

// Token blocks whose activations stay in the L2 cache; within a block each tile serves every token
// before the next tile is read, so decode and batched decode read the weights from memory once.
template <int kBits>
KVLM_TARGET void linear_int8_simd_bits(const LinearRows& job, const Int8Acts& acts) {
  const ops::Weight& w = *job.w;
  const int G = w.quant->group_size;
  const DType params = w.scales.dtype();
  const int64_t group_bytes = int8_group_bytes(G, kBits, params);
  Int8Job j{static_cast<const uint8_t*>(w.int8_tiles.raw()), acts.groups * group_bytes,
            group_bytes, acts.groups, int64_t(G) * kBits / 32, params, &acts, job.y, job.ldy, job.r0};
  // Prefetch distance along the tiles' stream: 8 KB rather than 2 KB read the 0.5B shape's decode
  // linears at 3.1-3.6 instead of 3.5-4.9 ms per token (q4, five interleaved rounds; q8 likewise).
  constexpr int64_t kBlockBytes = 384 * 1024, kAheadBytes = 8192;
  // Whole token tiles, so that each tile starts at a multiple of its size (the hand tile's scalars).
  const int64_t block = std::max<int64_t>(1, kBlockBytes / acts.in / I8::kTileTokens) * I8::kTileTokens;
  const int64_t first_tile = job.r0 / kInt8TileRows, end = job.r0 + job.R;
  for (int64_t t = 0; t < job.T; t += block) {
    const int64_t t1 = std::min(job.T, t + block);
    for (int64_t tile = first_tile; tile * kInt8TileRows < end;) {
      const int64_t first = tile * kInt8TileRows, lo = std::max(first, job.r0);
      const uint8_t* at = j.tiles + tile * j.tile_bytes;
      // Below 4 tokens the products do not wait on the broadcasts: one tile at a time.
      constexpr int NR = I8::kTilesAtOnce;
      if (NR > 1 && t1 - t >= 4 && (tile + NR - 1) * kInt8TileRows < end) {
        const int64_t hi = std::min(first + NR * kInt8TileRows, end);
        int8_tokens_on_tiles<kBits, I8::kTileTokens, NR>(j, at, t, t1, first, lo, hi, kAheadBytes);
        tile += NR;
      } else {
        const int64_t hi = std::min(first + kInt8TileRows, end);
        int8_tokens_on_tiles<kBits, I8::kTileTokens, 1>(j, at, t, t1, first, lo, hi, kAheadBytes);
        tile += 1;
      }
    }
  }
}

// quantize_int8_row_portable's values: the same lane sums and fold, maxima, products and rounding.
KVLM_TARGET void quantize_int8_row_simd(const float* x, int group_size, int bits, Int8Acts& a, int64_t t, int64_t g0,
                                        int64_t g1) {
  const int64_t G = group_size;
  const int32_t mid = 1 << (bits - 1);
  int8_t* q = a.q.data() + t * a.in;
  const Vec magic = Vec::set1(12582912.0f);  // round_to_int8's constant
  for (int64_t g = g0; g < g1; ++g) {
    const float* xg = x + g * G;
    Vec lanes = Vec::load(xg);
    for (int64_t c = kDotLanes; c < G; c += kDotLanes) lanes = Vec::add(lanes, Vec::load(xg + c));
    a.sx(t, g) = Vec::fold(lanes);
    const Int8Scale sc = int8_scale_of(I8::amax(xg, G));
    if (sc.d == 0.0f) {
      a.clear_group(t, g);
      continue;
    }
    const Vec inv = Vec::set1(sc.inv);
    // The codes are integers of at most 127 in magnitude, so their float sums are exact in any
    // order: one fold per group instead of an integer reduction per 16 codes.
    Vec codes = Vec::zero();
    for (int64_t c = 0; c < G; c += kDotLanes) {
      const Vec r = Vec::sub(Vec::add(Vec::mul(Vec::load(xg + c), inv), magic), magic);
      I8::store_codes(r, q + g * G + c, bits == 4);
      codes = Vec::add(codes, r);
    }
    a.base(t, g) = -mid * int32_t(Vec::fold(codes));
    a.d(t, g) = sc.d;
  }
}

KVLM_TARGET void linear_int8_simd(const LinearRows& job, const Int8Acts& acts) {
  if (job.w->quant->bits == 4) linear_int8_simd_bits<4>(job, acts);
  else linear_int8_simd_bits<8>(job, acts);
}

}  // namespace
}  // namespace kvlm::cpu
