#pragma once
// TurboQuant's constant data: the FWHT sign vectors and the Lloyd-Max value codebooks.
//
// The default data are the seed's tables (mlx-bun's turboquant-tables.ts, itself generated from
// vllm-metal's Python reference under MLX 0.31.2), kept verbatim so that kvlm's codes mean what
// the seed's mean. They are constants, never regenerated at run time: the sign vectors depend on
// an old MLX randint rule, and the sample-based Lloyd-Max fits on MLX's RNG and reduction order
// (docs/kv-codecs.md). The alternative "gaussian" tables are the exact Lloyd-Max optima for
// N(0, 1), produced by lloyd_max.h's lloyd_max_gaussian and checked against it by a test.
#include <cstdint>
#include <span>

namespace kvlm {

// The head dims TurboQuant supports: the FWHT needs a power of two and the sign vectors exist
// only for these.
inline constexpr int kTurboHeadDims[] = {64, 128, 256, 512};

// The ±1 sign vector D of the randomised Hadamard transform for head_dim d, or an empty span if
// d is not one of kTurboHeadDims. One vector serves every layer and head.
std::span<const int8_t> turbo_sign_vector(int head_dim);

// Which Lloyd-Max codebooks the value codec uses.
enum class TurboTables : uint8_t {
  kSeed,      // the seed's tables (bit-compatible with mlx-bun/vllm-metal caches)
  kGaussian,  // exact N(0,1) Lloyd-Max optima (symmetric; the 8-bit one has 2.4x lower MSE)
};

// A scalar quantizer for a unit-variance source: 2^bits increasing centroids and the 2^bits-1
// decision boundaries between them. A value y gets the code #{k : y > boundaries[k]}.
struct LloydMaxTable {
  int bits = 0;
  std::span<const float> centroids;
  std::span<const float> boundaries;
};

// The value bit widths that have tables: 2, 3, 4, 5 and 8.
bool turbo_value_bits_supported(int bits);
// The table of `set` for `bits`; bits must satisfy turbo_value_bits_supported.
const LloydMaxTable& turbo_lloyd_max_table(TurboTables set, int bits);

}  // namespace kvlm
