// AVX2 row operations of attention (attention_kernels.h). Each decoder computes exactly the
// expression of its portable codec function, eight elements at a time, with separately rounded
// multiplies and adds (the project builds with -ffp-contract=off and these intrinsics have no FMA):
//   bf16 / f16 passthrough   exact widening
//   TurboQuant keys          (code + zero) * scale           (turbo_decode_key_row)
//   TurboQuant values        centroid[code] * scale          (turbo_decode_value_row_rotated)
//   MLX affine               scale * code + bias             (affine_dequantize_row)
// so attention gives the same bits with either ISA. Codes are read from the little-endian bit
// stream both codecs use eight at a time (codes8). The block kernels (attention_blocks.inl) run
// here on 16 lanes held as two ymm registers.
#include <immintrin.h>

#include <cstring>

#include "kvlm/backend/cpu/attention_kernels.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/turboquant.h"

namespace kvlm::cpu {
namespace {

#define KVLM_AVX2 __attribute__((target("avx2,f16c")))

float load_f16(const uint8_t* at) {
  uint16_t h;
  std::memcpy(&h, at, 2);
  return f16_to_f32(h);
}

KVLM_AVX2 const float* f32_row(const KVCodec&, const uint8_t* row, float*) {
  return reinterpret_cast<const float*>(row);
}

template <bool kBF16>
KVLM_AVX2 const float* half_row(const KVCodec& c, const uint8_t* row, float* buf) {
  for (int i = 0; i < c.head_dim(); i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    const __m256 f = kBF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                           : _mm256_cvtph_ps(h);
    _mm256_storeu_ps(buf + i, f);
  }
  return buf;
}

// Codes i .. i+7 (i a multiple of 8) of a row's little-endian code stream, as eight 32-bit
// lanes: 8-bit codes are bytes (signed for TurboQuant keys); narrower ones occupy kBits bytes per
// eight codes, which are read exactly (never past the codes) and split by variable shifts.
template <int kBits, bool kSigned = false>
KVLM_AVX2 inline __m256i codes8(const uint8_t* stream, int i) {
  if constexpr (kBits == 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(stream + i));
    return kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
  } else {
    // Assembled from single bytes: a kBits-byte memcpy into a wider variable stalled on store
    // forwarding for the odd widths (3, 5), costing several times the whole row.
    const uint8_t* at = stream + i / 8 * kBits;
    uint64_t v = 0;
    for (int b = 0; b < kBits; ++b) v |= uint64_t(at[b]) << (8 * b);
    const int lo = int(uint32_t(v)), hi = int(uint32_t(v >> (4 * kBits)));
    const __m256i words = _mm256_set_epi32(hi, hi, hi, hi, lo, lo, lo, lo);
    const __m256i shifts = _mm256_set_epi32(3 * kBits, 2 * kBits, kBits, 0, 3 * kBits, 2 * kBits, kBits, 0);
    return _mm256_and_si256(_mm256_srlv_epi32(words, shifts), _mm256_set1_epi32((1 << kBits) - 1));
  }
}

template <int kBits>
KVLM_AVX2 const float* turbo_key_row(const KVCodec& c, const uint8_t* row, float* buf) {
  const int d = c.head_dim(), groups = d / kTurboGroupSize;
  const uint8_t* scales = row + size_t(d) * kBits / 8;
  const uint8_t* zeros = scales + size_t(groups) * 2;
  for (int g = 0; g < groups; ++g) {
    const __m256 scale = _mm256_set1_ps(load_f16(scales + 2 * g));
    const __m256 zero = _mm256_set1_ps(load_f16(zeros + 2 * g));
    for (int i = g * kTurboGroupSize; i < (g + 1) * kTurboGroupSize; i += 8) {
      const __m256 code = _mm256_cvtepi32_ps(codes8<kBits, kBits == 8>(row, i));
      _mm256_storeu_ps(buf + i, _mm256_mul_ps(_mm256_add_ps(code, zero), scale));
    }
  }
  return buf;
}

// centroid[code] for eight codes. Up to 16 centroids stay in registers and are selected with
// permutes (a gather costs tens of cycles on some cores); wider tables are gathered.
template <int kBits>
struct CentroidLookup {
  const float* table;
  __m256 lo, hi;  // centroids 0..7 and 8..15 (bits <= 4)

