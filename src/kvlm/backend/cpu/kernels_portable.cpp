// The reference paths of dot.h, linear_rows.h and vector_math.h, and the per-ISA dispatch tables.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/cpu/linear_rows.h"
#include "kvlm/backend/cpu/vector_math.h"

namespace kvlm::cpu {

float dot_portable(const float* a, const float* b, int64_t n) {
  float acc[kDotLanes] = {};
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes) fma_lanes(a + i, b + i, acc);
  if (i < n) {
    float ta[kDotLanes] = {}, tb[kDotLanes] = {};
    std::copy(a + i, a + n, ta);
    std::copy(b + i, b + n, tb);
    fma_lanes(ta, tb, acc);
  }
  return fold_lanes(acc);
}

namespace {

// Every weight reduces along the input, one fused multiply-add after another (panels.h).
float input_order_dot(const float* x, const float* w, int64_t n) {
  float acc = 0.0f;
  for (int64_t k = 0; k < n; ++k) acc = std::fma(w[k], x[k], acc);
  return acc;
}

}  // namespace

void linear_rows_portable(const LinearRows& job, const PackedX&) {
  const int64_t in = job.w->in_features;
  std::vector<float> buf(static_cast<size_t>(in));
  for (int64_t r = 0; r < job.R; ++r) {
    const float* w = weight_row(*job.w, job.r0 + r, buf.data());
    for (int64_t t = 0; t < job.T; ++t) job.y[t * job.ldy + r] = input_order_dot(job.x + t * in, w, in);
  }
}

void exp_scaled_portable(const float* x, float* y, int64_t n, float scale, float shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_portable(x[i] * scale - shift);
}

void silu_mul_portable(const float* g, const float* u, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = (g[i] / (1.0f + exp_portable(-g[i]))) * u[i];
}

void rms_norm_row_portable(const float* x, const float* w, int64_t n, float eps, float* y) {
  const float inv = 1.0f / std::sqrt(dot_portable(x, x, n) / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}

void divide_portable(float* x, int64_t n, float d) {
  for (int64_t i = 0; i < n; ++i) x[i] /= d;
}

float max_value_portable(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

float sum_lanes_portable(const float* x, int64_t n) {
  float acc[kDotLanes] = {};
  int64_t i = 0;
  for (; i < n; i += kDotLanes)
    for (int64_t k = 0; k < kDotLanes; ++k) acc[k] += i + k < n ? x[i + k] : 0.0f;
  return fold_lanes(acc);
}

void add_scaled_portable(float* x, const float* y, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] + y[i] * scale;
}

void rope_rotate_portable(float* v, const float* cs, int64_t half) {
  for (int64_t i = 0; i < half; ++i) rope_pair(v[i], v[half + i], cs[i], cs[half + i]);
}

int64_t argmax_portable(const float* x, int64_t n) {
  int64_t best = n > 0 ? 0 : -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return i;
    if (x[i] > x[best]) best = i;
  }
  return best;
}

double sum_f64_portable(const float* x, int64_t n) {
  double lane[8] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 8] += double(x[i]);
  double sum = 0.0;
  for (double l : lane) sum += l;
  return sum;
}

void subtract_log_sum_portable(float* x, int64_t n, float max, double log_sum) {
  for (int64_t i = 0; i < n; ++i) x[i] = float(double(x[i] - max) - log_sum);
}

int64_t select_at_least_portable(const float* x, int64_t n, float floor, IndexedValue* out) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i)
    if (x[i] >= floor) out[k++] = {x[i], int32_t(i)};
  return k;
}

double sum_at_least_portable(const float* w, const float* keys, int64_t n, float floor) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (keys[i] >= floor) sum += double(w[i]);
  return sum;
}

const VectorMathKernels& vector_math(Isa isa) {
  static constexpr VectorMathKernels kPortable = {
      exp_scaled_portable, silu_mul_portable, rms_norm_row_portable, divide_portable,
      max_value_portable, sum_lanes_portable, add_scaled_portable, rope_rotate_portable, argmax_portable, sum_f64_portable,
      subtract_log_sum_portable, select_at_least_portable, sum_at_least_portable};
  static constexpr VectorMathKernels kAvx2 = {
      exp_scaled_avx2, silu_mul_avx2, rms_norm_row_avx2, divide_avx2, max_value_avx2, sum_lanes_avx2,
      add_scaled_avx2,
      rope_rotate_avx2, argmax_avx2, sum_f64_avx2, subtract_log_sum_avx2, select_at_least_avx2,
      sum_at_least_avx2};
  static constexpr VectorMathKernels kAvx512 = {
      exp_scaled_avx512, silu_mul_avx512, rms_norm_row_avx512, divide_avx512, max_value_avx512,
      sum_lanes_avx512, add_scaled_avx512,
      rope_rotate_avx512, argmax_avx512, sum_f64_avx512, subtract_log_sum_avx512,
      select_at_least_avx512, sum_at_least_avx512};
  switch (isa) {
    case Isa::kAvx512: return kAvx512;
    case Isa::kAvx2: return kAvx2;
    case Isa::kPortable: break;
  }
  return kPortable;
}

DotFn dot_kernel(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return dot_avx512;
    case Isa::kAvx2: return dot_avx2;
    case Isa::kPortable: break;
  }
  return dot_portable;
}

LinearRowsKernel linear_rows_kernel(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return {linear_rows_avx512, linear_token_group_avx512};
    case Isa::kAvx2: return {linear_rows_avx2, linear_token_group_avx2};
    case Isa::kPortable: break;
  }
  return {linear_rows_portable, nullptr};
}

}  // namespace kvlm::cpu
