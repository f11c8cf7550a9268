// TurboQuant rows: seed data checksums, the code bit stream (hand-computed bytes for every
// width), the randomised Hadamard transform, hand-computed key groups, derived error bounds,
// round-trip MSE against turboquant.md §F.1, edge cases and the deferred inverse transform.
#include "kvlm/quant/turboquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kvlm/base/error.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/lloyd_max.h"
#include "kvlm/quant/turboquant_tables.h"

namespace kvlm {
namespace {

constexpr int kValueBits[] = {2, 3, 4, 5, 8};
constexpr int kKeyBits[] = {2, 4, 5, 8};

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::vector<float> gaussian_row(std::mt19937& rng, int d, float sigma = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> nd(mean, sigma);
  std::vector<float> x(static_cast<size_t>(d));
  for (float& v : x) v = nd(rng);
  return x;
}

// --- seed data ---

TEST(TurboTables, SignVectorsMatchSeedChecksums) {
  // FNV-1a of the int8 vectors and their count of -1, computed from the seed's
  // turboquant-tables.ts by an independent script.
  const struct {
    int d;
    uint64_t fnv;
    int negatives;
  } want[] = {{64, 0xb93fe7ef2e6fe01full, 29},
              {128, 0x80a5a3cdcc924e9full, 59},
              {256, 0x3d93cc698ad684f5ull, 132},
              {512, 0xba1dcab6ff19d301ull, 250}};
  for (const auto& w : want) {
    const auto s = turbo_sign_vector(w.d);
    ASSERT_EQ(int(s.size()), w.d);
    EXPECT_EQ(fnv1a(s.data(), s.size()), w.fnv) << w.d;
    int neg = 0;
    for (int8_t v : s) {
      EXPECT_TRUE(v == 1 || v == -1);
      neg += v < 0;
    }
    EXPECT_EQ(neg, w.negatives) << w.d;
  }
  EXPECT_TRUE(turbo_sign_vector(96).empty());
  EXPECT_TRUE(turbo_sign_vector(32).empty());
  EXPECT_EQ(turbo_sign_vector(64)[0], 1);
  EXPECT_EQ(turbo_sign_vector(128)[0], -1);
}

TEST(TurboTables, SeedLloydMaxTablesMatchSeedChecksums) {
  // FNV-1a over the float32 bytes of the centroids followed by the boundaries.
  const struct {
    int bits;
    uint64_t fnv;
  } want[] = {{2, 0xe20cc4148aabccabull},
              {3, 0x40410b341e650479ull},
              {4, 0x55d949b826ae241dull},
              {5, 0x38534dd7dfd37be4ull},
              {8, 0xb67794a2b17de5aeull}};
  for (const auto& w : want) {
    const LloydMaxTable& t = turbo_lloyd_max_table(TurboTables::kSeed, w.bits);
    ASSERT_EQ(t.bits, w.bits);
    ASSERT_EQ(t.centroids.size(), size_t(1) << w.bits);
    ASSERT_EQ(t.boundaries.size() + 1, t.centroids.size());
    const uint64_t h = fnv1a(t.centroids.data(), t.centroids.size() * 4);
    EXPECT_EQ(fnv1a(t.boundaries.data(), t.boundaries.size() * 4, h), w.fnv) << w.bits;
  }
  // Spot values: the 3-bit table is vllm-metal's hard-coded Max table, the 8-bit extremes are the
  // sample min and max of MLX's normal(key(0)), and the 2-bit table is slightly asymmetric.
  const LloydMaxTable& t3 = turbo_lloyd_max_table(TurboTables::kSeed, 3);
  EXPECT_EQ(t3.centroids[4], 0.24509f);
  EXPECT_EQ(t3.boundaries[3], 0.0f);
  EXPECT_EQ(t3.boundaries[6], 1.74793f);
  const LloydMaxTable& t8 = turbo_lloyd_max_table(TurboTables::kSeed, 8);
  EXPECT_EQ(t8.centroids[0], -4.505678653717041f);
  EXPECT_EQ(t8.centroids[255], 4.341888427734375f);
  EXPECT_EQ(turbo_lloyd_max_table(TurboTables::kSeed, 2).boundaries[1], -0.004796460270881653f);
}

TEST(TurboTables, EveryTableIsMonotoneWithBoundariesBetweenCentroids) {
  for (TurboTables set : {TurboTables::kSeed, TurboTables::kGaussian})
    for (int bits : kValueBits) {
      const LloydMaxTable& t = turbo_lloyd_max_table(set, bits);
      for (size_t k = 0; k + 1 < t.centroids.size(); ++k) {
        EXPECT_LT(t.centroids[k], t.boundaries[k]) << bits;
        EXPECT_LT(t.boundaries[k], t.centroids[k + 1]) << bits;
      }
    }
  // The Gaussian tables are exactly symmetric with exact f32 midpoints.
  for (int bits : kValueBits) {
    const LloydMaxTable& t = turbo_lloyd_max_table(TurboTables::kGaussian, bits);
    const size_t n = t.centroids.size();
    for (size_t k = 0; k < n; ++k) EXPECT_EQ(t.centroids[k], -t.centroids[n - 1 - k]) << bits;
    for (size_t k = 0; k + 1 < n; ++k)
      EXPECT_EQ(t.boundaries[k], (t.centroids[k] + t.centroids[k + 1]) * 0.5f) << bits;
  }
  EXPECT_FALSE(turbo_value_bits_supported(6));
  EXPECT_THROW(turbo_lloyd_max_table(TurboTables::kSeed, 6), Error);
}

// --- bit stream ---

TEST(TurboPack, HandComputedBytesForEveryWidth) {
  // Code i at bits [i*b, i*b+b), LSB of byte 0 first.
  auto packed = [](std::vector<uint8_t> codes, int bits) {
    std::vector<uint8_t> out(codes.size() * size_t(bits) / 8, 0xee);
    pack_codes(codes.data(), int(codes.size()), bits, out.data());
    return out;
  };
  // 2-bit: 1 | 2<<2 | 3<<4 | 0<<6 = 0x39; 3 | 3<<2 | 0<<4 | 1<<6 = 0x4f.
  EXPECT_EQ(packed({1, 2, 3, 0, 3, 3, 0, 1}, 2), (std::vector<uint8_t>{0x39, 0x4f}));
  // 3-bit: codes 0..7 -> sum c_i << 3i = 0xfac688, little-endian; codes 2 and 5 straddle.
  EXPECT_EQ(packed({0, 1, 2, 3, 4, 5, 6, 7}, 3), (std::vector<uint8_t>{0x88, 0xc6, 0xfa}));
  // 4-bit: element 2j in the low nibble.
  EXPECT_EQ(packed({0xa, 0x5, 0xf, 0x0, 1, 2, 3, 4}, 4),
            (std::vector<uint8_t>{0x5a, 0x0f, 0x21, 0x43}));
  // 5-bit: 8 codes in 5 bytes.
  EXPECT_EQ(packed({31, 0, 17, 8, 1, 30, 5, 22}, 5),
            (std::vector<uint8_t>{0x1f, 0x44, 0x14, 0x7c, 0xb1}));
  // 8-bit: one byte per code.
  EXPECT_EQ(packed({0x00, 0x81, 0xff, 0x7f, 1, 2, 3, 4}, 8),
            (std::vector<uint8_t>{0x00, 0x81, 0xff, 0x7f, 1, 2, 3, 4}));
  // Only the low `bits` of a code are stored: 0xff -> 3 in bits 0-1, 0xfe -> 2 in bits 14-15.
  EXPECT_EQ(packed({0xff, 0, 0, 0, 0, 0, 0, 0xfe}, 2), (std::vector<uint8_t>{0x03, 0x80}));
  std::vector<uint8_t> out(8);
  const uint8_t codes[8] = {1, 2, 3, 0, 0, 0, 0, 0};
  EXPECT_THROW(pack_codes(codes, 3, 3, out.data()), Error);  // not whole blocks of 8
  EXPECT_THROW(pack_codes(codes, 8, 6, out.data()), Error);  // no 6-bit TurboQuant codes
  EXPECT_THROW(unpack_codes(out.data(), 8, 7, out.data()), Error);
}

TEST(TurboPack, RoundTripsEveryCodeAtEveryWidthAndHeadDim) {
  std::mt19937 rng(1);
  for (int bits : {2, 3, 4, 5, 8})
    for (int d : kTurboHeadDims) {
      std::vector<uint8_t> codes(static_cast<size_t>(d));
      for (int i = 0; i < d; ++i) codes[size_t(i)] = uint8_t((i + rng()) % (1u << bits));
      // Also every code value at every residue of the bit offset (straddling for 3 and 5).
      for (int i = 0; i < d && i < (1 << bits); ++i) codes[size_t(i)] = uint8_t(i);
      std::vector<uint8_t> stream(size_t(d * bits / 8));
      pack_codes(codes.data(), d, bits, stream.data());
      for (int i = 0; i < d; ++i)
        ASSERT_EQ(unpack_code(stream.data(), i, bits), codes[size_t(i)]) << bits << " " << i;
      std::vector<uint8_t> all(static_cast<size_t>(d), 0xee);
      unpack_codes(stream.data(), d, bits, all.data());
      ASSERT_EQ(all, codes) << bits;
    }
}

// --- randomised Hadamard transform ---

TEST(TurboFwht, IsSylvesterHadamardAndSelfInverse) {
  for (int n : {2, 8, 64, 512}) {
    // Column j of H: H[i][j] = (-1)^popcount(i & j).
    for (int j : {0, 1, (n / 2 + 1) % n, n - 1}) {
      std::vector<float> e(static_cast<size_t>(n), 0.0f);
      e[size_t(j)] = 1.0f;
      fwht(e.data(), n);
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(e[size_t(i)], (__builtin_popcount(unsigned(i & j)) & 1) ? -1.0f : 1.0f);
    }
    std::mt19937 rng{unsigned(n)};
    std::vector<float> x = gaussian_row(rng, n), y = x;
    fwht(y.data(), n);
    fwht(y.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[size_t(i)] / float(n), x[size_t(i)], 1e-5f);
  }
}

TEST(TurboFwht, RotationIsOrthogonalAndOrdered) {
  std::mt19937 rng(2);
  for (int d : kTurboHeadDims) {
    const auto signs = turbo_sign_vector(d);
    const std::vector<float> x = gaussian_row(rng, d);
    std::vector<float> y = x;
    turbo_rotate(y.data(), signs);
    double nx = 0, ny = 0;
    for (int i = 0; i < d; ++i)
      nx += double(x[size_t(i)]) * x[size_t(i)], ny += double(y[size_t(i)]) * y[size_t(i)];
    EXPECT_NEAR(ny / nx, 1.0, 1e-5) << d;
    // Inner products survive the rotation: <Pi q, Pi k> = <q, k> (what a rotated-key variant
    // relies on when it rotates the query instead of decoding keys).
    const std::vector<float> q = gaussian_row(rng, d);
    std::vector<float> qr = q;
    turbo_rotate(qr.data(), signs);
    double dot = 0, dot_rotated = 0;
    for (int i = 0; i < d; ++i) {
      dot += double(q[size_t(i)]) * x[size_t(i)];
      dot_rotated += double(qr[size_t(i)]) * y[size_t(i)];
    }
    EXPECT_NEAR(dot_rotated, dot, 1e-4 * std::sqrt(nx * d)) << d;
    turbo_unrotate(y.data(), signs);
    for (int i = 0; i < d; ++i) EXPECT_NEAR(y[size_t(i)], x[size_t(i)], 1e-5f) << d;
    // Encode applies the signs first: rotate(e_j) = s_j * H[:, j] / sqrt(d).
    const int j = 3;
    std::vector<float> e(static_cast<size_t>(d), 0.0f);
    e[j] = 1.0f;
    turbo_rotate(e.data(), signs);
    const float inv = float(1.0 / std::sqrt(double(d)));
    for (int i = 0; i < d; ++i) {
      const float h = (__builtin_popcount(unsigned(i & j)) & 1) ? -1.0f : 1.0f;
      ASSERT_EQ(e[size_t(i)], float(signs[j]) * h * inv) << d << " " << i;
    }
  }
}

// --- keys ---

struct KeyCase {
  std::vector<float> x;
  int bits;
  float scale, zero;
  std::vector<int> head_codes;  // the first codes
};

TEST(TurboKey, HandComputedGroups) {
  std::vector<float> ramp(32), signed_ramp(32);
  for (int j = 0; j < 32; ++j) {
    ramp[size_t(j)] = 0.1f * float(j);
    signed_ramp[size_t(j)] = -1.0f + 0.08f * float(j);
  }
  const KeyCase cases[] = {
      // unsigned 4-bit: scale = fp16(3.1/15) = 0.2066650390625, zero = rint(0/scale) = 0,
      // code = rint(x/scale): 0.1/0.2067 = 0.48 -> 0, 0.2/0.2067 = 0.97 -> 1.
      {ramp, 4, 0.2066650390625f, 0.0f, {0, 0, 1, 1, 2, 2, 3, 3}},
      // signed 8-bit: scale = fp16(2.48/254) = 0.009765625, zero = rint(0.24/scale) = 25,
      // first code = rint(-1/scale - 25) = rint(-127.4) = -127.
      {signed_ramp, 8, 0.009765625f, 25.0f, {-127, -119, -111, -103, -95, -86}},
      // unsigned 2-bit: scale = fp16(2.48/3) = 0.82666015625, zero = rint(-1/scale) = -1.
      {signed_ramp, 2, 0.82666015625f, -1.0f, {0, 0, 0, 0, 0, 0, 0, 0}},
  };
  for (const KeyCase& c : cases) {
    const TurboKeyGroup p = turbo_key_group_params(c.x.data(), c.bits);
    EXPECT_EQ(f16_to_f32(p.scale), c.scale) << c.bits;
    EXPECT_EQ(f16_to_f32(p.zero), c.zero) << c.bits;
    for (size_t j = 0; j < c.head_codes.size(); ++j) {
      const uint8_t code = turbo_key_code(c.x[j], p, c.bits);
      EXPECT_EQ(c.bits == 8 ? int(int8_t(code)) : int(code), c.head_codes[j]) << c.bits << " " << j;
    }
  }
  // Last codes of the signed ramp reach the top: 1.48/scale - 25 = 126.6 -> 127.
  const TurboKeyGroup p8 = turbo_key_group_params(signed_ramp.data(), 8);
  EXPECT_EQ(int8_t(turbo_key_code(signed_ramp[31], p8, 8)), 127);
}

TEST(TurboKey, RowLayoutIsCodesThenScalesThenZeros) {
  // d = 64, 4 bits: 32 code bytes, then 2 fp16 scales, then 2 fp16 zeros.
  std::vector<float> x(64);
  for (int j = 0; j < 32; ++j) x[size_t(j)] = 0.1f * float(j);                 // group 0: the ramp
  for (int j = 32; j < 64; ++j) x[size_t(j)] = -1.0f + 0.08f * float(j - 32);  // group 1
  ASSERT_EQ(turbo_key_row_bytes(64, 4), 32u + 4u + 4u);
  std::vector<uint8_t> row(turbo_key_row_bytes(64, 4), 0xee);
  turbo_encode_key_row(x.data(), 64, 4, row.data());
  // Group 0 codes 0,0,1,1 -> bytes 0x00, 0x11.
  EXPECT_EQ(row[0], 0x00);
  EXPECT_EQ(row[1], 0x11);
  uint16_t h[4];
  std::memcpy(h, row.data() + 32, 8);
  const TurboKeyGroup g0 = turbo_key_group_params(x.data(), 4);
  const TurboKeyGroup g1 = turbo_key_group_params(x.data() + 32, 4);
  EXPECT_EQ(h[0], g0.scale);
  EXPECT_EQ(h[1], g1.scale);
  EXPECT_EQ(h[2], g0.zero);
  EXPECT_EQ(h[3], g1.zero);
  EXPECT_EQ(f16_to_f32(g0.scale), 0.2066650390625f);
}

// Derived bound: the stored scale s is fp16(range/span) (or the floor, which only widens the
// grid), so |s - range/span| <= max(s*2^-11, 2^-25) (relative half-ulp, or half the subnormal
// spacing). zero*s is within s/2 of the group's anchor (min, or the midpoint for signed codes),
// and the grid spans span*s, short of the range by at most span*|s - range/span|: a clipped
// extreme is off by that much more than the rounding's s/2. Hence
//   |x - x^| <= s/2 + span*max(s*2^-11, 2^-25), plus f32 rounding.
// A group whose scale rounds to 0 in fp16 (max|x| < 6.2e-5) decodes to zeros.
void expect_key_bound(const std::vector<float>& x, int bits, const char* what) {
  const int d = int(x.size());
  std::vector<uint8_t> row(turbo_key_row_bytes(d, bits));
  std::vector<float> y(static_cast<size_t>(d));
  turbo_encode_key_row(x.data(), d, bits, row.data());
  turbo_decode_key_row(row.data(), d, bits, y.data());
  const float span = bits == 8 ? 254.0f : float((1 << bits) - 1);
  for (int g = 0; g < d / 32; ++g) {
    const TurboKeyGroup p = turbo_key_group_params(x.data() + 32 * g, bits);
    const float s = f16_to_f32(p.scale);
    float max_abs = 0;
    for (int j = 32 * g; j < 32 * g + 32; ++j) max_abs = std::max(max_abs, std::fabs(x[size_t(j)]));
    if (s == 0.0f) {
      ASSERT_LT(max_abs, 6.2e-5f) << what;
    }
    const float bound =
        s == 0.0f ? max_abs : s * 0.5f + span * std::max(s * 0x1p-11f, 0x1p-25f) + 1e-6f * max_abs;
    for (int j = 32 * g; j < 32 * g + 32; ++j) {
      ASSERT_TRUE(std::isfinite(y[size_t(j)])) << what;
      ASSERT_LE(std::fabs(x[size_t(j)] - y[size_t(j)]), bound)
          << what << " bits " << bits << " j " << j << " x " << x[size_t(j)];
    }
  }
}

TEST(TurboKey, RoundTripWithinDerivedBound) {
  std::mt19937 rng(3);
  for (int bits : kKeyBits)
    for (int d : kTurboHeadDims) {
      for (int trial = 0; trial < 20; ++trial) {
        const float sigma = std::pow(10.0f, float(trial % 7) - 3.0f);  // 1e-3 .. 1e3
        const float mean = (trial % 3 == 0) ? 5.0f * sigma : 0.0f;
        expect_key_bound(gaussian_row(rng, d, sigma, mean), bits, "gaussian");
      }
      // A row with one huge outlier (mlx-bun's adversarial row).
      std::vector<float> x = gaussian_row(rng, d);
      x[0] = 1000.0f;
      expect_key_bound(x, bits, "outlier");
    }
}

TEST(TurboKey, ConstantAndNearConstantBlocksAreFinite) {
  // The reference yields scale 0 and an infinite fp16 zero point (NaN on decode); kvlm floors
  // the scale at max|x|/2000: for 3.0, scale = fp16(0.0015) = 0.0015001297, zero = 2000, code 0,
  // decode 2000 * 0.0015001297 = 3.00026.
  for (int bits : kKeyBits) {
    const std::vector<float> three(32, 3.0f);
    const TurboKeyGroup p = turbo_key_group_params(three.data(), bits);
    EXPECT_EQ(f16_to_f32(p.scale), 0.0015001296997070312f) << bits;
    EXPECT_EQ(f16_to_f32(p.zero), 2000.0f) << bits;
    for (float c : {3.0f, -5.0f, 1e-3f, -7e4f, 0.0f, 1e-9f}) {
      std::vector<float> x(64, c);
      x[40] = c * (1.0f + 1e-4f);  // near-constant second group
      expect_key_bound(x, bits, "constant");
      std::vector<uint8_t> row(turbo_key_row_bytes(64, bits));
      std::vector<float> y(64);
      turbo_encode_key_row(x.data(), 64, bits, row.data());
      turbo_decode_key_row(row.data(), 64, bits, y.data());
      for (int j = 0; j < 64; ++j)
        EXPECT_LE(std::fabs(y[size_t(j)] - x[size_t(j)]), std::fabs(c) / 1000.0f + 1e-4f)
            << bits << " " << c;
    }
  }
}

TEST(TurboKey, UnsupportedHeadDimIsNamed) {
  std::vector<float> x(96, 0.0f);
  std::vector<uint8_t> row(512);
  try {
    turbo_encode_key_row(x.data(), 96, 8, row.data());
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "turbo_encode_key_row: TurboQuant does not support head_dim=96 (supported: 64, "
                 "128, 256, 512)");
  }
}

// --- values ---

TEST(TurboValue, CodesTiesGoToTheLowerCell) {
  for (int bits : kValueBits) {
    const LloydMaxTable& t = turbo_lloyd_max_table(TurboTables::kSeed, bits);
    for (size_t k = 0; k < t.boundaries.size(); ++k) {
      const float b = t.boundaries[k];
      EXPECT_EQ(turbo_value_code(t, b), k) << bits;
      EXPECT_EQ(turbo_value_code(t, std::nextafter(b, INFINITY)), k + 1) << bits;
    }
    EXPECT_EQ(turbo_value_code(t, -100.0f), 0);
    EXPECT_EQ(turbo_value_code(t, 100.0f), (1u << bits) - 1);
  }
}

TEST(TurboValue, RowLayoutIsCodesThenScales) {
  const int d = 64;
  const auto signs = turbo_sign_vector(d);
  const LloydMaxTable& t = turbo_lloyd_max_table(TurboTables::kSeed, 3);
  std::mt19937 rng(4);
  const std::vector<float> x = gaussian_row(rng, d, 2.0f);
  ASSERT_EQ(turbo_value_row_bytes(d, 3), 24u + 4u);
  std::vector<uint8_t> row(turbo_value_row_bytes(d, 3));
  turbo_encode_value_row(x.data(), signs, t, row.data());
  // Recompute by the formula: rotate, RMS per group, code each normalised value.
  std::vector<float> y = x;
  turbo_rotate(y.data(), signs);
  for (int g = 0; g < 2; ++g) {
    float ss = 0;
    for (int j = 0; j < 32; ++j) ss += y[size_t(32 * g + j)] * y[size_t(32 * g + j)];
    const float rms = std::sqrt(ss / 32.0f);
    uint16_t h;
    std::memcpy(&h, row.data() + 24 + 2 * g, 2);
    EXPECT_EQ(h, f32_to_f16(rms));
    for (int j = 0; j < 32; ++j)
      EXPECT_EQ(unpack_code(row.data(), 32 * g + j, 3),
                turbo_value_code(t, y[size_t(32 * g + j)] / (rms + 1e-8f)));
  }
}

// Derived bound in the rotated domain, per element: with s the group RMS and y/s inside
// [c_0, c_last], |y/s - c| <= the widest half cell (boundary to centroid); outside it,
// |y/s| <= sqrt(32) (a group of RMS 1 has no element beyond sqrt(32)), so |y/s - c| <=
// sqrt(32) - |c_end|. Storing s in fp16 adds |c| * |s - fp16(s)| <= |c| * s * 2^-11.
float rotated_bound_factor(const LloydMaxTable& t) {
  float w = 0;
  for (size_t k = 0; k < t.boundaries.size(); ++k)
    w = std::max({w, t.boundaries[k] - t.centroids[k], t.centroids[k + 1] - t.boundaries[k]});
  const float tail = std::sqrt(32.0f) - std::min(-t.centroids.front(), t.centroids.back());
  return std::max(w, tail);
}

TEST(TurboValue, RotatedRoundTripWithinDerivedBound) {
  std::mt19937 rng(5);
  for (TurboTables set : {TurboTables::kSeed, TurboTables::kGaussian})
    for (int bits : kValueBits)
      for (int d : kTurboHeadDims) {
        const auto signs = turbo_sign_vector(d);
        const LloydMaxTable& t = turbo_lloyd_max_table(set, bits);
        const float factor = rotated_bound_factor(t);
        const float cmax = std::max(-t.centroids.front(), t.centroids.back());
        std::vector<uint8_t> row(turbo_value_row_bytes(d, bits));
        std::vector<float> yq(static_cast<size_t>(d));
        for (int trial = 0; trial < 5; ++trial) {
          std::vector<float> x = gaussian_row(rng, d, std::pow(10.0f, float(trial) - 2.0f));
          if (trial == 4) x[0] = 1000.0f;  // outlier row
          turbo_encode_value_row(x.data(), signs, t, row.data());
          turbo_decode_value_row_rotated(row.data(), d, t, yq.data());
          std::vector<float> y = x;
          turbo_rotate(y.data(), signs);
          for (int g = 0; g < d / 32; ++g) {
            float ss = 0;
            for (int j = 32 * g; j < 32 * g + 32; ++j) ss += y[size_t(j)] * y[size_t(j)];
            const float s = std::sqrt(ss / 32.0f);
            const float bound = s * (factor + cmax * 0x1p-11f) * (1 + 1e-5f) + 1e-6f;
            for (int j = 32 * g; j < 32 * g + 32; ++j)
              ASSERT_LE(std::fabs(y[size_t(j)] - yq[size_t(j)]), bound)
                  << bits << " d " << d << " j " << j;
          }
        }
      }
}

// Relative MSE E||x - x^||^2 / ||x||^2 over Gaussian rows, decoding through the inverse.
double relative_mse(int d, const LloydMaxTable& t, int rows, unsigned seed) {
  std::mt19937 rng(seed);
  const auto signs = turbo_sign_vector(d);
  std::vector<uint8_t> row(turbo_value_row_bytes(d, t.bits));
  std::vector<float> xq(static_cast<size_t>(d));
  double err = 0, norm = 0;
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> x = gaussian_row(rng, d);
    turbo_encode_value_row(x.data(), signs, t, row.data());
    turbo_decode_value_row_rotated(row.data(), d, t, xq.data());
    turbo_unrotate(xq.data(), signs);
    for (int i = 0; i < d; ++i) {
      const double e = double(x[size_t(i)]) - xq[size_t(i)];
      err += e * e;
      norm += double(x[size_t(i)]) * x[size_t(i)];
    }
  }
  return err / norm;
}

