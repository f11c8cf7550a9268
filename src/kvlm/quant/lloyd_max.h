#pragma once
// Lloyd-Max scalar quantizer tables for TurboQuant's value codec, and the MLX random-number
// reproduction that ties the seed's constants to their provenance.
//
// Two generators:
//  - lloyd_max_gaussian: the exact optimum for N(0,1), by Lloyd's iteration with the closed-form
//    conditional means of the normal law. This is the "gaussian" table set.
//  - lloyd_max_mlx_samples: vllm-metal's own procedure (turboquant.md §B.8) on 200,000 samples of
//    MLX's normal(key(0)), reimplemented without MLX. It reproduces the seed tables within the
//    tolerance stated in docs/kv-codecs.md (the seed was fitted on a GPU whose reduction order
//    kvlm cannot replay bit for bit).
// Both fit a unit-variance source: the value codec normalises each 32-group by its RMS.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace kvlm {

struct LloydMaxFit {
  std::vector<float> centroids;   // 2^bits, increasing
  std::vector<float> boundaries;  // 2^bits - 1 midpoints of adjacent centroids
  int iterations = 0;
  bool converged = false;
};

// Exact N(0,1) Lloyd-Max table for bits in 1..8, iterated in double until no centroid moves by
// more than `tol`, then symmetrised (the optimum is symmetric; iteration only adds rounding).
LloydMaxFit lloyd_max_gaussian(int bits, double tol = 1e-12, int max_iterations = 2000000);

// vllm-metal's fit: linspace(min, max) initialisation over the samples, at most 500 iterations,
// stop when max|Δc| < 1e-6 (bits < 5) or 1e-4 (bits >= 5); f32 centroids, sums in double.
LloydMaxFit lloyd_max_mlx_samples(int bits);

// Mean squared error of a table (code = #{k : y > boundaries[k]}, value = centroids[code]) for
// y ~ N(0,1), computed analytically in double.
double gaussian_table_mse(std::span<const float> centroids, std::span<const float> boundaries);

// --- MLX's RNG (JAX-style Threefry-2x32, 20 rounds) ---

// One Threefry-2x32 block: key (k0, k1), counter (c0, c1).
std::pair<uint32_t, uint32_t> threefry2x32(std::pair<uint32_t, uint32_t> key,
                                           std::pair<uint32_t, uint32_t> counter);
// mx.random.bits(shape=(n,), key) for even n: words i and i + n/2 come from counter (i, i + n/2).
std::vector<uint32_t> mlx_random_bits(std::pair<uint32_t, uint32_t> key, int64_t n);
// mx.random.normal(shape=(n,), key) in float32, with MLX's uniform-to-erfinv mapping.
std::vector<float> mlx_random_normal(std::pair<uint32_t, uint32_t> key, int64_t n);
// The seed's sign vector for head_dim d: 1 - 2*randint(0, 2, (d,), key(42)) under MLX 0.31's
// randint (floor of a scaled uniform), which current MLX no longer computes.
std::vector<int8_t> mlx_seed_sign_vector(int head_dim);

}  // namespace kvlm
