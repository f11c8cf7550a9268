#pragma once
// Machine probes measured in the same run as model benchmarks, so every model figure can be
// reported as a fraction of the limit that bounds it (decode: read bandwidth; prefill and batched
// decode: arithmetic peak).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvlm {

class ThreadPool;

// Streaming read bandwidth in bytes/s over a buffer of `bytes` (choose well beyond the last-level
// cache), every thread of `pool` reading its own slice; the best of `repeats` passes.
double probe_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30, int repeats = 3);

// Reads [p, p + bytes) once, as the read probe does (p 32-byte aligned; a last part shorter than
// 128 bytes is left out), and returns a value that depends on every byte read.
uint64_t stream_read(const void* p, size_t bytes);

// fp32 FMA peak in FLOP/s (one FMA = 2 FLOPs) over all threads of `pool`, on the vector unit the
// kernels use (cpu::cpu_isa(): AVX-512 or AVX2, capped by KVLM_CPU_ISA as the kernels are).
double probe_fma_peak(ThreadPool& pool);

// int8 dot-product peak in OP/s (one u8×s8 multiply-add = 2 OPs) over all threads of `pool`, with
// the instructions the int8 kernels use (probe_int8_isa; cpu::cpu_isa() chooses, as for them):
// AVX-512 VNNI's vpdpbusd, else AVX2's vpmaddubsw with an int16 add (32 products per pair); 0
// without AVX2.
double probe_int8_peak(ThreadPool& pool);

// The instructions probe_int8_peak used: "avx512vnni", "avx2" or "none".
const char* probe_int8_isa();

// Mean round trip in seconds of one cache line between the calling thread and pool thread 1 over
// `trips` trips; 0 for a pool of one thread. An op split over the pool pays a few of these per
// call (posting the job, the workers' first reads of what the caller wrote, the end of the job),
// which is what bounds a decode step of ~100 short calls. On the 2-vCPU VM of docs/performance.md
// it reads ~0.05 µs in the hours its vCPUs are hyperthreads of one core and ~0.45-0.55 µs when
// they are separate cores, and the read bandwidth follows (about 35-40 against 55-80 GB/s).
double probe_handoff(ThreadPool& pool, int trips = 20000);

// Each pool thread's FMA rate while every thread runs the FMA loop at once, as a fraction of the
// fastest thread's (1 for it), on the widest unit the CPU has whatever KVLM_CPU_ISA says (threads
// are compared with each other, not with a kernel); empty without AVX2 (the loop's ISA). The 2-vCPU VM's vCPUs do not
// always run at one speed: for minutes at a time one of them computes 30-45% slower (the host's
// other load, presumably), and then an op whose threads each hold one indivisible task (a decode
// attention call at concurrency 1: one task per kv head) runs at the slower one's pace.
std::vector<double> probe_thread_speeds(ThreadPool& pool);

// The vector extension probe_fma_peak used: "avx512f", "avx2" or "scalar".
const char* probe_fma_isa();

}  // namespace kvlm
