#include "kvlm/engine/rng.h"

namespace kvlm {
namespace {

// Round multipliers and Weyl key increments from the Philox paper.
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

PhiloxBlock philox_round(const PhiloxBlock& c, const std::array<uint32_t, 2>& k) {
  const uint64_t p0 = uint64_t(kMul0) * c[0];
  const uint64_t p1 = uint64_t(kMul1) * c[2];
  const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
  const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

}  // namespace

PhiloxBlock philox4x32_10(PhiloxBlock counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    counter = philox_round(counter, key);
  }
  return counter;
}

double uniform01(uint64_t seed, uint64_t step, RngStream stream) {
  const PhiloxBlock out = philox4x32_10(
      {uint32_t(step), uint32_t(step >> 32), uint32_t(stream), 0u}, {uint32_t(seed), uint32_t(seed >> 32)});
  // 27 + 26 bits → a multiple of 2^-53 strictly below 1.
  const uint64_t bits = (uint64_t(out[0] >> 5) << 26) | uint64_t(out[1] >> 6);
  return double(bits) * 0x1.0p-53;
}

}  // namespace kvlm
