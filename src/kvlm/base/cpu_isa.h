#pragma once
// The instruction set the CPU kernels and the bench's peak probes use, chosen once per process:
// the best one the CPU supports, capped by the environment variable KVLM_CPU_ISA (portable, avx2
// or avx512) so that tests and benchmarks can run every path on one machine. Every path computes
// the same bits (see dot.h).
namespace kvlm::cpu {

enum class Isa { kPortable, kAvx2, kAvx512 };

Isa cpu_isa();
const char* isa_name(Isa isa);
// True when this CPU can run `isa` (tests compare the paths it can run).
bool isa_supported(Isa isa);
// The best instruction set this CPU runs, whatever KVLM_CPU_ISA says.
Isa widest_isa();
// True when the int8 kernels of `isa` multiply with AVX-512 VNNI (vpdpbusd): the AVX-512 path on
// a CPU that has it. Otherwise the AVX2 and AVX-512 paths both run AVX2's vpmaddubsw.
bool int8_uses_vnni(Isa isa);

}  // namespace kvlm::cpu
