#include "kvlm/base/probes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kvlm/base/host_memory.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm {
namespace {

struct Buffer {
  std::unique_ptr<uint8_t, decltype(&std::free)> p{static_cast<uint8_t*>(allocate_host(512, false)), std::free};
  uint8_t* data() const { return p.get(); }
};

TEST(Probes, StreamReadDependsOnEveryByteOfItsWholeBlocks) {
  Buffer buf;
  for (int i = 0; i < 512; ++i) buf.data()[i] = uint8_t(i * 7 + 3);
  const uint64_t base = stream_read(buf.data(), 384);
  for (int i = 0; i < 384; ++i) {
    buf.data()[i] ^= 0x10;
    EXPECT_NE(stream_read(buf.data(), 384), base) << "byte " << i;
    buf.data()[i] ^= 0x10;
  }
}

TEST(Probes, StreamReadLeavesOutAPartialLastBlock) {
  Buffer buf;
  for (int i = 0; i < 512; ++i) buf.data()[i] = uint8_t(i);
  const uint64_t whole = stream_read(buf.data(), 256);
  buf.data()[300] ^= 0xFF;
  EXPECT_EQ(stream_read(buf.data(), 300), whole);
  EXPECT_EQ(stream_read(buf.data(), 100), 0u);
}

TEST(Probes, ReadBandwidthIsPositiveOnEveryPoolSize) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    EXPECT_GT(probe_read_bandwidth(pool, size_t(1) << 20, 1), 0.0) << threads << " threads";
  }
}

TEST(Probes, ThreadSpeedsAreFractionsOfTheFastest) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "the FMA loop needs AVX2";
  ThreadPool one(1), three(3);
  EXPECT_EQ(probe_thread_speeds(one), std::vector<double>{1.0});
  const std::vector<double> speeds = probe_thread_speeds(three);
  ASSERT_EQ(speeds.size(), 3u);
  for (double s : speeds) EXPECT_TRUE(s > 0 && s <= 1) << s;
  EXPECT_EQ(*std::max_element(speeds.begin(), speeds.end()), 1.0);
}

TEST(Probes, HandoffIsMeasuredBetweenTwoThreadsOnly) {
  ThreadPool one(1), three(3);
  EXPECT_EQ(probe_handoff(one), 0.0);
  EXPECT_GT(probe_handoff(three, 1000), 0.0);
}

}  // namespace
}  // namespace kvlm
