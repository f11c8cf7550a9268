#include "kvlm/base/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>

namespace kvlm {

void* allocate_host(size_t bytes, bool huge_pages) {
  const size_t alignment = huge_pages && bytes >= kHugePageBytes ? kHugePageBytes : 64;
  void* p = nullptr;
  if (posix_memalign(&p, alignment, bytes) != 0) return nullptr;
  // Best effort: a kernel without transparent huge pages refuses, and the buffer keeps 4 KB pages.
  if (alignment == kHugePageBytes) madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  return p;
}

}  // namespace kvlm
