#pragma once
// TurboQuant KV codec rows, as vllm-metal defines them and mlx-bun stores them
// (turboquant.md §B; docs/kv-codecs.md has the byte layouts and kvlm's deviations).
//
// Keys are not rotated: asymmetric affine per 32-element group along head_dim with an fp16 scale
// and zero point, x ~= (code + zero) * scale; 8-bit codes are signed (-127..127, one byte each),
// 2/4/5-bit codes unsigned (0..2^b-1). Values are rotated: y = H(D x)/sqrt(d) (D the sign
// vector, H the Sylvester Hadamard matrix), each 32-group of y is divided by its RMS (stored in
// fp16) and coded with a Lloyd-Max table. Codes of both kinds are packed as one little-endian
// bit stream per row: code i occupies bits [i*b, i*b+b), bit 0 being the LSB of byte 0.
//
// All row functions are token-local: one (token, kv-head) row in, a fixed number of bytes out.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvlm/quant/turboquant_tables.h"

namespace kvlm {

inline constexpr int kTurboGroupSize = 32;

bool turbo_head_dim_supported(int head_dim);
// Throws Error("<what>: TurboQuant does not support head_dim=D (supported: 64, 128, 256, 512)").
void check_turbo_head_dim(int head_dim, std::string_view what);
// Key code widths: 2, 4, 5 (unsigned) and 8 (signed).
bool turbo_key_bits_supported(int bits);

// --- little-endian code bit stream ---

// Packs n codes of `bits` bits (2, 3, 4, 5 or 8; only the low `bits` of each code are kept)
// into n*bits/8 bytes; n must be a multiple of 8.
void pack_codes(const uint8_t* codes, int n, int bits, uint8_t* out);
// Code i of a packed stream.
inline uint32_t unpack_code(const uint8_t* stream, int i, int bits) {
  const int bit = i * bits;
  const int byte = bit >> 3, shift = bit & 7;
  uint32_t v = uint32_t(stream[byte]) >> shift;
  if (shift + bits > 8) v |= uint32_t(stream[byte + 1]) << (8 - shift);  // straddles two bytes
  return v & ((1u << bits) - 1u);
}

// Codes 0..n-1 of a packed stream (n a multiple of 8); bits 2, 3, 4, 5 or 8. The row
// decoders use this, a loop specialised per width, instead of unpack_code per element.
void unpack_codes(const uint8_t* stream, int n, int bits, uint8_t* codes);

// --- randomised Hadamard transform ---

// In-place unnormalised fast Walsh-Hadamard transform in Sylvester order (x <- H x), n a power
// of two. H H = n I.
void fwht(float* x, int n);
// y = H(D x)/sqrt(d), d = signs.size(): the value rotation (encode order: signs, then H).
void turbo_rotate(float* x, std::span<const int8_t> signs);
// x = D (H y)/sqrt(d): the inverse (decode order: H, then signs).
void turbo_unrotate(float* y, std::span<const int8_t> signs);

// --- keys ---

// One key group's parameters as fp16 bit patterns. `zero` is an integer.
struct TurboKeyGroup {
  uint16_t scale = 0;
  uint16_t zero = 0;
};
// The scale and zero point of one 32-element group (see turboquant.cpp for the rule).
TurboKeyGroup turbo_key_group_params(const float* x, int bits);
// The code of x in a group with parameters p (signed codes as two's complement bytes).
uint8_t turbo_key_code(float x, const TurboKeyGroup& p, int bits);

// Row layout: codes (head_dim*bits/8 bytes), then head_dim/32 fp16 scales, then head_dim/32 fp16
// zero points, all little-endian.
size_t turbo_key_row_bytes(int head_dim, int bits);
void turbo_encode_key_row(const float* x, int head_dim, int bits, uint8_t* row);
void turbo_decode_key_row(const uint8_t* row, int head_dim, int bits, float* out);

// --- values ---

// The code of an RMS-normalised value y: #{k : y > boundaries[k]}, so a tie goes to the lower
// code (vllm-metal's strict compare; vLLM upstream uses >=).
uint8_t turbo_value_code(const LloydMaxTable& table, float y);

// Row layout: codes (head_dim*bits/8 bytes), then head_dim/32 fp16 RMS scales.
size_t turbo_value_row_bytes(int head_dim, int bits);
// head_dim = signs.size(); table.bits is the code width.
void turbo_encode_value_row(const float* x, std::span<const int8_t> signs,
                            const LloydMaxTable& table, uint8_t* row);
// centroid[code] * scale: the value in the rotated domain, without the inverse transform.
void turbo_decode_value_row_rotated(const uint8_t* row, int head_dim, const LloydMaxTable& table,
                                    float* out);

}  // namespace kvlm
