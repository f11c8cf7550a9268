#pragma once
// Shared helpers of the CPU reference kernels: device and layout checks, widening of stored
// dtypes to f32; the one dot product every reduction uses is in dot.h.
#include <cstdint>
#include <string>

#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/ops.h"
#include "kvlm/base/error.h"
#include "kvlm/base/half.h"

namespace kvlm::cpu {

// Throws unless t is a defined, contiguous CPU tensor ("<op>: ..." in the message).
void check_cpu_contiguous(const Tensor& t, const char* op, const char* what);
// Throws unless t is a contiguous CPU f32 tensor of rank `rank`.
void check_f32(const Tensor& t, int rank, const char* op, const char* what);

// Widens n elements of a contiguous float tensor (f32/f16/bf16), starting at element `offset`.
void widen(const Tensor& t, int64_t offset, int64_t n, float* out);

// Converts n f32 values to dtype `dt` (f32/f16/bf16, round to nearest even) at `dst`.
void narrow(const float* src, int64_t n, DType dt, void* dst);

// Row `row` of a weight as f32: a pointer into the weight itself when it is dense f32, else `buf`
// (in_features floats) filled by widening or MLX affine dequantization.
const float* weight_row(const ops::Weight& w, int64_t row, float* buf);

// Panel p (panels.h) of an MLX affine weight, dequantized: weight_row's values in panel order into
// dst (in_features * kPanelRows floats), rows past the weight as zeros.
void dequantize_panel(const ops::Weight& w, int64_t p, float* dst);

// Panel p of an MLX affine weight in the affine panel layout (panels.h) into dst
// (affine_panel_bytes), rows past the weight with zero codes, scales and biases.
void pack_affine_panel(const ops::Weight& w, int64_t p, uint8_t* dst);

// o[i] = act(g[i]) * u[i] for n elements (ops::gated_activation and ops::gated_linear).
void gate_multiply(const float* g, const float* u, float* o, int64_t n, ops::GateActivation act);

}  // namespace kvlm::cpu
