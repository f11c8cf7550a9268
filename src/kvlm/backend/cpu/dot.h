#pragma once
// The reduction order of the CPU kernels' dot products (DESIGN.md §1, §5): attention scores and
// RMSNorm's sum of squares, and with b = 1 attention's softmax sums (vector_math's sum_lanes).
// (Linear layers reduce along the input instead, cpu/panels.h.) A dot
// product of length n runs 16 lanes: lane k accumulates fma(a[i+k], b[i+k], acc[k]) over
// consecutive blocks of 16, the last partial block padded with zeros in both operands; the lanes
// then fold in halves (k += k+8, k += k+4, k += k+2, k += k+1). The order depends only on n, so a
// result never depends on the batch, the tiling or the thread count, and 16 lanes map onto one
// AVX-512 or two AVX2 registers: every ISA path computes the same bits as dot_portable.
#include <cmath>
#include <cstdint>

#include "kvlm/base/cpu_isa.h"

namespace kvlm::cpu {

inline constexpr int64_t kDotLanes = 16;

inline float fold_lanes(float (&acc)[kDotLanes]) {
  for (int64_t width = kDotLanes / 2; width >= 1; width /= 2)
    for (int64_t k = 0; k < width; ++k) acc[k] += acc[k + width];
  return acc[0];
}

// One 16-lane step: acc[k] = fma(a[k], b[k], acc[k]).
inline void fma_lanes(const float* a, const float* b, float (&acc)[kDotLanes]) {
  for (int64_t k = 0; k < kDotLanes; ++k) acc[k] = std::fma(a[k], b[k], acc[k]);
}

// The reference: plain C++ (std::fma rounds once, like the FMA instruction).
float dot_portable(const float* a, const float* b, int64_t n);
float dot_avx2(const float* a, const float* b, int64_t n);
float dot_avx512(const float* a, const float* b, int64_t n);

using DotFn = float (*)(const float* a, const float* b, int64_t n);
DotFn dot_kernel(Isa isa);

// Sum of a[i]*b[i] in the order above, on the ISA chosen for this process.
inline float dot(const float* a, const float* b, int64_t n) {
  static const DotFn fn = dot_kernel(cpu_isa());
  return fn(a, b, n);
}

}  // namespace kvlm::cpu