TEST(TurboValue, RoundTripMseMatchesReferenceSimulation) {
  // turboquant.md §F.1: vllm-metal's value scheme with the seed tables on Gaussian data,
  // relative MSE at d=128 0.1119 / 0.0326 / 0.0090 and at d=64 0.1115 / 0.0325 / 0.0089 for
  // 2/3/4 bits. Tolerance ±3% (the statistical noise at 20,000 rows is well under 1%).
  const struct {
    int d, bits;
    double want;
  } cases[] = {{128, 2, 0.1119}, {128, 3, 0.0326}, {128, 4, 0.0090},
               {64, 2, 0.1115},  {64, 3, 0.0325},  {64, 4, 0.0089}};
  for (const auto& c : cases) {
    const double mse =
        relative_mse(c.d, turbo_lloyd_max_table(TurboTables::kSeed, c.bits), 20000, 6);
    EXPECT_NEAR(mse, c.want, 0.03 * c.want) << "d " << c.d << " bits " << c.bits;
  }
}

TEST(TurboValue, GaussianTablesBeatTheSeedAtEightBits) {
  // Measured codec MSE, d=128, 4,000 rows; printed for docs/kv-codecs.md. Per-group RMS
  // normalisation leaves lighter tails than N(0,1), so each measured MSE sits below its table's
  // analytic Gaussian MSE; the seed's 8-bit table (fit stopped early) is ~2x worse than optimal.
  for (int bits : kValueBits) {
    const LloydMaxTable& seed = turbo_lloyd_max_table(TurboTables::kSeed, bits);
    const LloydMaxTable& gauss = turbo_lloyd_max_table(TurboTables::kGaussian, bits);
    const double ms = relative_mse(128, seed, 4000, 7), mg = relative_mse(128, gauss, 4000, 7);
    std::printf("[ codec MSE ] bits %d d 128: seed %.6g gaussian %.6g\n", bits, ms, mg);
    EXPECT_LT(ms, gaussian_table_mse(seed.centroids, seed.boundaries)) << bits;
    EXPECT_LT(mg, gaussian_table_mse(gauss.centroids, gauss.boundaries)) << bits;
    if (bits == 8)
      EXPECT_LT(mg, 0.6 * ms);
    else
      EXPECT_LT(mg, 1.01 * ms) << bits;
  }
}