  KVLM_AVX2 explicit CentroidLookup(const float* centroids) : table(centroids) {
    if constexpr (kBits <= 4) {
      alignas(32) float t[16] = {};
      for (int i = 0; i < (1 << kBits); ++i) t[i] = centroids[i];
      lo = _mm256_load_ps(t);
      hi = _mm256_load_ps(t + 8);
    }
  }
  KVLM_AVX2 __m256 operator()(__m256i code) const {
    if constexpr (kBits <= 3) return _mm256_permutevar8x32_ps(lo, code);
    if constexpr (kBits == 4) {
      // permutevar8x32 uses the low 3 bits of each index; bit 3 picks the upper eight.
      const __m256 upper = _mm256_castsi256_ps(_mm256_slli_epi32(code, 28));
      return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, code),
                              _mm256_permutevar8x32_ps(hi, code), upper);
    }
    return _mm256_i32gather_ps(table, code, 4);
  }
};

template <int kBits>
KVLM_AVX2 const float* turbo_value_row(const KVCodec& c, const uint8_t* row, float* buf) {
  const int d = c.head_dim(), groups = d / kTurboGroupSize;
  const uint8_t* scales = row + size_t(d) * kBits / 8;
  const CentroidLookup<kBits> centroid(c.value_table()->centroids.data());
  for (int g = 0; g < groups; ++g) {
    const __m256 scale = _mm256_set1_ps(load_f16(scales + 2 * g));
    for (int i = g * kTurboGroupSize; i < (g + 1) * kTurboGroupSize; i += 8)
      _mm256_storeu_ps(buf + i, _mm256_mul_ps(centroid(codes8<kBits>(row, i)), scale));
  }
  return buf;
}

template <int kBits>
KVLM_AVX2 const float* affine_row(const KVCodec& c, const uint8_t* row, float* buf) {
  const KVCodecSpec& s = c.spec();
  const int d = c.head_dim(), groups = d / s.group_size;
  const size_t psize = dtype_size(s.param_dtype);
  const uint8_t* scales = row + size_t(d) * kBits / 8;
  const uint8_t* biases = scales + size_t(groups) * psize;
  for (int g = 0; g < groups; ++g) {
    const __m256 scale = _mm256_set1_ps(load_kv_scalar(scales + size_t(g) * psize, s.param_dtype));
    const __m256 bias = _mm256_set1_ps(load_kv_scalar(biases + size_t(g) * psize, s.param_dtype));
    for (int i = g * s.group_size; i < (g + 1) * s.group_size; i += 8) {
      const __m256 code = _mm256_cvtepi32_ps(codes8<kBits>(row, i));
      _mm256_storeu_ps(buf + i, _mm256_add_ps(_mm256_mul_ps(scale, code), bias));
    }
  }
  return buf;
}

using RowFn = const float* (*)(const KVCodec&, const uint8_t*, float*);

RowFn turbo_key_fn(int bits) {
  switch (bits) {
    case 2: return turbo_key_row<2>;
    case 4: return turbo_key_row<4>;
    case 5: return turbo_key_row<5>;
    default: return turbo_key_row<8>;
  }
}

RowFn turbo_value_fn(int bits) {
  switch (bits) {
    case 2: return turbo_value_row<2>;
    case 3: return turbo_value_row<3>;
    case 4: return turbo_value_row<4>;
    case 5: return turbo_value_row<5>;
    default: return turbo_value_row<8>;
  }
}

RowFn affine_fn(int bits) {
  switch (bits) {
    case 2: return affine_row<2>;
    case 3: return affine_row<3>;
    case 4: return affine_row<4>;
    case 5: return affine_row<5>;
    case 8: return affine_row<8>;
    default: return nullptr;  // 6-bit: MLX packs 4 codes in 3 bytes, left to the codec
  }
}

}  // namespace

