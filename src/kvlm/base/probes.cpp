#include "kvlm/base/probes.h"

// GCC 12 reports false "uninitialized __Y" warnings inside its own AVX-512 intrinsic headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kvlm/base/cpu_isa.h"
#include "kvlm/base/error.h"
#include "kvlm/base/host_memory.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

__attribute__((target("avx2"))) uint64_t stream_read(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    acc0 = _mm256_xor_si256(acc0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    acc1 = _mm256_xor_si256(acc1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    acc2 = _mm256_xor_si256(acc2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    acc3 = _mm256_xor_si256(acc3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(acc0, acc1), _mm256_xor_si256(acc2, acc3));
  return uint64_t(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 1) ^ _mm256_extract_epi64(x, 2) ^
                  _mm256_extract_epi64(x, 3));
}

namespace {

// Runs fn(thread index) once on every thread of the pool and returns the wall time.
template <typename Fn>
double on_every_thread(ThreadPool& pool, Fn fn) {
  const auto t0 = std::chrono::steady_clock::now();
  pool.on_every_thread([&](int i) { fn(size_t(i)); });
  return seconds_since(t0);
}

constexpr int64_t kPeakIterations = 20'000'000;

// Twelve independent FMA chains hide the instruction latency (4 cycles, 2 ports).
__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(float(k));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  __m512 s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_ps(s, acc[k]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_ps(float(k));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  alignas(32) float l[8];
  __m256 s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, acc[k]);
  _mm256_store_ps(l, s);
  return l[0] + l[7];
}

__attribute__((target("avx512f,avx512vnni"))) int32_t vnni_loop_avx512(int64_t iters) {
  __m512i acc[12];
  for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
  __m512i s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_epi32(s, acc[k]);
  return _mm512_reduce_add_epi32(s);
}

// The AVX2 int8 kernels' pair: vpmaddubsw (32 u8 x s8 products, summed in pairs) and an int16 add,
// 12 pairs per iteration as the other loops, into 6 sums (an int16 add takes one cycle). The empty
// asm makes `a` new to the compiler before every product, which would otherwise compute the
// loop-invariant product once and time the adds alone.
__attribute__((target("avx2"))) int32_t int8_loop_avx2(int64_t iters) {
  __m256i acc[6];
  for (int k = 0; k < 6; ++k) acc[k] = _mm256_set1_epi16(int16_t(k));
  __m256i a = _mm256_set1_epi8(3);
  const __m256i b = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) {
      asm volatile("" : "+x"(a));
      acc[k % 6] = _mm256_add_epi16(acc[k % 6], _mm256_maddubs_epi16(a, b));
    }
  __m256i s = acc[0];
  for (int k = 1; k < 6; ++k) s = _mm256_add_epi16(s, acc[k]);
  return _mm256_extract_epi16(s, 0);
}

volatile float g_sink_f;
volatile int32_t g_sink_i;

// Lanes of the FMA loop on `isa`'s vector unit: 16 (AVX-512), 8 (AVX2), or 0 (no loop).
int lanes_of(cpu::Isa isa) {
  switch (isa) {
    case cpu::Isa::kAvx512: return 16;
    case cpu::Isa::kAvx2: return 8;
    default: return 0;
  }
}

// The FMA peak's unit is the kernels' (cpu::cpu_isa(), so KVLM_CPU_ISA caps it as it caps them).
int fma_lanes() { return lanes_of(cpu::cpu_isa()); }

// The FMA loop of that many lanes; callers check that there is one.
float fma_loop(int lanes, int64_t iters) { return lanes == 16 ? fma_loop_avx512(iters) : fma_loop_avx2(iters); }

}  // namespace

const char* probe_fma_isa() {
  switch (fma_lanes()) {
    case 16: return "avx512f";
    case 8: return "avx2";
    default: return "scalar";
  }
}

