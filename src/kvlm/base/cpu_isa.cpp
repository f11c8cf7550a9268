#include "kvlm/base/cpu_isa.h"

#include <cstdlib>
#include <cstring>

#include "kvlm/base/error.h"

namespace kvlm::cpu {

bool isa_supported(Isa isa) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  switch (isa) {
    case Isa::kPortable: return true;
    case Isa::kAvx2: return avx2;
    case Isa::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

Isa widest_isa() {
  Isa best = Isa::kPortable;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(isa)) best = isa;
  return best;
}

bool int8_uses_vnni(Isa isa) {
  __builtin_cpu_init();
  return isa == Isa::kAvx512 && __builtin_cpu_supports("avx512vnni");
}

namespace {

Isa choose_isa() {
  const Isa best = widest_isa();
  const char* cap = std::getenv("KVLM_CPU_ISA");
  if (cap == nullptr || *cap == '\0') return best;
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512})
    if (std::strcmp(cap, isa_name(isa)) == 0) return isa < best ? isa : best;
  throw Error(std::string("KVLM_CPU_ISA: unknown value '") + cap +
              "' (expected portable, avx2 or avx512)");
}

}  // namespace

Isa cpu_isa() {
  static const Isa isa = choose_isa();
  return isa;
}

}  // namespace kvlm::cpu
