// TurboQuant key and value rows (see turboquant.h).
//
// Key rule, per 32-group x, in f32 (vllm-metal's quantize(), with kvlm's guards marked *):
//   span   = 254 (signed 8-bit: codes -127..127) or 2^b - 1 (unsigned: codes 0..2^b-1)
//   scale  = (max - min) / span
//  *scale  = max(scale, max|x| / 2000)       so that |zero| <= ~2000, an exact fp16 integer
//  *scale  = fp16(min(scale, 65504))         the codes are computed from the stored scale
//   zero   = rint((max + min) / (2 scale))   signed
//          = rint(min / scale)               unsigned
//   code   = clip(rint(x / scale - zero), lo, hi)
//   x^     = (code + zero) * scale
// rint is round-half-to-even, as mx.round in the reference. The reference divides by
// (scale + 1e-8) using the unrounded scale, so a constant block (max == min != 0) gets scale 0
// and an fp16 zero point of ±inf, and dequantizes to NaN; near-constant blocks get zero points
// past 2048 that fp16 cannot hold exactly. The floor at max|x|/2000 engages only there (where
// the reference's |zero| would exceed ~1870 for 8-bit, ~1970 for 2-5-bit codes) and makes every
// block finite and accurate to about max|x|/4000 plus fp16 rounding. A block so small that even the
// floored scale is 0 in fp16 (max|x| < 6e-5 with a tinier range) decodes to zeros.
//
// Value rule, per row (vllm-metal's turbo_quant_encode_value / lm_quant):
//   y = H(D x)/sqrt(d) in f32; per 32-group s = sqrt(mean(y^2)); code = #{k : y/(s + 1e-8) > b_k}
//   stored scale = fp16(min(s, 65504))*; decode: centroid[code] * scale, then D (H .)/sqrt(d).
// *The clamp keeps an RMS beyond fp16's range finite (the reference stores inf, and the inverse
// transform then yields NaN).
#include "kvlm/quant/turboquant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kvlm/base/error.h"
#include "kvlm/base/half.h"

