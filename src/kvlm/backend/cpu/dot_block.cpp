#include "kvlm/backend/cpu/dot_block.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"

namespace kvlm::cpu {

void dot_block_portable(const float* x, int64_t T, int64_t in, const void* const* rows,
                        DType row_dtype, int64_t R, float* y, int64_t ldy) {
  std::vector<float> buf(row_dtype == DType::kF32 ? 0 : static_cast<size_t>(in));
  for (int64_t r = 0; r < R; ++r) {
    const float* w = static_cast<const float*>(rows[r]);
    if (row_dtype != DType::kF32) {
      const auto* h = static_cast<const uint16_t*>(rows[r]);
      for (int64_t i = 0; i < in; ++i)
        buf[size_t(i)] = row_dtype == DType::kBF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
      w = buf.data();
    }
    for (int64_t t = 0; t < T; ++t) y[t * ldy + r] = dot(x + t * in, w, in);
  }
}

namespace {

bool use_avx2() {
  const char* isa = std::getenv("KVLM_CPU_ISA");
  if (isa && std::strcmp(isa, "portable") == 0) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

}  // namespace

DotBlockFn dot_block_kernel() {
  static const DotBlockFn fn = use_avx2() ? dot_block_avx2 : dot_block_portable;
  return fn;
}

const char* dot_block_isa() { return dot_block_kernel() == dot_block_avx2 ? "avx2" : "portable"; }

}  // namespace kvlm::cpu
