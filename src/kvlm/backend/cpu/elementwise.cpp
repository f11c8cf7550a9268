// Row-wise and elementwise ops: RMSNorm, gated activations, residual adds, softmax.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "kvlm/backend/profile.h"
#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/backend/cpu/vector_math.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm::ops {

namespace {

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  check(a.shape() == b.shape(),
        [&] { return std::string(op) + ": shapes differ, " + a.describe() + " and " + b.describe(); });
}

// Rows per parallel task for cheap row ops.
constexpr size_t kRowGrain = 8;
// Elements per parallel task for elementwise ops with transcendental functions.
constexpr size_t kElementGrain = 4096;

// The norm's multipliers as f32: an f32 llama weight in place (models widen theirs once, at load);
// any other dtype widened, and 1+w formed, per call.
const float* norm_multipliers(const Tensor& weight, NormWeight kind, std::vector<float>& widened) {
  if (weight.dtype() == DType::kF32 && kind == NormWeight::kPlain) return weight.data<float>();
  widened.resize(size_t(weight.numel()));
  cpu::widen(weight, 0, weight.numel(), widened.data());
  if (kind == NormWeight::kOnePlus)
    for (float& v : widened) v = 1.0f + v;
  return widened.data();
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps, NormWeight kind, const Weight* next,
                QuantizedInput* next_input) {
  const ProfileScope profile(OpKind::kNorm);
  cpu::check_f32(x, 2, "rms_norm", "input");
  cpu::check_cpu_contiguous(weight, "rms_norm", "weight");
  const int64_t rows = x.dim(0), n = x.dim(1);
  check(weight.numel() == n,
        [&] { return "rms_norm: weight " + weight.describe() + " does not match rows of " + std::to_string(n); });
  std::vector<float> widened;
  const float* w = norm_multipliers(weight, kind, widened);
  Tensor out = Tensor::empty(x.shape(), DType::kF32);
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  const auto norm_row = cpu::vector_math().rms_norm_row;
  cpu::Int8ActsWriter codes(next_input ? next : nullptr, rows, n);
  thread_pool().parallel_for(size_t(rows), kRowGrain, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      norm_row(xp + int64_t(r) * n, w, n, eps, op + int64_t(r) * n);
      if (codes) codes.write(op + int64_t(r) * n, int64_t(r), 0, n);
    }
  });
  codes.finish(next_input);
  return out;
}

Tensor gated_activation(const Tensor& gate, const Tensor& up, GateActivation act) {
  const ProfileScope profile(OpKind::kActivation);
  cpu::check_f32(gate, 2, "gated_activation", "gate");
  cpu::check_f32(up, 2, "gated_activation", "up");
  check_same_shape(gate, up, "gated_activation");
  Tensor out = Tensor::empty(gate.shape(), DType::kF32);
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* o = out.data<float>();
  // Elementwise, so any split gives the same bits; exp and tanh dominate the MLP outside matmuls.
  thread_pool().parallel_for(size_t(gate.numel()), kElementGrain, [&](size_t b, size_t e) {
    cpu::gate_multiply(g + b, u + b, o + b, int64_t(e - b), act);
  });
  return out;
}

void add_scaled_inplace(Tensor& x, const Tensor& y, float scale) {
  const ProfileScope profile(OpKind::kElementwise);
  cpu::check_cpu_contiguous(x, "add", "x");
  cpu::check_cpu_contiguous(y, "add", "y");
  check(x.dtype() == DType::kF32 && y.dtype() == DType::kF32, "add: f32 tensors expected");
  check_same_shape(x, y, "add");
  cpu::vector_math().add_scaled(x.data<float>(), y.data<float>(), x.numel(), scale);
}

void scale_inplace(Tensor& x, float scale) {
  const ProfileScope profile(OpKind::kElementwise);
  cpu::check_cpu_contiguous(x, "scale", "x");
  check(x.dtype() == DType::kF32, "scale: f32 tensor expected");
  float* xp = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) xp[i] *= scale;
}

void divide_inplace(Tensor& x, float divisor) {
  const ProfileScope profile(OpKind::kElementwise);
  cpu::check_cpu_contiguous(x, "divide", "x");
  check(x.dtype() == DType::kF32, "divide: f32 tensor expected");
  cpu::vector_math().divide(x.data<float>(), x.numel(), divisor);
}

Tensor softmax(const Tensor& x) {
  const ProfileScope profile(OpKind::kElementwise);
  cpu::check_f32(x, 2, "softmax", "input");
  const int64_t rows = x.dim(0), n = x.dim(1);
  Tensor out = Tensor::empty(x.shape(), DType::kF32);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data<float>() + r * n;
    float* yr = out.data<float>() + r * n;
    float m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, xr[i]);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += (yr[i] = std::exp(xr[i] - m));
    for (int64_t i = 0; i < n; ++i) yr[i] /= sum;
  }
  return out;
}

}  // namespace kvlm::ops

namespace kvlm::cpu {

void gate_multiply(const float* g, const float* u, float* o, int64_t n, ops::GateActivation act) {
  if (act == ops::GateActivation::kSiLU) return vector_math().silu_mul(g, u, o, n);
  // tanh approximation of GELU ("gelu_pytorch_tanh").
  const float k = std::sqrt(2.0f / std::numbers::pi_v<float>);
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i];
    o[i] = (0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)))) * u[i];
  }
}

}  // namespace kvlm::cpu
