#include "kvlm/backend/profile.h"

namespace kvlm::ops {

namespace {

constexpr int kKinds = int(OpKind::kCount);
std::atomic<int64_t> g_calls[kKinds];
std::atomic<int64_t> g_nanoseconds[kKinds];

}  // namespace

namespace detail {
std::atomic<bool> g_profiling{false};

void record(OpKind kind, int64_t nanoseconds) {
  g_calls[int(kind)].fetch_add(1, std::memory_order_relaxed);
  g_nanoseconds[int(kind)].fetch_add(nanoseconds, std::memory_order_relaxed);
}
}  // namespace detail

const char* op_kind_name(OpKind kind) {
  static constexpr const char* kNames[kKinds] = {"embedding", "linear", "norm", "rope",
                                                 "kv_write", "attention", "activation",
                                                 "elementwise"};
  return kNames[int(kind)];
}

void set_profiling(bool on) { detail::g_profiling.store(on); }

void reset_profile() {
  for (int k = 0; k < kKinds; ++k) {
    g_calls[k].store(0);
    g_nanoseconds[k].store(0);
  }
}

std::vector<OpTime> profile_snapshot() {
  std::vector<OpTime> out;
  for (int k = 0; k < kKinds; ++k)
    if (const int64_t calls = g_calls[k].load(); calls > 0)
      out.push_back({OpKind(k), calls, double(g_nanoseconds[k].load()) * 1e-9});
  return out;
}

}  // namespace kvlm::ops
