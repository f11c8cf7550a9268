#include "kvlm/base/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
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

// Jobs posted back to back (workers spinning) and after a pause long enough for the workers to
// fall asleep must all run completely: no lost wake-up in either state.
TEST(ThreadPool, BackToBackAndAfterSleepJobsAllComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 3; ++round) {
    for (int job = 0; job < 2000; ++job)
      pool.parallel_for(30, 1, [&](size_t b, size_t e) { total += int64_t(e - b); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(total.load(), int64_t(3) * 2000 * 30);
}

TEST(ThreadPool, PinnedWorkersEachRunOnTheirOwnPhysicalCore) {
  const std::vector<int> cpus = physical_core_cpus();
  ASSERT_FALSE(cpus.empty());
  ASSERT_EQ(physical_core_count(), int(cpus.size()));
  const int threads = 3;
  ThreadPool pool(ThreadOptions{threads, true});
  std::vector<std::vector<int>> seen(threads);
  // One index per chunk: chunk i runs on worker i (the caller takes chunk 0 and is not pinned).
  pool.parallel_for(threads, 1, [&](size_t b, size_t) {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(set), &set), 0);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) seen[b].push_back(c);
  });
  for (int i = 1; i < threads; ++i)
    EXPECT_EQ(seen[size_t(i)], std::vector<int>{cpus[size_t(i) % cpus.size()]}) << "worker " << i;
}

}  // namespace kvlm
