// Lloyd-Max table generators and the MLX RNG reproduction (see lloyd_max.h).
#include "kvlm/quant/lloyd_max.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kvlm/base/error.h"

namespace kvlm {

namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double normal_pdf(double x) { return kInvSqrt2Pi * std::exp(-0.5 * x * x); }

// P(a < X <= b) for X ~ N(0,1), from whichever tail keeps the difference well conditioned (the
// extreme 8-bit cells hold ~1e-5 of the mass). a may be -inf and b +inf.
double normal_mass(double a, double b) {
  if (b <= 0) return 0.5 * (std::erfc(-b * kSqrt1_2) - std::erfc(-a * kSqrt1_2));
  if (a >= 0) return 0.5 * (std::erfc(a * kSqrt1_2) - std::erfc(b * kSqrt1_2));
  return 1.0 - 0.5 * std::erfc(-a * kSqrt1_2) - 0.5 * std::erfc(b * kSqrt1_2);
}

// x * pdf(x), which is 0 at ±inf (where the product would be NaN).
double x_pdf(double x) { return std::isinf(x) ? 0.0 : x * normal_pdf(x); }

// Inverse normal CDF by bisection: only used for the initial table, so simplicity wins.
double normal_quantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (normal_mass(-INFINITY, mid) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// The cell edges of centroid k: midpoints to its neighbours, ±inf at the ends.
double lower_edge(const std::vector<double>& c, size_t k) {
  return k == 0 ? -INFINITY : 0.5 * (c[k - 1] + c[k]);
}
double upper_edge(const std::vector<double>& c, size_t k) {
  return k + 1 == c.size() ? INFINITY : 0.5 * (c[k] + c[k + 1]);
}

// One Lloyd step: every centroid moves to the conditional mean of its cell,
// E[X | a < X <= b] = (pdf(a) - pdf(b)) / P(a < X <= b). Returns max |Δc|.
double lloyd_step(std::vector<double>& c) {
  std::vector<double> next(c.size());
  for (size_t k = 0; k < c.size(); ++k) {
    const double a = lower_edge(c, k), b = upper_edge(c, k);
    next[k] = (normal_pdf(a) - normal_pdf(b)) / normal_mass(a, b);
  }
  double moved = 0;
  for (size_t k = 0; k < c.size(); ++k) moved = std::max(moved, std::fabs(next[k] - c[k]));
  c.swap(next);
  return moved;
}

// One Newton step on G(c) = c - F(c) = 0, F the Lloyd map. F_k depends on c_{k-1}, c_k, c_{k+1}
// only, through the two edges, so the Jacobian is tridiagonal:
//   dF_k/da = pdf(a) (F_k - a) / P,  dF_k/db = pdf(b) (b - F_k) / P,  da/dc = db/dc = 1/2.
// Lloyd's iteration contracts slowly for many levels (8 bits would need ~10^6 steps); Newton
// from a Lloyd-converged start finishes in a few. Returns max |Δc|.
double newton_step(std::vector<double>& c) {
  const size_t n = c.size();
  std::vector<double> lower(n, 0), diag(n, 0), upper(n, 0), rhs(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const double a = lower_edge(c, k), b = upper_edge(c, k);
    const double mass = normal_mass(a, b);
    const double f = (normal_pdf(a) - normal_pdf(b)) / mass;
    const double da = std::isinf(a) ? 0.0 : 0.5 * normal_pdf(a) * (f - a) / mass;
    const double db = std::isinf(b) ? 0.0 : 0.5 * normal_pdf(b) * (b - f) / mass;
    lower[k] = -da;
    diag[k] = 1.0 - da - db;
    upper[k] = -db;
    rhs[k] = -(c[k] - f);
  }
  // Thomas algorithm (the matrix is diagonally dominant near the optimum).
  for (size_t k = 1; k < n; ++k) {
    const double m = lower[k] / diag[k - 1];
    diag[k] -= m * upper[k - 1];
    rhs[k] -= m * rhs[k - 1];
  }
  std::vector<double> step(n);
  step[n - 1] = rhs[n - 1] / diag[n - 1];
  for (size_t k = n - 1; k-- > 0;) step[k] = (rhs[k] - upper[k] * step[k + 1]) / diag[k];
  double moved = 0;
  for (size_t k = 0; k < n; ++k) {
    c[k] += step[k];
    moved = std::max(moved, std::fabs(step[k]));
  }
  return moved;
}

std::vector<float> midpoints(const std::vector<float>& c) {
  std::vector<float> b(c.size() - 1);
  for (size_t k = 0; k + 1 < c.size(); ++k) b[k] = (c[k] + c[k + 1]) * 0.5f;
  return b;
}

void check_bits(int bits, int max_bits, const char* what) {
  check(bits >= 1 && bits <= max_bits, std::string(what) + ": bits must be 1.." +
                                           std::to_string(max_bits) + ", not " +
                                           std::to_string(bits));
}

}  // namespace

LloydMaxFit lloyd_max_gaussian(int bits, double tol, int max_iterations) {
  check_bits(bits, 8, "lloyd_max_gaussian");
  const size_t n = size_t(1) << bits;
  // Start from the high-resolution optimum: point density ∝ pdf^(1/3), i.e. the quantiles of
  // N(0, 3). It is already within a few percent of the answer at every width.
  std::vector<double> c(n);
  for (size_t k = 0; k < n; ++k)
    c[k] = std::sqrt(3.0) * normal_quantile((double(k) + 0.5) / double(n));
  LloydMaxFit fit;
  // Lloyd until the basin is certain, then Newton to full precision.
  double moved = INFINITY;
  while (fit.iterations < max_iterations && moved > 1e-6) {
    moved = lloyd_step(c);
    ++fit.iterations;
  }
  for (int i = 0; i < 50 && fit.iterations < max_iterations && moved > tol; ++i) {
    moved = newton_step(c);
    ++fit.iterations;
  }
  fit.converged = moved <= tol;
  for (size_t k = 0; k < n / 2; ++k) {
    const double m = 0.5 * (c[n - 1 - k] - c[k]);
    c[k] = -m;
    c[n - 1 - k] = m;
  }
  fit.centroids.assign(c.begin(), c.end());
  fit.boundaries = midpoints(fit.centroids);
  return fit;
}

double gaussian_table_mse(std::span<const float> centroids, std::span<const float> boundaries) {
  check(!centroids.empty() && boundaries.size() + 1 == centroids.size(),
        "gaussian_table_mse: need one boundary fewer than centroids");
  // Over a cell (a, b] with value c:  ∫ (x - c)^2 pdf = P (1 + c^2) - [x pdf]_a^b - 2 c [-pdf]_a^b,
  // using ∫ x^2 pdf = P - [x pdf]_a^b and ∫ x pdf = pdf(a) - pdf(b).
  double mse = 0;
  for (size_t k = 0; k < centroids.size(); ++k) {
    const double a = k == 0 ? -INFINITY : double(boundaries[k - 1]);
    const double b = k + 1 == centroids.size() ? INFINITY : double(boundaries[k]);
    const double c = centroids[k];
    mse += normal_mass(a, b) * (1 + c * c) - (x_pdf(b) - x_pdf(a)) -
           2 * c * (normal_pdf(a) - normal_pdf(b));
  }
  return mse;
}

// --- MLX RNG ---

std::pair<uint32_t, uint32_t> threefry2x32(std::pair<uint32_t, uint32_t> key,
                                           std::pair<uint32_t, uint32_t> counter) {
  static constexpr int kRotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {key.first, key.second, key.first ^ key.second ^ 0x1BD11BDAu};
  uint32_t x0 = counter.first + ks[0], x1 = counter.second + ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r : kRotations[i % 2]) {
      x0 += x1;
      x1 = (x1 << r) | (x1 >> (32 - r));
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + uint32_t(i + 1);
  }
  return {x0, x1};
}

