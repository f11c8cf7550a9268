#pragma once
// Row kernels of the elementwise ops: exp and the functions built on it (softmax, SiLU), the
// RMSNorm of one row, division by a scalar, the residual add and the rotation of RoPE, and the
// sampler's passes over a vocabulary (argmax, a sum in double, log-softmax, the tokens above a
// floor and their mass). std::exp has no vector form, so kvlm defines exp by one fixed sequence of
// operations (Cody-Waite reduction by ln 2, a degree-6 polynomial evaluated with fma, scaling by
// 2^n through the exponent bits) that the portable scalar code and the AVX2 / AVX-512 code all
// perform identically: every path gives the same bits.
// Within about 2 ulp of the true value on [-87, 88]; exp(x) = 0 below -87 (true values there are
// under 1.7e-38), +inf above 88 (true overflow is at 88.72), NaN for NaN.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kvlm/base/cpu_isa.h"

namespace kvlm::cpu {

namespace exp_constants {
inline constexpr float kLo = -87.0f, kHi = 88.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_constants

inline float exp_portable(float x) {
  using namespace exp_constants;
  if (std::isnan(x)) return x;
  if (x > kHi) return std::numeric_limits<float>::infinity();
  if (x < kLo) return 0.0f;
  const float n = std::nearbyint(x * kLog2e);  // round half to even, the default mode
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kP[0];
  for (int i = 1; i < 6; ++i) p = std::fma(p, r, kP[i]);
  const float y = std::fma(p, r * r, r) + 1.0f;
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;  // 2^n, n in [-126, 127]
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

// y[i] = exp(x[i] * scale - shift), the product rounded first (exact for scale 1): the numerators
// of a softmax whose maximum is `shift` (y may be x).
void exp_scaled_portable(const float* x, float* y, int64_t n, float scale, float shift);
void exp_scaled_avx2(const float* x, float* y, int64_t n, float scale, float shift);
void exp_scaled_avx512(const float* x, float* y, int64_t n, float scale, float shift);
// o[i] = (g[i] / (1 + exp(-g[i]))) * u[i]: SiLU(gate) * up.
void silu_mul_portable(const float* g, const float* u, float* o, int64_t n);
void silu_mul_avx2(const float* g, const float* u, float* o, int64_t n);
void silu_mul_avx512(const float* g, const float* u, float* o, int64_t n);
// y[i] = w[i] * (x[i] * (1 / sqrt(dot(x, x) / n + eps))), the sum of squares in dot's order.
void rms_norm_row_portable(const float* x, const float* w, int64_t n, float eps, float* y);
void rms_norm_row_avx2(const float* x, const float* w, int64_t n, float eps, float* y);
void rms_norm_row_avx512(const float* x, const float* w, int64_t n, float eps, float* y);
// x[i] /= d (not x[i] * (1/d), which rounds differently).
void divide_portable(float* x, int64_t n, float d);
void divide_avx2(float* x, int64_t n, float d);
void divide_avx512(float* x, int64_t n, float d);
// The largest of x[0 .. n) that is not NaN, -inf if there is none: std::max(m, x[i]) from
// m = -inf (a maximum does not depend on the order, so the SIMD paths take 16 at a time).
float max_value_portable(const float* x, int64_t n);
float max_value_avx2(const float* x, int64_t n);
float max_value_avx512(const float* x, int64_t n);
// The sum of x[0 .. n) in dot.h's order: 16 lanes, lane k adding x[k], x[16+k], ... (the last
// partial block padded with zeros), then folded in halves.
float sum_lanes_portable(const float* x, int64_t n);
float sum_lanes_avx2(const float* x, int64_t n);
float sum_lanes_avx512(const float* x, int64_t n);
// x[i] = x[i] + y[i] * scale, the product rounded first (exact for scale 1).
void add_scaled_portable(float* x, const float* y, int64_t n, float scale);
void add_scaled_avx2(float* x, const float* y, int64_t n, float scale);
void add_scaled_avx512(float* x, const float* y, int64_t n, float scale);

// The index of the first NaN of x[0 .. n) if it holds one, else of the first of its largest
// values; -1 when n = 0.
int64_t argmax_portable(const float* x, int64_t n);
int64_t argmax_avx2(const float* x, int64_t n);
int64_t argmax_avx512(const float* x, int64_t n);
// The sum of x[0 .. n) in double: element i adds to lane i % 8 in turn, then the eight lanes add
// in order (independent lanes keep the adds from waiting on each other).
double sum_f64_portable(const float* x, int64_t n);
double sum_f64_avx2(const float* x, int64_t n);
double sum_f64_avx512(const float* x, int64_t n);
// x[i] = float(double(x[i] - max) - log_sum): log-softmax from the maximum and the log of the
// shifted exponentials' sum (subtracting the maximum in float first keeps large logits precise).
void subtract_log_sum_portable(float* x, int64_t n, float max, double log_sum);
void subtract_log_sum_avx2(float* x, int64_t n, float max, double log_sum);
void subtract_log_sum_avx512(float* x, int64_t n, float max, double log_sum);

// A value and its index, as selections over a vocabulary rank them.
struct IndexedValue {
  float value;
  int32_t id;
};
// Writes every x[i] >= floor with its index i, in index order, to out (room for n) and returns
// how many; NaN is never selected.
int64_t select_at_least_portable(const float* x, int64_t n, float floor, IndexedValue* out);
int64_t select_at_least_avx2(const float* x, int64_t n, float floor, IndexedValue* out);
int64_t select_at_least_avx512(const float* x, int64_t n, float floor, IndexedValue* out);
// The sum in double of w[i] over the i whose keys[i] >= floor, added one after another in index
// order.
double sum_at_least_portable(const float* w, const float* keys, int64_t n, float floor);
double sum_at_least_avx2(const float* w, const float* keys, int64_t n, float floor);
double sum_at_least_avx512(const float* w, const float* keys, int64_t n, float floor);

// Rotates the pair (a, b) = (v[i], v[half + i]) of rotate-half RoPE by the angle whose cosine and
// sine are c and s: each product rounded, then the sum.
inline void rope_pair(float& a, float& b, float c, float s) {
  const float a0 = a;
  a = a0 * c + -b * s;
  b = b * c + a0 * s;
}
// rope_pair on the half pairs of one head v, cosines at cs[0 .. half) and sines at cs[half ..).
void rope_rotate_portable(float* v, const float* cs, int64_t half);
void rope_rotate_avx2(float* v, const float* cs, int64_t half);
void rope_rotate_avx512(float* v, const float* cs, int64_t half);

struct VectorMathKernels {
  void (*exp_scaled)(const float* x, float* y, int64_t n, float scale, float shift);
  void (*silu_mul)(const float* g, const float* u, float* o, int64_t n);
  void (*rms_norm_row)(const float* x, const float* w, int64_t n, float eps, float* y);
  void (*divide)(float* x, int64_t n, float d);
  float (*max_value)(const float* x, int64_t n);
  float (*sum_lanes)(const float* x, int64_t n);
  void (*add_scaled)(float* x, const float* y, int64_t n, float scale);
  void (*rope_rotate)(float* v, const float* cs, int64_t half);
  int64_t (*argmax)(const float* x, int64_t n);
  double (*sum_f64)(const float* x, int64_t n);
  void (*subtract_log_sum)(float* x, int64_t n, float max, double log_sum);
  int64_t (*select_at_least)(const float* x, int64_t n, float floor, IndexedValue* out);
  double (*sum_at_least)(const float* w, const float* keys, int64_t n, float floor);
};
const VectorMathKernels& vector_math(Isa isa);
// The kernels of cpu_isa().
inline const VectorMathKernels& vector_math() {
  static const VectorMathKernels& k = vector_math(cpu_isa());
  return k;
}

}  // namespace kvlm::cpu
