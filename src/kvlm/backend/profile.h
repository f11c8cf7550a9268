#pragma once
// Time per op kind, for `kvlm bench --profile`: each op entry point opens a ProfileScope, which
// costs one relaxed load when profiling is off. Totals are process-wide.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace kvlm::ops {

enum class OpKind { kEmbedding, kLinear, kNorm, kRope, kKVWrite, kAttention, kActivation,
                    kElementwise, kCount };
const char* op_kind_name(OpKind kind);

void set_profiling(bool on);
void reset_profile();

struct OpTime {
  OpKind kind;
  int64_t calls;
  double seconds;
};
// One entry per kind with at least one call since the last reset.
std::vector<OpTime> profile_snapshot();

namespace detail {
extern std::atomic<bool> g_profiling;
void record(OpKind kind, int64_t nanoseconds);
}  // namespace detail

class ProfileScope {
 public:
  explicit ProfileScope(OpKind kind)
      : kind_(kind), on_(detail::g_profiling.load(std::memory_order_relaxed)) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (on_)
      detail::record(kind_, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - start_).count());
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  OpKind kind_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kvlm::ops
