#pragma once
// IEEE binary16 and bfloat16 conversions. Rounding is round-to-nearest-even in both directions,
// matching PyTorch and MLX, so weights converted here equal the oracle's bit for bit.
#include <cstdint>
#include <cstring>

namespace kvlm {

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return bits_to_f32(sign);
  // Subnormal: value = man * 2^-24, exact in f32.
  float v = float(man) * 5.9604644775390625e-08f;
  return sign ? -v : v;
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_to_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;           // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;          // overflow (>= 65520) -> inf
  if (a < 0x38800000u) {                                // subnormal or zero in f16
    // Scale into the subnormal grid (units of 2^-24) and round half to even.
    const float v = bits_to_f32(a) * 16777216.0f;
    float r = __builtin_nearbyintf(v);
    return sign | uint16_t(r);
  }
  uint32_t m = a + 0xfffu + ((a >> 13) & 1u);  // round mantissa to 10 bits, ties to even
  return sign | uint16_t(((m >> 13) - (112u << 10)) & 0x7fffu);
}

}  // namespace kvlm
