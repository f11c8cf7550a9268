#pragma once
// The inner kernel of linear layers: outputs r0 .. r0+R-1 of y = x · Wᵀ for T token rows, against
// any stored weight format (dense f32/bf16/f16 or MLX affine). Every output is dot(x_t, w_r) in the
// order of dot.h, with the weight row exactly as cpu::weight_row widens or dequantizes it, so the
// ISA paths are bit-identical to linear_rows_portable and tiling never changes a result.
#include <cstdint>

#include "kvlm/backend/cpu/isa.h"
#include "kvlm/backend/ops.h"

namespace kvlm::cpu {

struct LinearRows {
  const float* x = nullptr;  // activations [T, in], row-major
  int64_t T = 0;
  const ops::Weight* w = nullptr;
  int64_t r0 = 0, R = 0;     // output features r0 .. r0+R-1
  float* y = nullptr;        // y[t * ldy + (r - r0)]; the bias is not added
  int64_t ldy = 0;
};

void linear_rows_portable(const LinearRows& job);
void linear_rows_avx2(const LinearRows& job);
void linear_rows_avx512(const LinearRows& job);

using LinearRowsFn = void (*)(const LinearRows& job);
LinearRowsFn linear_rows_kernel(Isa isa);

}  // namespace kvlm::cpu
