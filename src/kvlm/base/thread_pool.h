#pragma once
// A persistent pool of worker threads. Work is split over independent output ranges only: a
// reduction is never divided between threads, so results do not depend on the thread count
// (batch invariance, DESIGN.md §1).
//
// A decode step calls parallel_for a few hundred times, each lasting tens of microseconds, so
// waking sleeping threads through a condition variable every time would cost more than the work.
// Workers and the caller therefore spin on atomics for a short while (pauses, then yields so that
// a busy machine still runs the thread holding the work) before they sleep; an idle pool sleeps.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kvlm/base/function_ref.h"

namespace kvlm {

// The size of a pool and whether its workers are pinned (--threads, --pin-threads).
struct ThreadOptions {
  int threads = 0;   // including the calling thread; 0 = one per physical core
  // Worker i runs only on the i-th physical core (the first logical CPU of each core that the
  // process may use). The calling thread, which belongs to the application, is left free; with
  // one worker per remaining core the scheduler keeps it on core 0.
  bool pin = false;
};

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads = 0) : ThreadPool(ThreadOptions{n_threads, false}) {}
  explicit ThreadPool(const ThreadOptions& options);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint pieces covering [0, n), each a multiple of `grain` (except
  // the last), and returns when all are done. Runs inline when one thread's share is all of it.
  // Every thread starts on its own contiguous share, front to back, so that each reads one long
  // stream; a thread that finishes early takes pieces off the back of the share with the most
  // left, so that a thread slowed by the machine (a preempted vCPU, a cold start) holds nobody up.
  // Which thread runs a piece never changes what it computes: work is split over outputs only.
  void parallel_for(size_t n, size_t grain, FunctionRef<void(size_t, size_t)> fn);

  // Calls fn(thread index) exactly once on every thread of the pool (the caller is index 0), for
  // work that must occupy all of them at once, such as the bandwidth probes.
  void on_every_thread(FunctionRef<void(int)> fn);

  // The length of thread i's share of parallel_for(n, grain): thread i owns [i*share, (i+1)*share)
  // of [0, n) before any piece is taken by another thread.
  size_t share(size_t n, size_t grain) const;

  // Bytes that thread `index` (0 .. size()-1) fetches into its caches while it waits, a few cache
  // lines per spin: a worker for its next job, the caller (index 0) for the workers to finish a
  // job. Decode gives each thread the start of its share of the next weight, so memory keeps
  // streaming while the caller works alone or waits. A later call replaces the range.
  void read_ahead(int index, const void* p, size_t bytes);

  // The process-wide pool used by the CPU backend; created on first use.
  static ThreadPool& global();

  // Sets the size and pinning of the global pool before its first use.
  static void configure_global(const ThreadOptions& options);

 private:
  void worker_loop(int index);
  // Posts the job to the workers, runs the caller's part and waits for the rest.
  void run_job(FunctionRef<void(size_t, size_t)> fn, size_t n, size_t chunk, size_t grain, bool steal);
  // Runs thread `index`'s share of the current job, then (when stealing) helps with the others.
  void run_share(int index);
  // Claims the next piece of share i: from its front for its owner, from its back for a helper.
  // Returns false when nothing of it is left.
  bool claim(size_t share, bool owner, size_t& begin, size_t& end);

  // Waits until generation_ differs from `seen` or the pool stops, reading ahead for thread
  // `index` meanwhile; returns the new generation.
  unsigned wait_for_job(unsigned seen, int index);
  // Fetches the next step of thread `index`'s read-ahead range; false when none is left.
  bool read_ahead_step(int index);
  void wait_until_done();
  // Wakes the threads sleeping on cv (under mu_), which announced themselves before they slept.
  void wake(std::condition_variable& cv);

  // What one thread writes sits on its own cache lines (shares, pending_, the job): a round moves
  // each line between cores once instead of bouncing lines that two threads write.
  static constexpr size_t kLine = 64;
  // Per thread share, the unclaimed grain blocks [front, back) packed as front << 32 | back.
  struct alignas(kLine) Share {
    std::atomic<uint64_t> state;
    std::atomic<const char*> ahead{nullptr};  // read_ahead's range, taken by its thread
    std::atomic<size_t> ahead_bytes{0};
    const char* ahead_at = nullptr;  // the thread's progress through the range it took,
    size_t ahead_left = 0;           // kept across the jobs it runs meanwhile
  };

  std::vector<std::thread> workers_;
  // Guards sleeping: a thread holds it from announcing that it sleeps (sleeping_workers_,
  // caller_sleeping_) until it waits; stop_ changes only while holding it. Posting a job and
  // finishing one take it only when someone sleeps: with a worker spinning, a round is then
  // two cache-line transfers each way instead of also moving the mutex between cores.
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::unique_ptr<Share[]> shares_;
  // The job, published to workers by the release increment of generation_.
  alignas(kLine) const FunctionRef<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0, job_grain_ = 1;
  bool job_steal_ = false;
  std::atomic<unsigned> generation_{0};
  std::atomic<bool> stop_{false};
  alignas(kLine) std::atomic<int> pending_{0};  // workers still running the current job
};

// Number of physical cores this process may run on (hyper-threads of one core count once).
int physical_core_count();
// One logical CPU per physical core, among those this process may run on, in CPU order.
std::vector<int> physical_core_cpus();

}  // namespace kvlm