std::vector<uint32_t> mlx_random_bits(std::pair<uint32_t, uint32_t> key, int64_t n) {
  check(n > 0 && n % 2 == 0, "mlx_random_bits: n must be even and positive");
  std::vector<uint32_t> w(static_cast<size_t>(n));
  const int64_t half = n / 2;
  for (int64_t i = 0; i < half; ++i) {
    const auto [a, b] = threefry2x32(key, {uint32_t(i), uint32_t(i + half)});
    w[size_t(i)] = a;
    w[size_t(i + half)] = b;
  }
  return w;
}

namespace {

// MLX's uniform on [0, 1): the word as f32 over f32(2^32 - 1) (which rounds to 2^32), capped
// just below 1.
float mlx_unit_uniform(uint32_t w) { return std::min(float(w) / 4294967296.0f, 0.99999994f); }

// Giles' single-precision erfinv ("Approximating the erfinv function", 2010), which MLX's
// kernels of the seed's era evaluated in f32.
float erfinv_f32(float x) {
  float w = -std::log((1.0f - x) * (1.0f + x));
  float p;
  if (w < 5.0f) {
    w = w - 2.5f;
    p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * w;
    p = -3.5233877e-06f + p * w;
    p = -4.39150654e-06f + p * w;
    p = 0.00021858087f + p * w;
    p = -0.00125372503f + p * w;
    p = -0.00417768164f + p * w;
    p = 0.246640727f + p * w;
    p = 1.50140941f + p * w;
  } else {
    w = std::sqrt(w) - 3.0f;
    p = -0.000200214257f;
    p = 0.000100950558f + p * w;
    p = 0.00134934322f + p * w;
    p = -0.00367342844f + p * w;
    p = 0.00573950773f + p * w;
    p = -0.0076224613f + p * w;
    p = 0.00943887047f + p * w;
    p = 1.00167406f + p * w;
    p = 2.83297682f + p * w;
  }
  return p * x;
}

}  // namespace