// 16 lanes as two ymm registers for the block kernels.
#define KVLM_TARGET __attribute__((target("avx2,fma,f16c")))

namespace {

struct Lanes {
  __m256 lo, hi;

  static KVLM_TARGET Lanes zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static KVLM_TARGET Lanes load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  KVLM_TARGET void store(float* p) const { _mm256_storeu_ps(p, lo), _mm256_storeu_ps(p + 8, hi); }
  static KVLM_TARGET Lanes set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static KVLM_TARGET Lanes fma(Lanes a, Lanes b, Lanes acc) {
    return {_mm256_fmadd_ps(a.lo, b.lo, acc.lo), _mm256_fmadd_ps(a.hi, b.hi, acc.hi)};
  }
  static KVLM_TARGET Lanes add(Lanes a, Lanes b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static KVLM_TARGET Lanes mul(Lanes a, Lanes b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }

  // The fold of 16 accumulators, each step adding two rows' halves at once:
  //   k + k+8: lo + hi, one row per register;
  //   k + k+4: 128-bit halves of rows 2p, 2p+1 side by side, added (a register holds 2 rows);
  //   k + k+2, k + k+1: shuffles within 128-bit lanes pair up two registers (4, then 8 rows).
  // Register e[t] then holds row 8t + 2m + L in element 4L + m; one permute restores row order.
  static KVLM_TARGET void reduce16(const Lanes (&acc)[16], float* out) {
    __m256 b[16], c[8], d[4];
    #pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) b[r] = _mm256_add_ps(acc[r].lo, acc[r].hi);
    #pragma GCC unroll 16
    for (int p = 0; p < 8; ++p)
      c[p] = _mm256_add_ps(_mm256_permute2f128_ps(b[2 * p], b[2 * p + 1], 0x20),
                           _mm256_permute2f128_ps(b[2 * p], b[2 * p + 1], 0x31));
    #pragma GCC unroll 16
    for (int s = 0; s < 4; ++s)
      d[s] = _mm256_add_ps(_mm256_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm256_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    #pragma GCC unroll 16
    for (int t = 0; t < 2; ++t) {
      const __m256 e = _mm256_add_ps(_mm256_shuffle_ps(d[2 * t], d[2 * t + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm256_shuffle_ps(d[2 * t], d[2 * t + 1], _MM_SHUFFLE(3, 1, 3, 1)));
      _mm256_storeu_ps(out + 8 * t, _mm256_permutevar8x32_ps(e, order));
    }
  }
};

// 16 ymm registers: 4 accumulators of two registers each (one head x 4 slices), the rest for
// value slices and the weight.
constexpr int kValueTile = 4;

}  // namespace
}  // namespace kvlm::cpu

#include "kvlm/backend/cpu/attention_blocks.inl"

namespace kvlm::cpu {

AttentionRowOps attention_row_ops_avx2(const KVCodec& codec) {
  // Every vector loop here steps by 8; odd head dims stay portable.
  if (codec.head_dim() % 8 != 0) return attention_row_ops_portable(codec);
  AttentionRowOps ops = attention_row_ops_portable(codec);
  const KVCodecSpec& s = codec.spec();
  switch (s.kind) {
    case KVCodecKind::kF32: ops.key = ops.value = f32_row; break;
    case KVCodecKind::kBF16: ops.key = ops.value = half_row<true>; break;
    case KVCodecKind::kF16: ops.key = ops.value = half_row<false>; break;
    case KVCodecKind::kTurbo:
      ops.key = turbo_key_fn(s.key_bits);
      ops.value = turbo_value_fn(s.value_bits);
      break;
    case KVCodecKind::kAffine:
      if (const RowFn f = affine_fn(s.bits)) ops.key = ops.value = f;
      break;
    default: break;
  }
  if (codec.head_dim() % 16 == 0) {
    ops.score_block = score_block_simd;
    ops.accumulate_block = accumulate_block_simd;
  }
  return ops;
}

}  // namespace kvlm::cpu
