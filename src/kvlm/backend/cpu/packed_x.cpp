// Token packing for the SIMD linear kernels (linear_rows.h: PackedX).
#include <algorithm>

#include "kvlm/backend/cpu/linear_rows.h"
#include "kvlm/backend/ops.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm::cpu {

PackedX pack_x(const float* x, int64_t T, int64_t in, int tokens) {
  PackedX p;
  p.tokens = tokens;
  p.group = in * tokens;
  const int64_t groups = (T + tokens - 1) / tokens;
  p.data.reset(new float[size_t(groups * p.group)]);
  ops::thread_pool().parallel_for(size_t(groups), 1, [&](size_t b, size_t e) {
    for (int64_t g = int64_t(b); g < int64_t(e); ++g) {
      // Written in order, read from the group's rows side by side (padding tokens read zeros).
      const int64_t real = std::min<int64_t>(tokens, T - g * tokens);
      float* dst = p.data.get() + g * p.group;
      for (int64_t k = 0; k < in; ++k, dst += tokens) {
        for (int64_t u = 0; u < real; ++u) dst[u] = x[(g * tokens + u) * in + k];
        std::fill(dst + real, dst + tokens, 0.0f);
      }
    }
  });
  return p;
}

}  // namespace kvlm::cpu
