#pragma once
// Host buffers for tensors and the bandwidth probe.
//
// Decode streams every weight once per token; with 4 KB pages that is a TLB miss and a page walk
// every 4 KB, and the hardware prefetcher stops at every page boundary. Buffers asked for with
// huge_pages, of at least one huge page, are therefore aligned to 2 MB and their whole 2 MB
// extents advised as huge pages (transparent huge pages in "madvise" mode, Linux's usual
// default). The tail beyond the last whole extent keeps small pages, so no memory is spent on
// rounding. The read probe allocates the same way, so the bandwidth limit it reports is the one
// the weights can reach.
#include <cstddef>

namespace kvlm {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;

// 64-byte aligned (2 MB with huge_pages from kHugePageBytes up); nullptr when out of memory.
// Free with std::free.
void* allocate_host(size_t bytes, bool huge_pages);

}  // namespace kvlm
