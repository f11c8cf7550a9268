// AVX-512 operations of attention: the block kernels (attention_blocks.inl), where one 16-lane
// accumulator is one zmm register, so a key block's 16 score accumulators and the value loop's
// accumulators stay in registers; and row decoders 16 elements at a time with exactly the
// expressions of the AVX2 ones (attention_avx2.cpp lists them), so every ISA gives the same bits.
// GCC 12 reports false "uninitialized __Y" warnings inside its own AVX-512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "kvlm/backend/cpu/attention_kernels.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/turboquant.h"

#define KVLM_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

namespace kvlm::cpu {
namespace {

struct Lanes {
  __m512 v;

  static KVLM_TARGET Lanes zero() { return {_mm512_setzero_ps()}; }
  static KVLM_TARGET Lanes load(const float* p) { return {_mm512_loadu_ps(p)}; }
  KVLM_TARGET void store(float* p) const { _mm512_storeu_ps(p, v); }
  static KVLM_TARGET Lanes set1(float x) { return {_mm512_set1_ps(x)}; }
  static KVLM_TARGET Lanes fma(Lanes a, Lanes b, Lanes acc) { return {_mm512_fmadd_ps(a.v, b.v, acc.v)}; }
  static KVLM_TARGET Lanes add(Lanes a, Lanes b) { return {_mm512_add_ps(a.v, b.v)}; }
  static KVLM_TARGET Lanes mul(Lanes a, Lanes b) { return {_mm512_mul_ps(a.v, b.v)}; }

  // The fold of 16 accumulators, each step adding the halves of several rows at once:
  //   k + k+8: 256-bit halves of rows 2p, 2p+1 gathered into two registers and added;
  //   k + k+4: 128-bit quarters of four rows likewise (a register then holds 4 rows);
  //   k + k+2, k + k+1: shuffles within 128-bit lanes pair up two registers (8, then 16 rows).
  // The result holds row 4m + L in element 4L + m; one permute restores row order.
  static KVLM_TARGET void reduce16(const Lanes (&acc)[16], float* out) {
    __m512 b[8], c[4], d[2];
    #pragma GCC unroll 16
    for (int p = 0; p < 8; ++p)
      b[p] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * p].v, acc[2 * p + 1].v, 0x44),
                           _mm512_shuffle_f32x4(acc[2 * p].v, acc[2 * p + 1].v, 0xEE));
    #pragma GCC unroll 16
    for (int q = 0; q < 4; ++q)
      c[q] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], 0x88),
                           _mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], 0xDD));
    #pragma GCC unroll 16
    for (int s = 0; s < 2; ++s)
      d[s] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(c[2 * s], c[2 * s + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, e));
  }
};

// 32 zmm registers: 12 accumulators (3 heads x 4 slices), 4 value slices, the rest for weights.
constexpr int kValueTile = 12;

float load_f16(const uint8_t* at) {
  uint16_t h;
  std::memcpy(&h, at, 2);
  return f16_to_f32(h);
}

template <bool kBF16>
KVLM_TARGET const float* half_row(const KVCodec& c, const uint8_t* row, float* buf) {
  for (int i = 0; i < c.head_dim(); i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i));
    const __m512 f = kBF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                           : _mm512_cvtph_ps(h);
    _mm512_storeu_ps(buf + i, f);
  }
  return buf;
}

// Codes i .. i+15 (i a multiple of 16) of a row's little-endian code stream as 16 32-bit lanes.
// Their 2*kBits bytes are loaded exactly (masked), copied to every 128-bit lane, and each lane
// picks the two bytes holding its code with a byte shuffle, then shifts and masks it out.
template <int kBits, bool kSigned = false>
KVLM_TARGET inline __m512i codes16(const uint8_t* stream, int i) {
  if constexpr (kBits == 8) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(stream + i));
    return kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
  } else {
    alignas(64) static constexpr auto kPick = [] {
      struct { int8_t bytes[64]; int32_t shifts[16]; } t{};
      for (int c = 0; c < 16; ++c) {
        const int bit = c * kBits;
        t.bytes[4 * c] = int8_t(bit / 8);
        t.bytes[4 * c + 1] = int8_t(bit / 8 + 1);  // byte 2*kBits at most: loaded as zero
        t.bytes[4 * c + 2] = t.bytes[4 * c + 3] = int8_t(0x80);  // zero
        t.shifts[c] = bit % 8;
      }
      return t;
    }();
    const __m128i b = _mm_maskz_loadu_epi8(__mmask16((1u << (2 * kBits)) - 1), stream + i / 8 * kBits);
    const __m512i pairs = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(b), _mm512_load_si512(kPick.bytes));
    return _mm512_and_si512(_mm512_srlv_epi32(pairs, _mm512_load_si512(kPick.shifts)),
                            _mm512_set1_epi32((1 << kBits) - 1));
  }
}

