#include "kvlm/base/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>

namespace kvlm {

int physical_core_count() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  int physical = 0;
  std::string line;
  while (std::getline(in, line)) {
    auto value = [&] { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) physical = value();
    if (line.rfind("core id", 0) == 0) cores.insert({physical, value()});
  }
  int n = int(cores.size());
  if (n == 0) n = int(std::thread::hardware_concurrency());
  return std::max(n, 1);
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = physical_core_count();
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

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
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    pending_ = int(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  fn(0, std::min(chunk, n));  // the caller takes chunk 0
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  unsigned seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* job;
    size_t n, chunk;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      chunk = job_chunk_;
    }
    const size_t begin = size_t(index) * chunk;
    if (begin < n) (*job)(begin, std::min(begin + chunk, n));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

namespace {
int g_requested_threads = 0;
}

void ThreadPool::configure_global(int n_threads) { g_requested_threads = n_threads; }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_requested_threads);
  return pool;
}

}  // namespace kvlm
