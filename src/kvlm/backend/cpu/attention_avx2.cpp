// AVX2 row operations of attention (attention_kernels.h). Each decoder computes exactly the
// expression of its portable codec function, eight elements at a time, with separately rounded
// multiplies and adds (the project builds with -ffp-contract=off and these intrinsics have no FMA):
//   bf16 / f16 passthrough   exact widening
//   TurboQuant keys          (code + zero) * scale           (turbo_decode_key_row)
//   TurboQuant values        centroid[code] * scale          (turbo_decode_value_row_rotated)
//   MLX affine               scale * code + bias             (affine_dequantize_row)
// so attention gives the same bits with either ISA. Codes are read from the little-endian bit
// stream both codecs use eight at a time (codes8).
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

KVLM_AVX2 void accumulate(float* acc, const float* w, int group, const float* v, int d) {
  for (int g = 0; g < group; ++g) {
    float* a = acc + size_t(g) * size_t(d);
    const __m256 wg = _mm256_set1_ps(w[g]);
    for (int i = 0; i < d; i += 8)
      _mm256_storeu_ps(a + i, _mm256_add_ps(_mm256_loadu_ps(a + i),
                                            _mm256_mul_ps(wg, _mm256_loadu_ps(v + i))));
  }
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

AttentionRowOps attention_row_ops_avx2(const KVCodec& codec) {
  // Every vector loop here steps by 8; odd head dims stay portable.
  if (codec.head_dim() % 8 != 0) return attention_row_ops_portable(codec);
  const KVCodecSpec& s = codec.spec();
  switch (s.kind) {
    case KVCodecKind::kF32: return {f32_row, f32_row, accumulate};
    case KVCodecKind::kBF16: return {half_row<true>, half_row<true>, accumulate};
    case KVCodecKind::kF16: return {half_row<false>, half_row<false>, accumulate};
    case KVCodecKind::kTurbo:
      return {turbo_key_fn(s.key_bits), turbo_value_fn(s.value_bits), accumulate};
    case KVCodecKind::kAffine:
      if (const RowFn f = affine_fn(s.bits)) return {f, f, accumulate};
      break;
    default: break;
  }
  AttentionRowOps ops = attention_row_ops_portable(codec);
  ops.accumulate = accumulate;
  return ops;
}

}  // namespace kvlm::cpu
