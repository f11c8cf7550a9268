#include "kvlm/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace kvlm {

TEST(ThreadPool, CoversEveryIndexOnceInGrainMultiples) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (size_t n : {1u, 7u, 64u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, 8, [&](size_t b, size_t e) {
        EXPECT_EQ(b % 8, 0u);
        for (size_t i = b; i < e; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
    }
  }
}

}  // namespace kvlm