template <int kBits>
KVLM_TARGET const float* turbo_key_row(const KVCodec& c, const uint8_t* row, float* buf) {
  const int d = c.head_dim(), groups = d / kTurboGroupSize;
  const uint8_t* scales = row + size_t(d) * kBits / 8;
  const uint8_t* zeros = scales + size_t(groups) * 2;
  for (int g = 0; g < groups; ++g) {
    const __m512 scale = _mm512_set1_ps(load_f16(scales + 2 * g));
    const __m512 zero = _mm512_set1_ps(load_f16(zeros + 2 * g));
    for (int i = g * kTurboGroupSize; i < (g + 1) * kTurboGroupSize; i += 16) {
      const __m512 code = _mm512_cvtepi32_ps(codes16<kBits, kBits == 8>(row, i));
      _mm512_storeu_ps(buf + i, _mm512_mul_ps(_mm512_add_ps(code, zero), scale));
    }
  }
  return buf;
}

// centroid[code] for 16 codes: up to 32 centroids are selected by permutes from registers,
// wider tables gathered.
template <int kBits>
struct CentroidLookup {
  const float* table;
  __m512 lo, hi;  // centroids 0..15 and 16..31 (bits <= 5)

  KVLM_TARGET explicit CentroidLookup(const float* centroids) : table(centroids) {
    if constexpr (kBits <= 5) {
      alignas(64) float t[32] = {};
      for (int i = 0; i < (1 << kBits); ++i) t[i] = centroids[i];
      lo = _mm512_load_ps(t);
      hi = _mm512_load_ps(t + 16);
    }
  }
  KVLM_TARGET __m512 operator()(__m512i code) const {
    if constexpr (kBits <= 4) return _mm512_permutexvar_ps(code, lo);
    if constexpr (kBits == 5) return _mm512_permutex2var_ps(lo, code, hi);
    return _mm512_i32gather_ps(code, table, 4);
  }
};

template <int kBits>
KVLM_TARGET const float* turbo_value_row(const KVCodec& c, const uint8_t* row, float* buf) {
  const int d = c.head_dim(), groups = d / kTurboGroupSize;
  const uint8_t* scales = row + size_t(d) * kBits / 8;
  const CentroidLookup<kBits> centroid(c.value_table()->centroids.data());
  for (int g = 0; g < groups; ++g) {
    const __m512 scale = _mm512_set1_ps(load_f16(scales + 2 * g));
    for (int i = g * kTurboGroupSize; i < (g + 1) * kTurboGroupSize; i += 16)
      _mm512_storeu_ps(buf + i, _mm512_mul_ps(centroid(codes16<kBits>(row, i)), scale));
  }
  return buf;
}

template <int kBits>
KVLM_TARGET const float* affine_row(const KVCodec& c, const uint8_t* row, float* buf) {
  const KVCodecSpec& s = c.spec();
  const int d = c.head_dim(), groups = d / s.group_size;
  const size_t psize = dtype_size(s.param_dtype);
  const uint8_t* scales = row + size_t(d) * kBits / 8;
  const uint8_t* biases = scales + size_t(groups) * psize;
  for (int g = 0; g < groups; ++g) {
    const __m512 scale = _mm512_set1_ps(load_kv_scalar(scales + size_t(g) * psize, s.param_dtype));
    const __m512 bias = _mm512_set1_ps(load_kv_scalar(biases + size_t(g) * psize, s.param_dtype));
    for (int i = g * s.group_size; i < (g + 1) * s.group_size; i += 16) {
      const __m512 code = _mm512_cvtepi32_ps(codes16<kBits>(row, i));
      _mm512_storeu_ps(buf + i, _mm512_add_ps(_mm512_mul_ps(scale, code), bias));
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
    default: return nullptr;  // 6-bit: MLX packs 4 codes in 3 bytes, left to AVX2 / the codec
  }
}

}  // namespace
}  // namespace kvlm::cpu

#include "kvlm/backend/cpu/attention_blocks.inl"

namespace kvlm::cpu {

AttentionRowOps attention_row_ops_avx512(const KVCodec& codec) {
  AttentionRowOps ops = attention_row_ops_avx2(codec);
  // Every loop here steps by 16; other head dims keep the AVX2 / portable operations.
  if (codec.head_dim() % 16 != 0) return ops;
  ops.score_block = score_block_simd;
  ops.accumulate_block = accumulate_block_simd;
  const KVCodecSpec& s = codec.spec();
  switch (s.kind) {
    case KVCodecKind::kBF16: ops.key = ops.value = half_row<true>; break;
    case KVCodecKind::kF16: ops.key = ops.value = half_row<false>; break;
    case KVCodecKind::kTurbo:
      ops.key = turbo_key_fn(s.key_bits);
      ops.value = turbo_value_fn(s.value_bits);
      break;
    case KVCodecKind::kAffine:
      if (const RowFn f = affine_fn(s.bits)) ops.key = ops.value = f;
      break;
    default: break;  // f32 rows are read in place
  }
  return ops;
}

}  // namespace kvlm::cpu
