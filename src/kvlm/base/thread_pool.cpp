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
  shares_ = std::make_unique<Share[]>(size_t(n_threads));
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
// Bytes read ahead per wait iteration.
constexpr size_t kAheadStep = 1024;
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

// A share's state packs its unclaimed grain blocks [front, back) as front << 32 | back.
uint64_t share_state(uint64_t front, uint64_t back) { return front << 32 | back; }
uint64_t share_front(uint64_t s) { return s >> 32; }
uint64_t share_back(uint64_t s) { return s & 0xffffffffu; }
uint64_t unclaimed(uint64_t s) { return share_back(s) - std::min(share_front(s), share_back(s)); }

}  // namespace

namespace {

// Shares count grain blocks in 32 bits: coarser blocks (still multiples of grain) past that.
size_t block_grain(size_t n, size_t grain) {
  grain = std::max<size_t>(grain, 1);
  if (const size_t over = (n / grain) >> 31) grain *= over + 1;
  return grain;
}

}  // namespace

size_t ThreadPool::share(size_t n, size_t grain) const {
  grain = block_grain(n, grain);
  const size_t threads = size_t(size());
  return ((n + threads - 1) / threads + grain - 1) / grain * grain;
}

void ThreadPool::parallel_for(size_t n, size_t grain, FunctionRef<void(size_t, size_t)> fn) {
  if (n == 0) return;
  grain = block_grain(n, grain);
  const size_t threads = size_t(size());
  const size_t chunk = share(n, grain);
  if (threads == 1 || chunk >= n) {
    fn(0, n);
    return;
  }
  run_job(fn, n, chunk, grain, true);
}

void ThreadPool::on_every_thread(FunctionRef<void(int)> fn) {
  if (workers_.empty()) return fn(0);
  run_job([&](size_t b, size_t) { fn(int(b)); }, size_t(size()), 1, 1, false);
}

void ThreadPool::run_job(FunctionRef<void(size_t, size_t)> fn, size_t n, size_t chunk,
                         size_t grain, bool steal) {
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  job_steal_ = steal;
  const uint64_t blocks = (n + grain - 1) / grain, share_blocks = chunk / grain;
  for (size_t i = 0; i < size_t(size()); ++i) {
    const uint64_t front = std::min(i * share_blocks, blocks), back = std::min((i + 1) * share_blocks, blocks);
    shares_[i].state.store(share_state(front, back), std::memory_order_relaxed);
  }
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  // Both seq_cst: either a worker going to sleep sees the new generation, or this sees it asleep.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) wake(start_cv_);
  try {
    run_share(0);  // the caller's share
  } catch (...) {
    wait_until_done();  // the workers still read the job; they take over the rest of this share
    job_ = nullptr;
    throw;
  }
  wait_until_done();
  job_ = nullptr;
}

bool ThreadPool::claim(size_t share, bool owner, size_t& begin, size_t& end) {
  std::atomic<uint64_t>& state = shares_[share].state;
  uint64_t s = state.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t front = share_front(s), back = share_back(s);
    if (front >= back) return false;
    // Halves keep an owner's first piece long (one stream) and let helpers converge quickly.
    const uint64_t take = job_steal_ ? (back - front + 1) / 2 : back - front;
    const uint64_t next = owner ? share_state(front + take, back) : share_state(front, back - take);
    if (state.compare_exchange_weak(s, next, std::memory_order_relaxed)) {
      const uint64_t first = owner ? front : back - take;
      begin = size_t(first) * job_grain_;
      end = std::min(size_t(first + take) * job_grain_, job_n_);
      return true;
    }
  }
}

void ThreadPool::run_share(int index) {
  size_t b, e;
  while (claim(size_t(index), true, b, e)) (*job_)(b, e);
  if (!job_steal_) return;
  for (;;) {
    uint64_t most = 0;
    size_t fullest = 0;
    for (size_t i = 0; i < size_t(size()); ++i) {
      const uint64_t left = unclaimed(shares_[i].state.load(std::memory_order_relaxed));
      if (left > most) most = left, fullest = i;
    }
    if (most == 0) return;
    if (claim(fullest, false, b, e)) (*job_)(b, e);
  }
}

void ThreadPool::wake(std::condition_variable& cv) {
  // The sleeper holds mu_ from announcing itself until it waits: locking here waits for that.
  { std::lock_guard<std::mutex> lock(mu_); }
  cv.notify_all();
}

void ThreadPool::wait_until_done() {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    if (!read_ahead_step(0)) cpu_relax(i);
  }
  std::unique_lock<std::mutex> lock(mu_);
  caller_sleeping_.store(true, std::memory_order_seq_cst);
  done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_seq_cst) == 0; });
  caller_sleeping_.store(false, std::memory_order_relaxed);
}

void ThreadPool::read_ahead(int index, const void* p, size_t bytes) {
  if (index < 0 || index >= size()) return;
  Share& s = shares_[size_t(index)];
  s.ahead_bytes.store(bytes, std::memory_order_relaxed);
  s.ahead.store(static_cast<const char*>(p), std::memory_order_release);
}

bool ThreadPool::read_ahead_step(int index) {
  Share& share = shares_[size_t(index)];
  if (const char* p = share.ahead.exchange(nullptr, std::memory_order_acquire)) {
    share.ahead_at = p;
    share.ahead_left = share.ahead_bytes.load(std::memory_order_relaxed);
  }
  if (share.ahead_left == 0) return false;
  // A prefetch never faults: a stale range costs bandwidth only.
  const size_t n = std::min(share.ahead_left, kAheadStep);
  for (size_t b = 0; b < n; b += kLine) __builtin_prefetch(share.ahead_at + b);
  share.ahead_at += n;
  share.ahead_left -= n;
  return true;
}

unsigned ThreadPool::wait_for_job(unsigned seen, int index) {
  for (int i = 0; i < kSpinIterations; ++i) {
    const unsigned g = generation_.load(std::memory_order_acquire);
    if (g != seen || stop_.load(std::memory_order_relaxed)) return g;
    if (!read_ahead_step(index)) cpu_relax(i);
  }
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
  start_cv_.wait(lock, [&] { return stop_.load() || generation_.load(std::memory_order_seq_cst) != seen; });
  sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
  return generation_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop(int index) {
  unsigned seen = 0;  // generation_ starts at 0, so a job posted before this thread ran is seen
  for (;;) {
    seen = wait_for_job(seen, index);
    if (stop_.load()) return;
    run_share(index);
    // Both seq_cst, as for the start of a job: the caller sees pending_ at 0, or this sees it asleep.
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_sleeping_.load(std::memory_order_seq_cst))
      wake(done_cv_);
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