namespace kvlm {

namespace {

constexpr float kF16Max = 65504.0f;
// The key scale floor divisor: keeps |zero| <= 2000 * (1 + 2^-11) + 0.5 < 2048.
constexpr float kKeyZeroLimit = 2000.0f;

float round_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

// Reads/writes an fp16 value at byte offset `at` of a row (no alignment assumed).
void store_f16(uint8_t* row, size_t at, uint16_t h) { std::memcpy(row + at, &h, 2); }
float load_f16(const uint8_t* row, size_t at) {
  uint16_t h;
  std::memcpy(&h, row + at, 2);
  return f16_to_f32(h);
}

bool key_signed(int bits) { return bits == 8; }
float key_lo(int bits) { return key_signed(bits) ? -127.0f : 0.0f; }
float key_hi(int bits) { return key_signed(bits) ? 127.0f : float((1 << bits) - 1); }

size_t code_bytes(int head_dim, int bits) { return size_t(head_dim) * size_t(bits) / 8; }
int groups(int head_dim) { return head_dim / kTurboGroupSize; }

}  // namespace

bool turbo_head_dim_supported(int head_dim) {
  return std::find(std::begin(kTurboHeadDims), std::end(kTurboHeadDims), head_dim) !=
         std::end(kTurboHeadDims);
}

void check_turbo_head_dim(int head_dim, std::string_view what) {
  // Built only on failure: the row encoders call this for every row.
  if (!turbo_head_dim_supported(head_dim))
    throw Error(std::string(what) + ": TurboQuant does not support head_dim=" +
                std::to_string(head_dim) + " (supported: 64, 128, 256, 512)");
}

bool turbo_key_bits_supported(int bits) { return bits == 2 || bits == 4 || bits == 5 || bits == 8; }

namespace {

// Packs blocks of 8 codes into B bytes each (8 codes of B bits fill exactly B bytes); with B a
// constant the shifts fold away. Bits above B in a code are dropped.
template <int B>
void pack_codes_blocks(const uint8_t* codes, int n, uint8_t* out) {
  for (int base = 0; base < n; base += 8, out += B) {
    uint64_t block = 0;
    for (int j = 0; j < 8; ++j) block |= uint64_t(codes[base + j] & ((1u << B) - 1u)) << (j * B);
    for (int k = 0; k < B; ++k) out[k] = uint8_t(block >> (8 * k));
  }
}

}  // namespace

void pack_codes(const uint8_t* codes, int n, int bits, uint8_t* out) {
  if (n < 0 || n % 8 != 0)  // built only on failure: this runs for every row
    throw Error("pack_codes: " + std::to_string(n) + " codes are not a multiple of 8");
  switch (bits) {
    case 2: return pack_codes_blocks<2>(codes, n, out);
    case 3: return pack_codes_blocks<3>(codes, n, out);
    case 4: return pack_codes_blocks<4>(codes, n, out);
    case 5: return pack_codes_blocks<5>(codes, n, out);
    case 8: std::memcpy(out, codes, size_t(n)); return;
    default: throw Error("pack_codes: unsupported code width " + std::to_string(bits));
  }
}

namespace {

// Unpacks codes in blocks of 8 (8 codes fill exactly `B` bytes, so a block never reads past its
// own bytes); with B a constant the shifts fold away. Used for the widths that straddle bytes.
template <int B>
void unpack_codes_blocks(const uint8_t* stream, int n, uint8_t* codes) {
  for (int base = 0; base < n; base += 8, stream += B) {
    uint64_t block = 0;
    for (int k = 0; k < B; ++k) block |= uint64_t(stream[k]) << (8 * k);
    for (int j = 0; j < 8; ++j) codes[base + j] = uint8_t((block >> (j * B)) & ((1u << B) - 1u));
  }
}

// Widths that divide 8: each byte holds 8/B whole codes. The inner loops have constant trip
// counts (8 codes at a time), which is what -O2's cheap vectoriser needs.
template <int B>
void unpack_codes_bytes(const uint8_t* stream, int n, uint8_t* codes) {
  constexpr int kPerByte = 8 / B;
  for (int base = 0; base < n; base += 8, stream += B, codes += 8)
    for (int i = 0; i < B; ++i)
      for (int k = 0; k < kPerByte; ++k)
        codes[i * kPerByte + k] = uint8_t((stream[i] >> (k * B)) & ((1u << B) - 1u));
}

}  // namespace

void unpack_codes(const uint8_t* stream, int n, int bits, uint8_t* codes) {
  if (n % 8 != 0)  // the message is built only on failure: this runs for every row
    throw Error("unpack_codes: " + std::to_string(n) + " codes are not a multiple of 8");
  switch (bits) {
    case 2: return unpack_codes_bytes<2>(stream, n, codes);
    case 3: return unpack_codes_blocks<3>(stream, n, codes);
    case 4: return unpack_codes_bytes<4>(stream, n, codes);
    case 5: return unpack_codes_blocks<5>(stream, n, codes);
    case 8: std::memcpy(codes, stream, size_t(n)); return;
    default: throw Error("unpack_codes: unsupported code width " + std::to_string(bits));
  }
}

void fwht(float* x, int n) {
  // Butterflies in Sylvester order. From h = 4 on, the pairs are taken 4 at a time through
  // local copies (so the compiler need not prove the halves disjoint), which -O2 turns into one
  // vector add and one vector subtract.
  for (int h = 1; h < n && h < 4; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  for (int h = 4; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; j += 4) {
        float a[4], b[4];
        std::memcpy(a, x + j, sizeof a);
        std::memcpy(b, x + j + h, sizeof b);
        for (int k = 0; k < 4; ++k) x[j + k] = a[k] + b[k];
        for (int k = 0; k < 4; ++k) x[j + h + k] = a[k] - b[k];
      }
}

void turbo_rotate(float* x, std::span<const int8_t> signs) {
  const int d = int(signs.size());
  for (int i = 0; i < d; ++i) x[i] *= float(signs[i]);
  fwht(x, d);
  const float inv_sqrt_d = float(1.0 / std::sqrt(double(d)));
  for (int i = 0; i < d; ++i) x[i] *= inv_sqrt_d;
}

void turbo_unrotate(float* y, std::span<const int8_t> signs) {
  const int d = int(signs.size());
  fwht(y, d);
  const float inv_sqrt_d = float(1.0 / std::sqrt(double(d)));
  for (int i = 0; i < d; ++i) y[i] *= inv_sqrt_d * float(signs[i]);
}

TurboKeyGroup turbo_key_group_params(const float* x, int bits) {
  float lo = x[0], hi = x[0], max_abs = 0;
  for (int j = 0; j < kTurboGroupSize; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
    max_abs = std::max(max_abs, std::fabs(x[j]));
  }
  const float span = key_hi(bits) - key_lo(bits);
  float scale = std::max((hi - lo) / span, max_abs / kKeyZeroLimit);
  scale = round_f16(std::min(scale, kF16Max));
  if (scale == 0.0f) return {};  // every |x| < 6e-5: the group decodes to zeros
  const float zero =
      key_signed(bits) ? std::nearbyint((hi + lo) / (2.0f * scale)) : std::nearbyint(lo / scale);
  return {f32_to_f16(scale), f32_to_f16(zero)};
}

namespace {

// Round half to even for |v| < 2^22: adding 1.5 * 2^23 leaves no fraction bits, so the FPU's
// default rounding (to nearest even) does the work. Without SSE4.1, std::nearbyint is a libm call
// per element, which dominated key encoding.
float round_half_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

// The code of x for a group's stored (widened) scale and zero point. Clamping before rounding
// equals rounding before clamping (the bounds are integers) and keeps the rounding trick in
// range; a NaN maps to the low code.
uint8_t key_code(float x, float scale, float zero, int bits) {
  if (scale == 0.0f) return 0;
  const float v = x / scale - zero, lo = key_lo(bits), hi = key_hi(bits);
  const float q = round_half_even(v > lo ? (v < hi ? v : hi) : lo);
  return uint8_t(int(q));  // signed codes wrap to their two's complement byte
}

}  // namespace

uint8_t turbo_key_code(float x, const TurboKeyGroup& p, int bits) {
  return key_code(x, f16_to_f32(p.scale), f16_to_f32(p.zero), bits);
}

namespace {

// (code + zero) * scale over one group; Code is int8_t for signed codes. A constant trip count
// and no branch let -O2 vectorise it.
template <typename Code>
void decode_key_group(const uint8_t* codes, float scale, float zero, float* out) {
  for (int j = 0; j < kTurboGroupSize; ++j) out[j] = (float(Code(codes[j])) + zero) * scale;
}

}  // namespace

size_t turbo_key_row_bytes(int head_dim, int bits) {
  return code_bytes(head_dim, bits) + 2 * size_t(groups(head_dim)) * 2;
}

void turbo_encode_key_row(const float* x, int head_dim, int bits, uint8_t* row) {
  check_turbo_head_dim(head_dim, "turbo_encode_key_row");
  uint8_t codes[512];
  const size_t scales_at = code_bytes(head_dim, bits);
  const size_t zeros_at = scales_at + size_t(groups(head_dim)) * 2;
  for (int g = 0; g < groups(head_dim); ++g) {
    const float* xg = x + g * kTurboGroupSize;
    const TurboKeyGroup p = turbo_key_group_params(xg, bits);
    const float scale = f16_to_f32(p.scale), zero = f16_to_f32(p.zero);
    for (int j = 0; j < kTurboGroupSize; ++j)
      codes[g * kTurboGroupSize + j] = key_code(xg[j], scale, zero, bits);
    store_f16(row, scales_at + size_t(g) * 2, p.scale);
    store_f16(row, zeros_at + size_t(g) * 2, p.zero);
  }
  pack_codes(codes, head_dim, bits, row);
}

void turbo_decode_key_row(const uint8_t* row, int head_dim, int bits, float* out) {
  check_turbo_head_dim(head_dim, "turbo_decode_key_row");
  uint8_t codes[512];
  unpack_codes(row, head_dim, bits, codes);
  const size_t scales_at = code_bytes(head_dim, bits);
  const size_t zeros_at = scales_at + size_t(groups(head_dim)) * 2;
  for (int g = 0; g < groups(head_dim); ++g) {
    const float scale = load_f16(row, scales_at + size_t(g) * 2);
    const float zero = load_f16(row, zeros_at + size_t(g) * 2);
    const int at = g * kTurboGroupSize;
    if (key_signed(bits))
      decode_key_group<int8_t>(codes + at, scale, zero, out + at);
    else
      decode_key_group<uint8_t>(codes + at, scale, zero, out + at);
  }
}

uint8_t turbo_value_code(const LloydMaxTable& table, float y) {
  // Branch-free binary search over the 2^bits - 1 sorted boundaries: each step adds `step` when
  // the boundary just below code + step lies under y, so the result is #{k : b_k < y}. A
  // branching search mispredicts on random data and dominated 8-bit encoding.
  const float* b = table.boundaries.data();
  unsigned code = 0;
  for (unsigned step = 1u << (table.bits - 1); step > 0; step >>= 1)
    code += b[code + step - 1] < y ? step : 0u;
  return uint8_t(code);
}

size_t turbo_value_row_bytes(int head_dim, int bits) {
  return code_bytes(head_dim, bits) + size_t(groups(head_dim)) * 2;
}

void turbo_encode_value_row(const float* x, std::span<const int8_t> signs,
                            const LloydMaxTable& table, uint8_t* row) {
  const int d = int(signs.size());
  check_turbo_head_dim(d, "turbo_encode_value_row");
  float y[512];
  uint8_t codes[512];
  std::copy(x, x + d, y);
  turbo_rotate(y, signs);
  const size_t scales_at = code_bytes(d, table.bits);
  for (int g = 0; g < groups(d); ++g) {
    float* yg = y + g * kTurboGroupSize;
    float sum_sq = 0;
    for (int j = 0; j < kTurboGroupSize; ++j) sum_sq += yg[j] * yg[j];
    const float rms = std::sqrt(sum_sq / float(kTurboGroupSize));
    for (int j = 0; j < kTurboGroupSize; ++j) {
      codes[g * kTurboGroupSize + j] = turbo_value_code(table, yg[j] / (rms + 1e-8f));
    }
    store_f16(row, scales_at + size_t(g) * 2, f32_to_f16(std::min(rms, kF16Max)));
  }
  pack_codes(codes, d, table.bits, row);
}

void turbo_decode_value_row_rotated(const uint8_t* row, int head_dim, const LloydMaxTable& table,
                                    float* out) {
  check_turbo_head_dim(head_dim, "turbo_decode_value_row_rotated");
  uint8_t codes[512];
  unpack_codes(row, head_dim, table.bits, codes);
  const size_t scales_at = code_bytes(head_dim, table.bits);
  const float* centroids = table.centroids.data();
  for (int g = 0; g < groups(head_dim); ++g) {
    const float scale = load_f16(row, scales_at + size_t(g) * 2);
    const uint8_t* c = codes + g * kTurboGroupSize;
    float* o = out + g * kTurboGroupSize;
    for (int j = 0; j < kTurboGroupSize; ++j) o[j] = centroids[c[j]] * scale;
  }
}

}  // namespace kvlm
