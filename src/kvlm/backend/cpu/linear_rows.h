#pragma once
// The inner kernel of linear layers: outputs r0 .. r0+R-1 of y = x · Wᵀ for T token rows, against
// any stored weight format (dense f32/bf16/f16 or MLX affine). Every output reduces the weight row
// exactly as cpu::weight_row widens or dequantizes it, one fma after another along the input
// (panels.h). The ISA paths are bit-identical to linear_rows_portable and tiling never changes a
// result.
#include <cstdint>
#include <memory>

#include "kvlm/base/cpu_isa.h"
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

// x [T, in] in the order the panel kernels read it: tokens in groups of `tokens`, element k of a
// group's token u at k * tokens + u, the last group zero-padded to whole tokens. LinearKernel packs
// x once per call, before the output rows are split among threads: packed inside each thread's
// pieces of rows instead, a 512-token prefill repacked its inputs for every piece (up to 6 per
// thread; 0.5 ms each for the 4864-wide down projection).
struct PackedX {
  std::unique_ptr<float[]> data;
  int64_t group = 0;  // floats per group
  int tokens = 0;
};

// Packs x [T, in] in groups of `tokens`, the groups in parallel.
PackedX pack_x(const float* x, int64_t T, int64_t in, int tokens);

// The portable path reads job.x and ignores `x`; the SIMD paths read only `x`.
void linear_rows_portable(const LinearRows& job, const PackedX& x);
void linear_rows_avx2(const LinearRows& job, const PackedX& x);
void linear_rows_avx512(const LinearRows& job, const PackedX& x);
int linear_token_group_avx2(int64_t T);
int linear_token_group_avx512(int64_t T);

struct LinearRowsKernel {
  void (*run)(const LinearRows& job, const PackedX& x);
  // The `tokens` of the PackedX that run reads for T tokens; null: none.
  int (*token_group)(int64_t T);
};
LinearRowsKernel linear_rows_kernel(Isa isa);

}  // namespace kvlm::cpu
