#include "kvlm/base/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>

namespace kvlm {

std::vector<int> physical_core_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool known = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::vector<int> cpus;
  int processor = -1, physical = 0;
  std::string line;
  while (std::getline(in, line)) {
    auto value = [&] { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("processor", 0) == 0) processor = value();
    if (line.rfind("physical id", 0) == 0) physical = value();
    if (line.rfind("core id", 0) == 0 && processor >= 0 &&
        (!known || CPU_ISSET(size_t(processor), &allowed)) && cores.insert({physical, value()}).second)
      cpus.push_back(processor);
  }
  return cpus;
}

int physical_core_count() {
  const size_t n = physical_core_cpus().size();
  return std::max(n > 0 ? int(n) : int(std::thread::hardware_concurrency()), 1);
}

namespace {

// Best effort: a CPU the process may not use, or a kernel that refuses, leaves the thread free.
void pin_to_cpu(std::thread& t, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(size_t(cpu), &set);
  pthread_setaffinity_np(t.native_handle(), sizeof(set), &set);
}

}  // namespace

ThreadPool::ThreadPool(const ThreadOptions& options) {
  const int n_threads = options.threads > 0 ? options.threads : physical_core_count();
  const std::vector<int> cpus = options.pin ? physical_core_cpus() : std::vector<int>{};
  for (int i = 1; i < n_threads; ++i) {
    workers_.emplace_back([this, i] { worker_loop(i); });
    if (!cpus.empty()) pin_to_cpu(workers_.back(), cpus[size_t(i) % cpus.size()]);
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {

constexpr int kSpinIterations = 20000;
// After this many pauses a waiter yields its core on every further iteration, so that on a busy
// or oversubscribed machine the thread holding the work gets to run.
constexpr int kPauseIterations = 2000;

inline void cpu_relax(int iteration) {
  if (iteration >= kPauseIterations) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t threads = size_t(size());
  size_t chunk = (n + threads - 1) / threads;
  chunk = (chunk + grain - 1) / grain * grain;
  if (threads == 1 || chunk >= n) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleeping_workers_ > 0;
  }
  if (wake) start_cv_.notify_all();
  fn(0, std::min(chunk, n));  // the caller takes chunk 0
  wait_until_done();
  job_ = nullptr;
}

void ThreadPool::wait_until_done() {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    cpu_relax(i);
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

unsigned ThreadPool::wait_for_job(unsigned seen) {
  for (int i = 0; i < kSpinIterations; ++i) {
    const unsigned g = generation_.load(std::memory_order_acquire);
    if (g != seen || stop_.load(std::memory_order_relaxed)) return g;
    cpu_relax(i);
  }
  std::unique_lock<std::mutex> lock(mu_);
  ++sleeping_workers_;
  start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
  --sleeping_workers_;
  return generation_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop(int index) {
  unsigned seen = 0;  // generation_ starts at 0, so a job posted before this thread ran is seen
  for (;;) {
    seen = wait_for_job(seen);
    if (stop_.load()) return;
    const size_t begin = size_t(index) * job_chunk_;
    if (begin < job_n_) (*job_)(begin, std::min(begin + job_chunk_, job_n_));
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller may be about to sleep on done_cv_
      done_cv_.notify_one();
    }
  }
}

namespace {
ThreadOptions g_requested;
}

void ThreadPool::configure_global(const ThreadOptions& options) { g_requested = options; }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_requested);
  return pool;
}

}  // namespace kvlm
