#include "kvlm/backend/ops.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm::ops {

namespace {
ThreadPool* g_pool = nullptr;
}

ThreadPool& thread_pool() { return g_pool ? *g_pool : ThreadPool::global(); }
void set_thread_pool(ThreadPool* pool) { g_pool = pool; }

}  // namespace kvlm::ops
