#pragma once
// A counter-based random number generator (Philox4x32-10, Salmon et al. 2011). A draw is a pure
// function of (seed, step, stream): a request's samples depend only on its own seed and its own
// sample counter, never on which other requests share the batch or on how many draws came
// before (the batch-invariance contract, DESIGN.md §1).
#include <array>
#include <cstdint>

namespace kvlm {

using PhiloxBlock = std::array<uint32_t, 4>;

// The Philox4x32 bijection with 10 rounds, as specified by Random123.
PhiloxBlock philox4x32_10(PhiloxBlock counter, std::array<uint32_t, 2> key);

// Independent uses of one step's randomness (XTC's coin and the categorical draw) get their own
// stream, so enabling one feature never shifts the numbers another one sees.
enum class RngStream : uint32_t { kCategorical = 0, kXtc = 1 };

// A uniform double in [0, 1) with 53 random bits, keyed by (seed, step, stream).
double uniform01(uint64_t seed, uint64_t step, RngStream stream);

}  // namespace kvlm
