#pragma once
// The inner kernel of linear layers: a block of dot products between token rows of x and weight
// rows stored as f32, bf16 or f16. Every implementation widens the weights exactly and computes
// each output with exactly the reduction order of cpu::dot (eight lanes of separately rounded
// multiply-then-add, a fixed combining tree, then the tail), so the SIMD kernels are bit-identical
// to the portable one and the choice of ISA never changes a result.
#include <cstdint>

#include "kvlm/tensor/dtype.h"

namespace kvlm::cpu {

// y[t * ldy + r] = dot(x + t * in, widen(rows[r]), in) for t < T, r < R; rows hold `row_dtype`.
using DotBlockFn = void (*)(const float* x, int64_t T, int64_t in, const void* const* rows,
                            DType row_dtype, int64_t R, float* y, int64_t ldy);

void dot_block_portable(const float* x, int64_t T, int64_t in, const void* const* rows,
                        DType row_dtype, int64_t R, float* y, int64_t ldy);
void dot_block_avx2(const float* x, int64_t T, int64_t in, const void* const* rows, DType row_dtype,
                    int64_t R, float* y, int64_t ldy);

// The kernel for this CPU, chosen once: AVX2 (with F16C) when present, unless the environment
// variable KVLM_CPU_ISA=portable forces the portable loop (tests run both paths this way).
DotBlockFn dot_block_kernel();
const char* dot_block_isa();

}  // namespace kvlm::cpu
