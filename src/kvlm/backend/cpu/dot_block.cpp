#include "kvlm/backend/cpu/dot_block.h"

#include <cstdlib>
#include <cstring>

#include "kvlm/backend/cpu/cpu_kernels.h"

namespace kvlm::cpu {

void dot_block_portable(const float* x, int64_t T, int64_t in, const float* const* rows, int64_t R,
                        float* y, int64_t ldy) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < R; ++r) y[t * ldy + r] = dot(x + t * in, rows[r], in);
}

namespace {

bool use_avx2() {
  const char* isa = std::getenv("KVLM_CPU_ISA");
  if (isa && std::strcmp(isa, "portable") == 0) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

}  // namespace

DotBlockFn dot_block_kernel() {
  static const DotBlockFn fn = use_avx2() ? dot_block_avx2 : dot_block_portable;
  return fn;
}

const char* dot_block_isa() { return dot_block_kernel() == dot_block_avx2 ? "avx2" : "portable"; }

}  // namespace kvlm::cpu
