#pragma once
// What the tests that hold every ISA path to the portable reference share: the SIMD paths this CPU
// has, seeded normal data, and bitwise equality.
#include <cstring>
#include <random>
#include <vector>

#include "kvlm/base/cpu_isa.h"

namespace kvlm::cpu {

inline std::vector<Isa> simd_paths() {
  std::vector<Isa> paths;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(isa)) paths.push_back(isa);
  return paths;
}

inline std::vector<float> normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace kvlm::cpu
