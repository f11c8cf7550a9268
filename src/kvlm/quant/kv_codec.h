#pragma once
// KV-cache codecs: how one token's key (or value) for one kv-head is stored.
//
// Every codec is token-local: a row of head_dim values is encoded on its own into a fixed
// number of bytes (key_row_bytes() / value_row_bytes()), with groups running along head_dim.
// A KV block therefore holds plain codec bytes, one row per (token, kv-head), and every block
// operation (join, leave, share, hand to the prefix cache) is codec-agnostic.
//
// Attention reads through the codec:
//  - keys: decode_key_row() dequantizes one row into registers / a stack buffer;
//  - values: decode_value_row_rotated() yields the row in the codec's value domain; attention
//    accumulates sum_i p_i * v_i there and calls inverse_value_transform() once per output row.
//    For codecs without a value transform (rotates_values() false) the rotated row is the row
//    and the inverse is the identity, so one attention loop serves every codec.
//    This is exact up to f32 rounding because the transform is linear (and orthogonal).
//
// Per-kind behaviour lives in one table (kv_codec_traits), in the manner of dtype_traits.
// Byte layouts, bounds and deviations from the reference codecs: docs/kv-codecs.md.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "kvlm/base/half.h"
#include "kvlm/quant/turboquant_tables.h"
#include "kvlm/tensor/dtype.h"

namespace kvlm {

enum class KVCodecKind : uint8_t {
  kF32,     // passthrough
  kF16,     // passthrough, round to nearest even
  kBF16,    // passthrough, round to nearest even
  kAffine,  // MLX affine (affine.h): bits 2,3,4,5,6,8; group 32/64/128; scales in param_dtype
  kTurbo,   // TurboQuant (turboquant.h): affine keys, rotated Lloyd-Max values
  kCount
};

struct KVCodecSpec {
  KVCodecKind kind = KVCodecKind::kBF16;
  int bits = 0;                             // kAffine: code width
  int group_size = 0;                       // kAffine: values per scale/bias
  int key_bits = 0;                         // kTurbo: 2, 4, 5 or 8
  int value_bits = 0;                       // kTurbo: 2, 3, 4, 5 or 8
  DType param_dtype = DType::kBF16;         // kAffine: dtype of scales and biases (model dtype)
  TurboTables tables = TurboTables::kSeed;  // kTurbo: value codebooks
  bool operator==(const KVCodecSpec&) const = default;
};

KVCodecSpec kv_passthrough_spec(DType dtype);  // f32, f16 or bf16
KVCodecSpec kv_affine_spec(int bits, int group_size, DType param_dtype);
KVCodecSpec kv_turbo_spec(int key_bits, int value_bits, TurboTables tables = TurboTables::kSeed);

inline constexpr int kDefaultKVGroupSize = 64;
inline constexpr int kMaxKVHeadDim = 1024;

// mlx-bun's --kv-quant spellings (plus kvlm's extras):
//   off                      the exact f32 cache (kvlm's default; mlx-bun: the model dtype)
//   f32|f16|bf16             (kvlm) passthrough in that dtype
//   2|3|4|5|6|8              MLX affine, group `group_size` (0: 64), scales in the model dtype
//                            (mlx-bun accepts only 4 and 8)
//   turbo[:k<K>v<V>]         TurboQuant, default k8v3
//   ...[:gaussian]           (kvlm) exact-Gaussian value tables instead of the seed's
// group_size is --kv-group-size, 0 when not given; TurboQuant accepts only 0 or 32. "config"
// (per-layer kv_config.json) is resolved by the caller into one spec per layer. Throws Error
// naming the bad value and the accepted spellings.
KVCodecSpec parse_kv_quant(std::string_view text, int group_size, DType model_dtype);

// "bf16", "affine4g64", "turbo:k8v3", "turbo:k8v3:gaussian".
std::string kv_codec_name(const KVCodecSpec& spec);

class KVCodec;

struct KVCodecTraits {
  const char* name;     // kind name, used in messages
  bool rotates_values;  // decode_value_rotated output needs inverse_value_transform
  // Throws Error("<spec name>: ...") if the spec or head_dim is unsupported.
  void (*validate)(const KVCodecSpec&, int head_dim);
  size_t (*key_row_bytes)(const KVCodecSpec&, int head_dim);
  size_t (*value_row_bytes)(const KVCodecSpec&, int head_dim);
  void (*encode_key)(const KVCodec&, const float* x, uint8_t* row);
  void (*decode_key)(const KVCodec&, const uint8_t* row, float* out);
  void (*encode_value)(const KVCodec&, const float* x, uint8_t* row);
  void (*decode_value_rotated)(const KVCodec&, const uint8_t* row, float* out);
  void (*inverse_value_transform)(const KVCodec&, float* row);  // null when !rotates_values
};

const KVCodecTraits& kv_codec_traits(KVCodecKind kind);

// One f32/f16/bf16 value stored in a codec row (unaligned), widened to f32. Inline: attention
// reads one or two per row and group.
inline float load_kv_scalar(const uint8_t* at, DType dt) {
  if (dt == DType::kF32) {
    float v;
    std::memcpy(&v, at, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, at, 2);
  return dt == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// A validated codec for one head_dim. Cheap to copy; the row functions are const and
// thread-safe. Inputs are f32 rows holding model-dtype values; outputs are f32.
class KVCodec {
 public:
  // Throws Error naming the spec if it or head_dim is unsupported (e.g. TurboQuant at 96).
  KVCodec(const KVCodecSpec& spec, int head_dim);

  const KVCodecSpec& spec() const { return spec_; }
  int head_dim() const { return head_dim_; }
  std::string name() const { return kv_codec_name(spec_); }
  const KVCodecTraits& traits() const { return *traits_; }

  size_t key_row_bytes() const { return key_bytes_; }
  size_t value_row_bytes() const { return value_bytes_; }
  // Key plus value bytes of one token for one kv-head.
  size_t token_head_bytes() const { return key_bytes_ + value_bytes_; }

  void encode_key_row(const float* x, uint8_t* row) const { traits_->encode_key(*this, x, row); }
  void decode_key_row(const uint8_t* row, float* out) const {
    traits_->decode_key(*this, row, out);
  }
  void encode_value_row(const float* x, uint8_t* row) const {
    traits_->encode_value(*this, x, row);
  }
  // decode_value_row_rotated followed by inverse_value_transform.
  void decode_value_row(const uint8_t* row, float* out) const;

  bool rotates_values() const { return traits_->rotates_values; }
  void decode_value_row_rotated(const uint8_t* row, float* out) const {
    traits_->decode_value_rotated(*this, row, out);
  }
  // Maps a row (or any linear combination of rows) from the value domain back to model space.
  void inverse_value_transform(float* row) const {
    if (traits_->inverse_value_transform) traits_->inverse_value_transform(*this, row);
  }

  // TurboQuant data (empty / null for other kinds).
  std::span<const int8_t> signs() const { return signs_; }
  const LloydMaxTable* value_table() const { return table_; }

 private:
  KVCodecSpec spec_;
  int head_dim_;
  const KVCodecTraits* traits_;
  size_t key_bytes_, value_bytes_;
  std::span<const int8_t> signs_;
  const LloydMaxTable* table_ = nullptr;
};

}  // namespace kvlm