double probe_read_bandwidth(ThreadPool& pool, size_t bytes, int repeats) {
  const size_t threads = size_t(pool.size());
  const size_t slice = bytes / threads / 128 * 128;
  auto* buf = static_cast<uint8_t*>(allocate_host(slice * threads, true));
  check(buf != nullptr, "read probe: out of memory allocating " + std::to_string(slice * threads) + " bytes");
  std::unique_ptr<uint8_t, decltype(&std::free)> owner(buf, std::free);
  // Each thread touches its own slice first, so pages live near the thread that reads them.
  on_every_thread(pool, [&](size_t t) { std::memset(buf + t * slice, int(t + 1), slice); });
  std::vector<uint64_t> sink(threads);
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const double s = on_every_thread(pool, [&](size_t t) { sink[t] = stream_read(buf + t * slice, slice); });
    best = std::max(best, double(slice * threads) / s);
  }
  g_sink_i = int32_t(sink[0]);
  return best;
}

double probe_handoff(ThreadPool& pool, int trips) {
  if (pool.size() < 2) return 0;
  struct alignas(64) Line {
    std::atomic<int> value{-1};
  };
  Line ping, pong;  // written by the caller and by thread 1 respectively
  double seconds = 0;
  pool.on_every_thread([&](int t) {
    if (t == 1) {
      for (int i = 0; i <= trips; ++i) {
        while (ping.value.load(std::memory_order_acquire) != i) __builtin_ia32_pause();
        pong.value.store(i, std::memory_order_release);
      }
    }
    if (t != 0) return;
    const auto trip = [&](int i) {
      ping.value.store(i, std::memory_order_release);
      while (pong.value.load(std::memory_order_acquire) != i) __builtin_ia32_pause();
    };
    trip(0);  // untimed: thread 1 may still be waking up
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 1; i <= trips; ++i) trip(i);
    seconds = seconds_since(t0);
  });
  return seconds / trips;
}

double probe_fma_peak(ThreadPool& pool) {
  const int lanes = fma_lanes();
  if (lanes == 0) return 0;
  const double s = on_every_thread(pool, [&](size_t) { g_sink_f = fma_loop(lanes, kPeakIterations / 4); });
  return double(pool.size()) * double(kPeakIterations / 4) * 12 * lanes * 2 / s;
}

std::vector<double> probe_thread_speeds(ThreadPool& pool) {
  // Threads are compared with each other, not with a kernel: the widest loop this CPU runs.
  const int lanes = lanes_of(cpu::widest_isa());
  if (lanes == 0) return {};
  std::vector<double> seconds(size_t(pool.size()), 0.0);
  pool.on_every_thread([&](int t) {
    const auto t0 = std::chrono::steady_clock::now();
    g_sink_f = fma_loop(lanes, kPeakIterations / 8);
    seconds[size_t(t)] = seconds_since(t0);
  });
  const double fastest = *std::min_element(seconds.begin(), seconds.end());
  std::vector<double> speeds;
  for (double s : seconds) speeds.push_back(fastest / s);
  return speeds;
}

// Bytes per int8 instruction of the int8 kernels' loop: 64 (AVX-512 VNNI), 32 (AVX2, also on an
// AVX-512 CPU without VNNI), or 0.
int int8_bytes() {
  if (cpu::int8_uses_vnni(cpu::cpu_isa())) return 64;
  return fma_lanes() > 0 ? 32 : 0;
}

const char* probe_int8_isa() {
  const int bytes = int8_bytes();
  return bytes == 64 ? "avx512vnni" : bytes == 32 ? "avx2" : "none";
}

double probe_int8_peak(ThreadPool& pool) {
  const int bytes = int8_bytes();
  if (bytes == 0) return 0;
  const double s = on_every_thread(pool, [&](size_t) {
    g_sink_i = bytes == 64 ? vnni_loop_avx512(kPeakIterations / 4) : int8_loop_avx2(kPeakIterations / 4);
  });
  return double(pool.size()) * double(kPeakIterations / 4) * 12 * bytes * 2 / s;
}

}  // namespace kvlm
