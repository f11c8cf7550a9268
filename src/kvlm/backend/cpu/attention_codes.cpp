// The int8 key path (attention_codes.h): key forms, query quantization, key blocks and the
// portable scoring kernel that the SIMD one is tested against.
#include "kvlm/backend/cpu/attention_codes.h"

#include <cstring>

#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/turboquant.h"

namespace kvlm::cpu {

namespace {

// Where element i of a row sits in piece order.
int64_t piece_position(int64_t i, int bits) {
  if (bits == 8) return i;
  const int64_t half = i / 32 * 32, e = i % 32;
  return half + (e % 2) * 16 + e / 2;
}

// A_g and B_g of the row's groups (attention_codes.h), written for key r.
void row_params(const KeyCodeForm& f, const uint8_t* row, int r, KeyCodeBlock& out) {
  const uint8_t* p = row + f.code_bytes();
  const size_t psize = dtype_size(f.params);
  const int groups = f.groups();
  const float m = float(1 << (f.bits - 1));
  for (int g = 0; g < groups; ++g) {
    const float s = load_kv_scalar(p + size_t(g) * psize, f.params);
    const float second = load_kv_scalar(p + size_t(groups + g) * psize, f.params);  // bias or zero
    out.a[g][r] = s;
    if (!f.turbo) out.b[g][r] = second + s * m;
    else out.b[g][r] = f.bits == 8 ? s * second : s * (second + m);
  }
}

}  // namespace

void rewrite_key_codes(const KeyCodeForm& f, const uint8_t* row, uint8_t* out) {
  constexpr uint64_t kTop = 0x8080808080808080ull, kLow = 0x0F0F0F0F0F0F0F0Full;
  const auto word = [](const uint8_t* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  };
  const auto put = [](uint8_t* p, uint64_t w) { std::memcpy(p, &w, 8); };
  if (f.bits == 8) {
    for (int i = 0; i < f.head_dim; i += 8) put(out + i, word(row + i) ^ kTop);
    return;
  }
  for (int h = 0; h < f.head_dim / 32; ++h)
    for (int j = 0; j < 16; j += 8) {
      const uint64_t w = word(row + 16 * h + j);
      put(out + 32 * h + j, w & kLow);
      put(out + 32 * h + 16 + j, (w >> 4) & kLow);
    }
}

std::optional<KeyCodeForm> key_code_form(const KVCodec& codec) {
  const KVCodecSpec& s = codec.spec();
  KeyCodeForm f;
  f.head_dim = codec.head_dim();
  if (f.head_dim % kCodePiece != 0) return std::nullopt;
  if (s.kind == KVCodecKind::kAffine) {
    f.bits = s.bits, f.group = s.group_size, f.params = s.param_dtype;
  } else if (s.kind == KVCodecKind::kTurbo) {
    f.bits = s.key_bits, f.group = kTurboGroupSize, f.turbo = true, f.params = DType::kF16;
  } else {
    return std::nullopt;
  }
  if (f.bits != 4 && f.bits != 8) return std::nullopt;
  return f;
}

QueryCodes quantize_query_codes(const KeyCodeForm& f, const float* q, int64_t rows) {
  QueryCodes out;
  out.dim = f.head_dim;
  out.q.assign(size_t(rows * f.head_dim), 0);
  out.d.assign(size_t(rows * kMaxCodeGroups), 0.0f);
  out.sq.assign(size_t(rows * kMaxCodeGroups), 0.0f);
  out.base.assign(size_t(rows * kMaxCodeGroups), 0);
  const int32_t m = 1 << (f.bits - 1);
  for (int64_t r = 0; r < rows; ++r) {
    int8_t* qq = out.q.data() + r * f.head_dim;
    for (int g = 0; g < f.groups(); ++g) {
      const size_t at = size_t(r * kMaxCodeGroups + g);
      int32_t sum = 0;
      const Int8Group qg = quantize_int8_group(q + r * f.head_dim + g * f.group, f.group, [&](int64_t k, int8_t v) {
        qq[piece_position(g * f.group + k, f.bits)] = v;
        sum += v;
      });
      out.d[at] = qg.d;
      out.sq[at] = qg.sum;
      out.base[at] = -m * sum;
    }
  }
  return out;
}

void prepare_key_codes_portable(const KeyCodeForm& f, const uint8_t* const* rows, int count, KeyCodeBlock& out) {
  const bool rewrite = f.turbo || f.bits == 4;  // MLX affine 8-bit rows are piece order already
  if (rewrite) out.bytes.resize(size_t(kKeyBlock) * size_t(f.head_dim));
  for (int r = 0; r < kKeyBlock; ++r) {
    if (r >= count) {
      out.codes[r] = out.codes[0];
      for (int g = 0; g < f.groups(); ++g) out.a[g][r] = out.a[g][0], out.b[g][r] = out.b[g][0];
      continue;
    }
    if (rewrite) {
      uint8_t* dst = out.bytes.data() + size_t(r) * size_t(f.head_dim);
      rewrite_key_codes(f, rows[r], dst);
      out.codes[r] = dst;
    } else {
      out.codes[r] = rows[r];
    }
    row_params(f, rows[r], r, out);
  }
}

void score_codes_portable(const KeyCodeForm& f, const KeyCodeBlock& keys, const QueryCodes& q,
                          int64_t first, int heads, float scale, float* s, size_t stride) {
  for (int h = 0; h < heads; ++h) {
    const QueryCodes::Head qh = q.head(first + h);
    for (int r = 0; r < kKeyBlock; ++r) {
      const uint8_t* u = keys.codes[r];
      float acc = 0.0f;
      for (int g = 0; g < f.groups(); ++g) {
        int32_t p = qh.base[g];
        for (int i = g * f.group; i < (g + 1) * f.group; ++i) p += int32_t(u[i]) * int32_t(qh.q[i]);
        const float t = keys.a[g][r] * (qh.d[g] * float(p)) + keys.b[g][r] * qh.sq[g];
        acc = acc + t;
      }
      s[size_t(h) * stride + size_t(r)] = acc * scale;
    }
  }
}

std::optional<CodePath> code_path(const KVCodec& codec) {
  const KVCodecKind kind = codec.spec().kind;
  if (kind != KVCodecKind::kAffine && kind != KVCodecKind::kTurbo) return std::nullopt;
  CodePath p;
  p.key = key_code_form(codec);
  if (p.key) p.kernels = key_code_kernels();
  return p;
}

KeyCodeKernels key_code_kernels(Isa isa) {
  if (int8_uses_vnni(isa)) return {prepare_key_codes_avx512, score_codes_avx512};
  if (isa != Isa::kPortable) return {prepare_key_codes_portable, score_codes_avx2};
  return {prepare_key_codes_portable, score_codes_portable};
}

KeyCodeKernels key_code_kernels() { return key_code_kernels(cpu_isa()); }

}  // namespace kvlm::cpu
