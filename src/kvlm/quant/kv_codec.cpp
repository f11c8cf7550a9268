// KV codecs: the traits table and the per-kind row functions (see kv_codec.h).
//
// Affine rows reuse affine.h's MLX rule unchanged; their bytes are the MLX packed words
// (little-endian uint32, which is the same little-endian bit stream TurboQuant uses), then the
// scales, then the biases, each in param_dtype. TurboQuant rows are turboquant.h's.
#include "kvlm/quant/kv_codec.h"

#include <bit>
#include <charconv>
#include <cstring>

#include "kvlm/base/error.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/affine.h"
#include "kvlm/quant/turboquant.h"

namespace kvlm {

static_assert(std::endian::native == std::endian::little,
              "KV codec rows are little-endian byte streams; a big-endian host would need swaps");

namespace {

[[noreturn]] void fail(const KVCodecSpec& spec, const std::string& why) {
  throw Error("KV codec " + kv_codec_name(spec) + ": " + why);
}

void check_head_dim_range(const KVCodecSpec& spec, int head_dim) {
  if (head_dim < 1 || head_dim > kMaxKVHeadDim)
    fail(spec, "head_dim=" + std::to_string(head_dim) + " is outside 1.." +
                   std::to_string(kMaxKVHeadDim));
}

// --- f32 / f16 / bf16 scalars in row bytes (no alignment assumed) ---

void store_scalar(uint8_t* at, float v, DType dt) {
  switch (dt) {
    case DType::kF32: std::memcpy(at, &v, 4); return;
    case DType::kF16: {
      const uint16_t h = f32_to_f16(v);
      std::memcpy(at, &h, 2);
      return;
    }
    default: {
      const uint16_t h = f32_to_bf16(v);
      std::memcpy(at, &h, 2);
      return;
    }
  }
}


float round_to(float v, DType dt) {
  return dt == DType::kF32   ? v
         : dt == DType::kF16 ? f16_to_f32(f32_to_f16(v))
                             : bf16_to_f32(f32_to_bf16(v));
}

// --- passthrough ---

// Bytes of one passthrough value, known at compile time: the row loops then compile to plain
// copies and conversions (dtype_size() is a table lookup behind a call, and a decode step's
// kv_write spent most of its time in one call per value).
template <DType kDt>
constexpr size_t kPassBytes = kDt == DType::kF32 ? 4 : 2;

template <DType kDt>
void pass_validate(const KVCodecSpec& spec, int head_dim) {
  check_head_dim_range(spec, head_dim);
}
template <DType kDt>
size_t pass_bytes(const KVCodecSpec&, int head_dim) {
  return size_t(head_dim) * kPassBytes<kDt>;
}
template <DType kDt>
void pass_encode(const KVCodec& c, const float* x, uint8_t* row) {
  if constexpr (kDt == DType::kF32) {
    std::memcpy(row, x, size_t(c.head_dim()) * 4);
  } else {
    for (int i = 0; i < c.head_dim(); ++i) store_scalar(row + size_t(i) * kPassBytes<kDt>, x[i], kDt);
  }
}
template <DType kDt>
void pass_decode(const KVCodec& c, const uint8_t* row, float* out) {
  for (int i = 0; i < c.head_dim(); ++i) out[i] = load_kv_scalar(row + size_t(i) * kPassBytes<kDt>, kDt);
}

template <DType kDt>
constexpr KVCodecTraits passthrough_traits(const char* name) {
  return {.name = name,
          .rotates_values = false,
          .validate = pass_validate<kDt>,
          .key_row_bytes = pass_bytes<kDt>,
          .value_row_bytes = pass_bytes<kDt>,
          .encode_key = pass_encode<kDt>,
          .decode_key = pass_decode<kDt>,
          .encode_value = pass_encode<kDt>,
          .decode_value_rotated = pass_decode<kDt>,
          .inverse_value_transform = nullptr};
}

// --- MLX affine ---

AffineSpec affine_of(const KVCodecSpec& s) { return {s.bits, s.group_size}; }

size_t affine_code_bytes(const KVCodecSpec& s, int head_dim) {
  return size_t(head_dim) * size_t(s.bits) / 8;
}

void affine_validate(const KVCodecSpec& spec, int head_dim) {
  check_head_dim_range(spec, head_dim);
  if (!affine_spec_supported(affine_of(spec)))
    fail(spec, "unsupported bits=" + std::to_string(spec.bits) +
                   " group_size=" + std::to_string(spec.group_size) +
                   " (bits must be 2, 3, 4, 5, 6 or 8; group_size 32, 64 or 128)");
  if (head_dim % spec.group_size != 0)
    fail(spec, "head_dim=" + std::to_string(head_dim) + " is not a multiple of group_size " +
                   std::to_string(spec.group_size));
  const DType p = spec.param_dtype;
  if (p != DType::kF32 && p != DType::kF16 && p != DType::kBF16)
    fail(spec, std::string("scale dtype must be f32, f16 or bf16, not ") + dtype_name(p));
}

size_t affine_bytes(const KVCodecSpec& s, int head_dim) {
  const size_t groups = size_t(head_dim / s.group_size);
  return affine_code_bytes(s, head_dim) + 2 * groups * dtype_size(s.param_dtype);
}

// The row is rounded to param_dtype first: MLX quantizes the model-dtype tensor, and the rule
// (affine_quantize_row) expects representable inputs.
void affine_encode(const KVCodec& c, const float* x, uint8_t* row) {
  const KVCodecSpec& s = c.spec();
  const int d = c.head_dim();
  float xr[kMaxKVHeadDim], scales[kMaxKVHeadDim / 32], biases[kMaxKVHeadDim / 32];
  uint32_t packed[kMaxKVHeadDim * 8 / 32];
  for (int i = 0; i < d; ++i) xr[i] = round_to(x[i], s.param_dtype);
  affine_quantize_row(xr, d, affine_of(s), s.param_dtype, packed, scales, biases);
  const size_t code_bytes = affine_code_bytes(s, d), psize = dtype_size(s.param_dtype);
  const int groups = d / s.group_size;
  std::memcpy(row, packed, code_bytes);
  for (int g = 0; g < groups; ++g) {
    store_scalar(row + code_bytes + size_t(g) * psize, scales[g], s.param_dtype);
    store_scalar(row + code_bytes + size_t(groups + g) * psize, biases[g], s.param_dtype);
  }
}

void affine_decode(const KVCodec& c, const uint8_t* row, float* out) {
  const KVCodecSpec& s = c.spec();
  const int d = c.head_dim();
  float scales[kMaxKVHeadDim / 32], biases[kMaxKVHeadDim / 32];
  uint32_t packed[kMaxKVHeadDim * 8 / 32];
  const size_t code_bytes = affine_code_bytes(s, d), psize = dtype_size(s.param_dtype);
  const int groups = d / s.group_size;
  std::memcpy(packed, row, code_bytes);  // the row may not be 4-byte aligned
  for (int g = 0; g < groups; ++g) {
    scales[g] = load_kv_scalar(row + code_bytes + size_t(g) * psize, s.param_dtype);
    biases[g] = load_kv_scalar(row + code_bytes + size_t(groups + g) * psize, s.param_dtype);
  }
  affine_dequantize_row(packed, scales, biases, d, affine_of(s), out);
}

constexpr KVCodecTraits kAffineTraits = {.name = "affine",
                                         .rotates_values = false,
                                         .validate = affine_validate,
                                         .key_row_bytes = affine_bytes,
                                         .value_row_bytes = affine_bytes,
                                         .encode_key = affine_encode,
                                         .decode_key = affine_decode,
                                         .encode_value = affine_encode,
                                         .decode_value_rotated = affine_decode,
                                         .inverse_value_transform = nullptr};

// --- TurboQuant ---

void turbo_validate(const KVCodecSpec& spec, int head_dim) {
  if (!turbo_key_bits_supported(spec.key_bits))
    fail(spec, "unsupported key bits " + std::to_string(spec.key_bits) +
                   " (TurboQuant keys take 2, 4, 5 or 8 bits)");
  if (!turbo_value_bits_supported(spec.value_bits))
    fail(spec, "unsupported value bits " + std::to_string(spec.value_bits) +
                   " (TurboQuant values take 2, 3, 4, 5 or 8 bits)");
  check_turbo_head_dim(head_dim, "KV codec " + kv_codec_name(spec));
}

size_t turbo_key_bytes(const KVCodecSpec& s, int head_dim) {
  return turbo_key_row_bytes(head_dim, s.key_bits);
}
size_t turbo_value_bytes(const KVCodecSpec& s, int head_dim) {
  return turbo_value_row_bytes(head_dim, s.value_bits);
}
void turbo_encode_key(const KVCodec& c, const float* x, uint8_t* row) {
  turbo_encode_key_row(x, c.head_dim(), c.spec().key_bits, row);
}
void turbo_decode_key(const KVCodec& c, const uint8_t* row, float* out) {
  turbo_decode_key_row(row, c.head_dim(), c.spec().key_bits, out);
}
void turbo_encode_value(const KVCodec& c, const float* x, uint8_t* row) {
  turbo_encode_value_row(x, c.signs(), *c.value_table(), row);
}
void turbo_decode_value_rotated(const KVCodec& c, const uint8_t* row, float* out) {
  turbo_decode_value_row_rotated(row, c.head_dim(), *c.value_table(), out);
}
void turbo_inverse(const KVCodec& c, float* row) { turbo_unrotate(row, c.signs()); }

constexpr KVCodecTraits kTurboTraits = {.name = "turbo",
                                        .rotates_values = true,
                                        .validate = turbo_validate,
                                        .key_row_bytes = turbo_key_bytes,
                                        .value_row_bytes = turbo_value_bytes,
                                        .encode_key = turbo_encode_key,
                                        .decode_key = turbo_decode_key,
                                        .encode_value = turbo_encode_value,
                                        .decode_value_rotated = turbo_decode_value_rotated,
                                        .inverse_value_transform = turbo_inverse};

constexpr KVCodecTraits kTraits[size_t(KVCodecKind::kCount)] = {
    passthrough_traits<DType::kF32>("f32"), passthrough_traits<DType::kF16>("f16"),
    passthrough_traits<DType::kBF16>("bf16"), kAffineTraits, kTurboTraits};

// --- parsing ---

constexpr const char* kSpellings =
    "expected off, f32, f16, bf16, 2, 3, 4, 5, 6, 8, turbo or turbo:k<bits>v<bits>, optionally "
    "followed by :gaussian for turbo";

[[noreturn]] void bad_value(std::string_view text) {
  throw Error("--kv-quant: unknown value '" + std::string(text) + "' (" + kSpellings + ")");
}

// Parses a whole unsigned decimal integer, or returns false.
bool parse_int(std::string_view s, int* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// "k<K>v<V>" -> key and value bits.
bool parse_turbo_bits(std::string_view s, int* key_bits, int* value_bits) {
  if (s.size() < 4 || s[0] != 'k') return false;
  const size_t v = s.find('v');
  if (v == std::string_view::npos) return false;
  return parse_int(s.substr(1, v - 1), key_bits) && parse_int(s.substr(v + 1), value_bits);
}

KVCodecSpec parse_turbo(std::string_view text, std::string_view rest, int group_size) {
  if (group_size != 0 && group_size != kTurboGroupSize)
    throw Error("--kv-group-size " + std::to_string(group_size) +
                ": TurboQuant groups are fixed at 32 elements");
  KVCodecSpec spec = kv_turbo_spec(8, 3);
  if (rest.ends_with(":gaussian")) {
    spec.tables = TurboTables::kGaussian;
    rest.remove_suffix(9);
  }
  if (!rest.empty()) {
    if (rest[0] != ':' || !parse_turbo_bits(rest.substr(1), &spec.key_bits, &spec.value_bits))
      bad_value(text);
  }
  if (!turbo_key_bits_supported(spec.key_bits) || !turbo_value_bits_supported(spec.value_bits))
    throw Error("--kv-quant " + std::string(text) +
                ": TurboQuant takes key bits 2, 4, 5 or 8 and value bits 2, 3, 4, 5 or 8");
  return spec;
}

}  // namespace

const KVCodecTraits& kv_codec_traits(KVCodecKind kind) {
  check(kind < KVCodecKind::kCount, "kv_codec_traits: bad codec kind");
  return kTraits[size_t(kind)];
}

KVCodecSpec kv_passthrough_spec(DType dtype) {
  KVCodecSpec s;
  switch (dtype) {
    case DType::kF32: s.kind = KVCodecKind::kF32; break;
    case DType::kF16: s.kind = KVCodecKind::kF16; break;
    case DType::kBF16: s.kind = KVCodecKind::kBF16; break;
    default:
      throw Error(std::string("KV cache dtype must be f32, f16 or bf16, not ") + dtype_name(dtype));
  }
  return s;
}

KVCodecSpec kv_affine_spec(int bits, int group_size, DType param_dtype) {
  KVCodecSpec s;
  s.kind = KVCodecKind::kAffine;
  s.bits = bits;
  s.group_size = group_size;
  s.param_dtype = param_dtype;
  return s;
}

KVCodecSpec kv_turbo_spec(int key_bits, int value_bits, TurboTables tables) {
  KVCodecSpec s;
  s.kind = KVCodecKind::kTurbo;
  s.key_bits = key_bits;
  s.value_bits = value_bits;
  s.group_size = kTurboGroupSize;
  s.tables = tables;
  return s;
}

KVCodecSpec parse_kv_quant(std::string_view text, int group_size, DType model_dtype) {
  // off is kvlm's exact f32 cache, not the model dtype as in mlx-bun: with it every forward pass
  // equals transformers' fp32 reference (docs/kv-codecs.md §1).
  if (text == "off" || text == "f32") return kv_passthrough_spec(DType::kF32);
  if (text == "f16") return kv_passthrough_spec(DType::kF16);
  if (text == "bf16") return kv_passthrough_spec(DType::kBF16);
  if (text.starts_with("turbo")) return parse_turbo(text, text.substr(5), group_size);
  int bits = 0;
  if (!parse_int(text, &bits)) bad_value(text);
  const int g = group_size == 0 ? kDefaultKVGroupSize : group_size;
  if (!affine_spec_supported({bits, g}))
    throw Error("--kv-quant " + std::string(text) + " --kv-group-size " + std::to_string(g) +
                ": MLX affine KV takes bits 2, 3, 4, 5, 6 or 8 and group size 32, 64 or 128");
  kv_passthrough_spec(model_dtype);  // the scales take the model dtype: it must be a float
  return kv_affine_spec(bits, g, model_dtype);
}

std::string kv_codec_name(const KVCodecSpec& s) {
  switch (s.kind) {
    case KVCodecKind::kAffine:
      return "affine" + std::to_string(s.bits) + "g" + std::to_string(s.group_size);
    case KVCodecKind::kTurbo:
      return "turbo:k" + std::to_string(s.key_bits) + "v" + std::to_string(s.value_bits) +
             (s.tables == TurboTables::kGaussian ? ":gaussian" : "");
    case KVCodecKind::kF32:
    case KVCodecKind::kF16:
    case KVCodecKind::kBF16: return kv_codec_traits(s.kind).name;
    default: return "unknown";
  }
}

KVCodec::KVCodec(const KVCodecSpec& spec, int head_dim)
    : spec_(spec), head_dim_(head_dim), traits_(&kv_codec_traits(spec.kind)) {
  traits_->validate(spec_, head_dim_);
  key_bytes_ = traits_->key_row_bytes(spec_, head_dim_);
  value_bytes_ = traits_->value_row_bytes(spec_, head_dim_);
  if (spec_.kind == KVCodecKind::kTurbo) {
    signs_ = turbo_sign_vector(head_dim_);
    table_ = &turbo_lloyd_max_table(spec_.tables, spec_.value_bits);
  }
}

void KVCodec::decode_value_row(const uint8_t* row, float* out) const {
  decode_value_row_rotated(row, out);
  inverse_value_transform(out);
}

}  // namespace kvlm
