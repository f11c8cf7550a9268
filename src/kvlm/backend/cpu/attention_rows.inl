// The row decoders of attention (AttentionRowOps::key and ::value), written once over a vector of
// RowVec::kWidth f32 lanes. Each computes exactly the expression of its portable codec function,
// with separately rounded multiplies and adds (the project builds with -ffp-contract=off):
//   bf16 / f16 passthrough   exact widening
//   TurboQuant keys          (code + zero) * scale           (turbo_decode_key_row)
//   TurboQuant values        centroid[code] * scale          (turbo_decode_value_row_rotated)
//   MLX affine               scale * code + bias             (affine_dequantize_row)
// so attention gives the same bits on every ISA. Included by attention_avx2.cpp and
// attention_avx512.cpp, which first define
//   KVLM_TARGET              the target attribute every function here carries,
//   struct RowVec            kWidth lanes: codes<kBits, kSigned>(stream, i) (codes i .. i+kWidth-1
//                            of a little-endian code stream as integer lanes), to_float, half<kBF16>
//                            (kWidth bf16 or f16 values widened), set1, add, mul, store,
//   CentroidLookup<kBits>    centroid[code] for kWidth integer code lanes.
#include <cstring>

#include "kvlm/base/half.h"
#include "kvlm/quant/turboquant.h"

namespace kvlm::cpu {
namespace {

float load_f16(const uint8_t* at) {
  uint16_t h;
  std::memcpy(&h, at, 2);
  return f16_to_f32(h);
}

const float* f32_row(const KVCodec&, const uint8_t* row, float*) {
  return reinterpret_cast<const float*>(row);
}

template <bool kBF16>
KVLM_TARGET const float* half_row(const KVCodec& c, const uint8_t* row, float* buf) {
  for (int i = 0; i < c.head_dim(); i += RowVec::kWidth) RowVec::template half<kBF16>(row + 2 * i).store(buf + i);
  return buf;
}

template <int kBits>
KVLM_TARGET const float* turbo_key_row(const KVCodec& c, const uint8_t* row, float* buf) {
  const int d = c.head_dim(), groups = d / kTurboGroupSize;
  const uint8_t* scales = row + size_t(d) * kBits / 8;
  const uint8_t* zeros = scales + size_t(groups) * 2;
  for (int g = 0; g < groups; ++g) {
    const RowVec scale = RowVec::set1(load_f16(scales + 2 * g));
    const RowVec zero = RowVec::set1(load_f16(zeros + 2 * g));
    for (int i = g * kTurboGroupSize; i < (g + 1) * kTurboGroupSize; i += RowVec::kWidth) {
      const RowVec code = RowVec::to_float(RowVec::template codes<kBits, kBits == 8>(row, i));
      RowVec::mul(RowVec::add(code, zero), scale).store(buf + i);
    }
  }
  return buf;
}

template <int kBits>
KVLM_TARGET const float* turbo_value_row(const KVCodec& c, const uint8_t* row, float* buf) {
  const int d = c.head_dim(), groups = d / kTurboGroupSize;
  const uint8_t* scales = row + size_t(d) * kBits / 8;
  const CentroidLookup<kBits> centroid(c.value_table()->centroids.data());
  for (int g = 0; g < groups; ++g) {
    const RowVec scale = RowVec::set1(load_f16(scales + 2 * g));
    for (int i = g * kTurboGroupSize; i < (g + 1) * kTurboGroupSize; i += RowVec::kWidth)
      RowVec::mul(centroid(RowVec::template codes<kBits>(row, i)), scale).store(buf + i);
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
    const RowVec scale = RowVec::set1(load_kv_scalar(scales + size_t(g) * psize, s.param_dtype));
    const RowVec bias = RowVec::set1(load_kv_scalar(biases + size_t(g) * psize, s.param_dtype));
    for (int i = g * s.group_size; i < (g + 1) * s.group_size; i += RowVec::kWidth) {
      const RowVec code = RowVec::to_float(RowVec::template codes<kBits>(row, i));
      RowVec::add(RowVec::mul(scale, code), bias).store(buf + i);
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

// Replaces ops' key and value decoders with this ISA's for the codec (head_dim a multiple of
// kWidth); codecs without one here keep what ops had.
void use_row_decoders(const KVCodec& codec, AttentionRowOps& ops) {
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
}

}  // namespace
}  // namespace kvlm::cpu