TEST(TurboValue, EdgeRowsStayFinite) {
  const int d = 128;
  const auto signs = turbo_sign_vector(d);
  for (int bits : kValueBits) {
    const LloydMaxTable& t = turbo_lloyd_max_table(TurboTables::kSeed, bits);
    std::vector<uint8_t> row(turbo_value_row_bytes(d, bits));
    std::vector<float> y(static_cast<size_t>(d));
    auto round_trip = [&](const std::vector<float>& x) {
      turbo_encode_value_row(x.data(), signs, t, row.data());
      turbo_decode_value_row_rotated(row.data(), d, t, y.data());
      turbo_unrotate(y.data(), signs);
    };
    // Zero row: RMS 0, decodes to exact zeros.
    round_trip(std::vector<float>(size_t(d), 0.0f));
    for (float v : y) EXPECT_EQ(v, 0.0f);
    // Constant row: rotates to a single spike; finite, and the spike group is coded well.
    round_trip(std::vector<float>(size_t(d), 2.0f));
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
    // RMS beyond fp16 (|x| ~ 1e6): the scale clamps to 65504 instead of becoming inf.
    round_trip(std::vector<float>(size_t(d), 1e6f));
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
    // Denormals.
    round_trip(std::vector<float>(size_t(d), 1e-40f));
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST(TurboValue, DeferredInverseEqualsPerRowDecode) {
  // Attention is linear in V: sum_i p_i decode(v_i) = unrotate(sum_i p_i decode_rotated(v_i)).
  const int d = 128, n = 37;
  const auto signs = turbo_sign_vector(d);
  const LloydMaxTable& t = turbo_lloyd_max_table(TurboTables::kSeed, 3);
  std::mt19937 rng(8);
  const size_t dz = d;
  std::vector<float> eager(dz, 0.0f), deferred(dz, 0.0f), tmp(dz);
  std::vector<uint8_t> row(turbo_value_row_bytes(d, 3));
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    const std::vector<float> x = gaussian_row(rng, d);
    const float p = ud(rng) / n;
    turbo_encode_value_row(x.data(), signs, t, row.data());
    turbo_decode_value_row_rotated(row.data(), d, t, tmp.data());
    for (int j = 0; j < d; ++j) deferred[size_t(j)] += p * tmp[size_t(j)];
    turbo_unrotate(tmp.data(), signs);
    for (int j = 0; j < d; ++j) eager[size_t(j)] += p * tmp[size_t(j)];
  }
  turbo_unrotate(deferred.data(), signs);
  for (int j = 0; j < d; ++j) EXPECT_NEAR(deferred[size_t(j)], eager[size_t(j)], 1e-5f);
}

}  // namespace
}  // namespace kvlm
