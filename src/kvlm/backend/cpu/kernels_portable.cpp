// The reference paths of dot.h and linear_rows.h, and the per-ISA dispatch tables.
#include <algorithm>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/cpu/linear_rows.h"

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

void linear_rows_portable(const LinearRows& job) {
  const int64_t in = job.w->in_features;
  std::vector<float> buf(static_cast<size_t>(in));
  for (int64_t r = 0; r < job.R; ++r) {
    const float* w = weight_row(*job.w, job.r0 + r, buf.data());
    for (int64_t t = 0; t < job.T; ++t) job.y[t * job.ldy + r] = dot_portable(job.x + t * in, w, in);
  }
}

DotFn dot_kernel(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return dot_avx512;
    case Isa::kAvx2: return dot_avx2;
    case Isa::kPortable: break;
  }
  return dot_portable;
}

LinearRowsFn linear_rows_kernel(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return linear_rows_avx512;
    case Isa::kAvx2: return linear_rows_avx2;
    case Isa::kPortable: break;
  }
  return linear_rows_portable;
}

}  // namespace kvlm::cpu