std::vector<float> mlx_random_normal(std::pair<uint32_t, uint32_t> key, int64_t n) {
  // normal = sqrt(2) * erfinv(uniform(low, 1)), low = nextafter(-1, 0); the f32 range
  // 1 - low rounds to 2.
  const float low = std::nextafter(-1.0f, 0.0f);
  const float range = 1.0f - low;
  const float sqrt2 = float(std::sqrt(2.0));
  std::vector<float> out;
  out.reserve(size_t(n));
  for (uint32_t w : mlx_random_bits(key, n)) {
    const float v = mlx_unit_uniform(w) * range + low;
    out.push_back(sqrt2 * erfinv_f32(v));
  }
  return out;
}

std::vector<int8_t> mlx_seed_sign_vector(int head_dim) {
  std::vector<int8_t> s;
  for (uint32_t w : mlx_random_bits({0u, 42u}, head_dim)) {
    // MLX 0.31 randint(0, 2): floor(uniform * 2).
    const int bit = int(std::floor(mlx_unit_uniform(w) * 2.0f));
    s.push_back(int8_t(1 - 2 * bit));
  }
  return s;
}

LloydMaxFit lloyd_max_mlx_samples(int bits) {
  check_bits(bits, 8, "lloyd_max_mlx_samples");
  std::vector<float> x = mlx_random_normal({0u, 0u}, 200000);
  // Sorted samples make every cell a contiguous range, found by binary search, and prefix sums
  // give each cell's sum: the same cells and (to double rounding) the same sums as assigning
  // every sample each iteration, at a fraction of the cost.
  std::sort(x.begin(), x.end());
  std::vector<double> prefix(x.size() + 1, 0.0);
  for (size_t i = 0; i < x.size(); ++i) prefix[i + 1] = prefix[i] + double(x[i]);
  const size_t n = size_t(1) << bits;
  std::vector<float> c(n);
  for (size_t k = 0; k < n; ++k) {  // mx.linspace in f32: (1 - t) lo + t hi
    const float t = float(k) / float(n - 1);
    c[k] = (1.0f - t) * x.front() + t * x.back();
  }
  const float threshold = bits >= 5 ? 1e-4f : 1e-6f;
  LloydMaxFit fit;
  while (fit.iterations < 500 && !fit.converged) {
    ++fit.iterations;
    const std::vector<float> b = midpoints(c);
    float moved = 0;
    size_t begin = 0;
    for (size_t k = 0; k < n; ++k) {
      // Cell k holds the samples with b[k-1] < v <= b[k] (code = #{k : v > b[k]}).
      const size_t end =
          k + 1 == n ? x.size() : size_t(std::upper_bound(x.begin(), x.end(), b[k]) - x.begin());
      if (end > begin) {  // an empty cell keeps its centroid
        const float next = float(prefix[end] - prefix[begin]) / float(end - begin);
        moved = std::max(moved, std::fabs(next - c[k]));
        c[k] = next;
      }
      begin = std::max(begin, end);
    }
    fit.converged = moved < threshold;
  }
  fit.centroids = c;
  fit.boundaries = midpoints(c);
  return fit;
}

}  // namespace kvlm
