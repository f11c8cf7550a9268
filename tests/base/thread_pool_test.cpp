#include "kvlm/base/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
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

// A thread held up inside its share (here the caller, asleep in its first piece) does not hold
// up the job: the other thread finishes its own share and then takes the rest of the caller's.
// The pool calls the caller's own callable (FunctionRef), never a copy: a job may be an object
// that cannot be copied, and what it records is there when parallel_for returns.
TEST(ThreadPool, RunsTheCallersCallableItselfNotACopy) {
  struct Tally {
    std::atomic<size_t> covered{0};
    void operator()(size_t b, size_t e) { covered += e - b; }
  };
  ThreadPool pool(2);
  Tally tally;
  pool.parallel_for(1000, 8, tally);
  EXPECT_EQ(tally.covered.load(), 1000u);
}

TEST(ThreadPool, AThreadThatFinishesEarlyTakesOverTheRestOfASlowShare) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> ran(64);
  pool.parallel_for(64, 1, [&](size_t b, size_t e) {
    if (b == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (size_t i = b; i < e; ++i) ran[i] = std::this_thread::get_id();
  });
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(ran[i], caller) << i;  // the caller's first piece
  for (size_t i = 16; i < 64; ++i) EXPECT_NE(ran[i], caller) << i;
}

// An exception from the caller's piece reaches the caller only after the workers are done with
// the job (they keep reading it), and the pool stays usable.
TEST(ThreadPool, AnExceptionInTheCallersPieceWaitsForTheWorkers) {
  ThreadPool pool(3);
  std::atomic<int> done{0};
  EXPECT_THROW(pool.parallel_for(3, 1, [&](size_t b, size_t) {
                 if (b == 0) throw std::runtime_error("piece 0");
                 std::this_thread::sleep_for(std::chrono::milliseconds(50));
                 ++done;
               }),
               std::runtime_error);
  EXPECT_EQ(done.load(), 2);
  std::atomic<int> again{0};
  pool.parallel_for(30, 1, [&](size_t b, size_t e) { again += int(e - b); });
  EXPECT_EQ(again.load(), 30);
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

// Posting a job and finishing one skip the mutex unless someone sleeps. Jobs posted and finished
// as threads reach the end of their spinning (pauses from none to beyond the ~10-20 ms of spins
// and yields; pieces that keep the caller waiting as long) must still all complete.
TEST(ThreadPool, NoWakeUpIsLostAroundTheSpinLimit) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 60; ++round) {
    const auto pause = std::chrono::microseconds(round % 12 * 2500);
    pool.parallel_for(3, 1, [&](size_t b, size_t e) {
      if (b != 0) std::this_thread::sleep_for(pause);
      total += int64_t(e - b);
    });
    std::this_thread::sleep_for(pause);
  }
  EXPECT_EQ(total.load(), 60 * 3);
}

TEST(ThreadPool, PinnedWorkersEachRunOnTheirOwnPhysicalCore) {
  const std::vector<int> cpus = physical_core_cpus();
  ASSERT_FALSE(cpus.empty());
  ASSERT_EQ(physical_core_count(), int(cpus.size()));
  const int threads = 3;
  ThreadPool pool(ThreadOptions{threads, true});
  std::vector<std::vector<int>> seen(threads);
  // Index i runs on worker i (the caller is index 0 and is not pinned).
  pool.on_every_thread([&](int b) {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(set), &set), 0);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) seen[size_t(b)].push_back(c);
  });
  for (int i = 1; i < threads; ++i)
    EXPECT_EQ(seen[size_t(i)], std::vector<int>{cpus[size_t(i) % cpus.size()]}) << "worker " << i;
}

TEST(ThreadPool, JobsRunWhileThreadsReadAhead) {
  ThreadPool pool(3);
  std::vector<char> buffer(size_t(4) << 20, 1);
  pool.read_ahead(-1, buffer.data(), buffer.size());  // no such thread: ignored
  pool.read_ahead(3, buffer.data(), buffer.size());   // past the last worker: ignored
  for (int round = 0; round < 50; ++round) {
    pool.read_ahead(round % 3, buffer.data(), buffer.size());  // the caller too, at index 0
    std::vector<std::atomic<int>> hits(1000);
    pool.parallel_for(hits.size(), 8, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) ++hits[i];
    });
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round << ", index " << i;
  }
}

}  // namespace kvlm
