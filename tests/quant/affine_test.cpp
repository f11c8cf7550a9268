// MLX affine codec: hand-computed groups (edge snapping, negative scales, clamping, constant and
// tiny groups, rounding of halves), the packed bit layout of every width, and error bounds.
#include "kvlm/quant/affine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kvlm/base/error.h"
#include "kvlm/base/half.h"

namespace kvlm {
namespace {

constexpr int kAllBits[] = {2, 3, 4, 5, 6, 8};
constexpr int kAllGroups[] = {32, 64, 128};

struct Quantized {
  std::vector<uint32_t> packed;
  std::vector<float> scales, biases;
  std::vector<uint32_t> codes;
};

Quantized quantize(const std::vector<float>& x, AffineSpec s, DType dt = DType::kF32) {
  Quantized q;
  const int64_t cols = int64_t(x.size());
  q.packed.assign(size_t(affine_packed_words(cols, s.bits)), 0xdeadbeefu);
  q.scales.assign(size_t(cols / s.group_size), NAN);
  q.biases.assign(size_t(cols / s.group_size), NAN);
  affine_quantize_row(x.data(), cols, s, dt, q.packed.data(), q.scales.data(), q.biases.data());
  for (int64_t i = 0; i < cols; ++i) q.codes.push_back(affine_code(q.packed.data(), i, s.bits));
  return q;
}

// One group: `head` followed by `pad` repeated up to group_size. The pad lies inside the head's
// range (or is 0, which the rule's running max starts from), so it does not move the extremes.
std::vector<float> group(std::vector<float> head, float pad, int group_size = 32) {
  head.resize(size_t(group_size), pad);
  return head;
}

TEST(AffineSpec, SupportedCombinations) {
  for (int bits = 0; bits <= 9; ++bits)
    for (int g : {16, 32, 48, 64, 128, 256}) {
      const bool want = (bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 ||
                         bits == 8) &&
                        (g == 32 || g == 64 || g == 128);
      EXPECT_EQ(affine_spec_supported({bits, g}), want) << bits << " " << g;
    }
  try {
    check_affine_spec({7, 64}, "config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "config.json: unsupported MLX quantization bits=7 group_size=64 (bits must be 2, "
                 "3, 4, 5, 6 or 8; group_size 32, 64 or 128)");
  }
}

TEST(AffinePacking, WordsPerRow) {
  EXPECT_EQ(affine_packed_words(64, 4), 8);
  EXPECT_EQ(affine_packed_words(64, 8), 16);
  EXPECT_EQ(affine_packed_words(64, 2), 4);
  EXPECT_EQ(affine_packed_words(32, 3), 3);
  EXPECT_EQ(affine_packed_words(32, 5), 5);
  EXPECT_EQ(affine_packed_words(32, 6), 6);
  EXPECT_EQ(affine_packed_words(4096, 4), 512);
  EXPECT_THROW(affine_packed_words(4, 3), Error);
}

TEST(AffinePacking, PowerOfTwoWidthsAreLowBitsFirstInEachWord) {
  // 4 bits: codes 1..8 -> 0x87654321.
  std::vector<uint32_t> w(1, 0);
  for (int i = 0; i < 8; ++i) affine_set_code(w.data(), i, 4, uint32_t(i + 1));
  EXPECT_EQ(w[0], 0x87654321u);
  // 2 bits: codes 0,1,2,3 repeated -> each byte 0b11100100.
  w.assign(1, 0);
  for (int i = 0; i < 16; ++i) affine_set_code(w.data(), i, 2, uint32_t(i % 4));
  EXPECT_EQ(w[0], 0xe4e4e4e4u);
  // 8 bits: one code per byte.
  w.assign(2, 0);
  for (int i = 0; i < 8; ++i) affine_set_code(w.data(), i, 8, uint32_t(0x10 * i + i));
  EXPECT_EQ(w[0], 0x33221100u);
  EXPECT_EQ(w[1], 0x77665544u);
}

// MLX unpacks 3-, 5- and 6-bit codes from byte packs with explicit masks (3 bytes hold 8 codes,
// 5 bytes hold 8, 3 bytes hold 4). This decoder restates those byte formulas, independently of
// affine_code's bit-stream arithmetic, so the layout is checked from both sides.
std::vector<uint32_t> unpack_bytes_like_mlx(const uint8_t* b, int bits, int n) {
  std::vector<uint32_t> out;
  while (int(out.size()) < n) {
    if (bits == 3) {
      out.push_back(b[0] & 0x7);
      out.push_back((b[0] & 0x38) >> 3);
      out.push_back(((b[0] & 0xc0) >> 6) + ((b[1] & 0x1) << 2));
      out.push_back((b[1] & 0xe) >> 1);
      out.push_back((b[1] & 0x70) >> 4);
      out.push_back(((b[1] & 0x80) >> 7) + ((b[2] & 0x3) << 1));
      out.push_back((b[2] & 0x1c) >> 2);
      out.push_back((b[2] & 0xe0) >> 5);
      b += 3;
    } else if (bits == 5) {
      out.push_back(b[0] & 0x1f);
      out.push_back(((b[0] & 0xe0) >> 5) + ((b[1] & 0x3) << 3));
      out.push_back((b[1] & 0x7c) >> 2);
      out.push_back(((b[1] & 0x80) >> 7) + ((b[2] & 0xf) << 1));
      out.push_back(((b[2] & 0xf0) >> 4) + ((b[3] & 0x1) << 4));
      out.push_back((b[3] & 0x3e) >> 1);
      out.push_back(((b[3] & 0xc0) >> 6) + ((b[4] & 0x7) << 2));
      out.push_back((b[4] & 0xf8) >> 3);
      b += 5;
    } else {
      out.push_back(b[0] & 0x3f);
      out.push_back(((b[0] >> 6) & 0x03) + ((b[1] & 0x0f) << 2));
      out.push_back(((b[1] >> 4) & 0x0f) + ((b[2] & 0x03) << 4));
      out.push_back((b[2] >> 2) & 0x3f);
      b += 3;
    }
  }
  return out;
}

TEST(AffinePacking, OddWidthsMatchMlxBytePacks) {
  std::mt19937 rng(7);
  for (int bits : {3, 5, 6}) {
    const int n = 64;
    std::vector<uint32_t> codes(n), w(size_t(affine_packed_words(n, bits)), 0);
    for (int i = 0; i < n; ++i) {
      codes[size_t(i)] = rng() & ((1u << bits) - 1);
      affine_set_code(w.data(), i, bits, codes[size_t(i)]);
    }
    uint8_t bytes[64 * 8 / 8];
    std::memcpy(bytes, w.data(), w.size() * 4);  // the file's byte order (little-endian)
    EXPECT_EQ(unpack_bytes_like_mlx(bytes, bits, n), codes) << "bits " << bits;
  }
  // A hand-packed 3-bit example: codes 1,2,...,7,0 at bit 3i -> 0x1f58d1 (bytes d1 58 1f).
  std::vector<uint32_t> w(3, 0);
  for (int i = 0; i < 8; ++i) affine_set_code(w.data(), i, 3, uint32_t((i + 1) % 8));
  EXPECT_EQ(w[0], 0x1f58d1u);
}

TEST(AffinePacking, SetAndGetRoundTripWithoutDisturbingNeighbours) {
  std::mt19937 rng(11);
  for (int bits : kAllBits) {
    const int n = 128;
    std::vector<uint32_t> codes(n), w(size_t(affine_packed_words(n, bits)), 0);
    for (int i = 0; i < n; ++i) {
      codes[size_t(i)] = rng() & ((1u << bits) - 1);
      affine_set_code(w.data(), i, bits, codes[size_t(i)]);
    }
    // Overwrite every other code twice; the rest must survive.
    for (int i = 0; i < n; i += 2) {
      affine_set_code(w.data(), i, bits, (1u << bits) - 1);
      affine_set_code(w.data(), i, bits, codes[size_t(i)] ^ 1u);
      codes[size_t(i)] ^= 1u;
    }
    for (int i = 0; i < n; ++i) EXPECT_EQ(affine_code(w.data(), i, bits), codes[size_t(i)]);
  }
}

// scale0 = (0.875 - -1)/15 = 0.125 exactly; |min| wins, so edge = -1, q0 = round(-8) = -8,
// scale = -1/-8 = 0.125, bias = -1; code = (w + 1) / 0.125.
TEST(AffineQuantize, MinSideEdgeIsExact) {
  auto x = group({-1.0f, 0.875f, 0.0f, -0.5f, 0.25f}, 0.0f);
  auto q = quantize(x, {4, 32});
  EXPECT_EQ(q.scales[0], 0.125f);
  EXPECT_EQ(q.biases[0], -1.0f);
  EXPECT_EQ(q.codes[0], 0u);
  EXPECT_EQ(q.codes[1], 15u);
  EXPECT_EQ(q.codes[2], 8u);
  EXPECT_EQ(q.codes[3], 4u);
  EXPECT_EQ(q.codes[4], 10u);
}

// |max| wins: scale0 = -(1.875/15) = -0.125, edge = 1, q0 = round(1/-0.125) = -8,
// scale = 1/-8 = -0.125 (negative), bias = 1; code = (w - 1) / -0.125.
TEST(AffineQuantize, MaxSideGivesNegativeScale) {
  auto x = group({1.0f, -0.875f, 0.0f, 0.5f}, 0.0f);
  auto q = quantize(x, {4, 32});
  EXPECT_EQ(q.scales[0], -0.125f);
  EXPECT_EQ(q.biases[0], 1.0f);
  EXPECT_EQ(q.codes[0], 0u);
  EXPECT_EQ(q.codes[1], 15u);
  EXPECT_EQ(q.codes[2], 8u);
  EXPECT_EQ(q.codes[3], 4u);
  std::vector<float> y(32);
  affine_dequantize_row(q.packed.data(), q.scales.data(), q.biases.data(), 32, {4, 32}, y.data());
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -0.875f);
  EXPECT_EQ(y[2], 0.0f);
}

// Edge snapping moves the scale: 2 bits, range 1.25 -> scale0 = 0.41667, -1/scale0 = -2.4,
// q0 = -2, so scale = 0.5 and the other extreme 0.25 lands between grid points:
// (0.25 + 1)/0.5 = 2.5 -> 3 (ties away from zero).
TEST(AffineQuantize, EdgeSnappingChangesScale) {
  auto x = group({-1.0f, 0.25f, -0.5f, 0.0f}, 0.0f);
  auto q = quantize(x, {2, 32});
  EXPECT_EQ(q.scales[0], 0.5f);
  EXPECT_EQ(q.biases[0], -1.0f);
  EXPECT_EQ(q.codes[0], 0u);
  EXPECT_EQ(q.codes[1], 3u);
  EXPECT_EQ(q.codes[2], 1u);
  EXPECT_EQ(q.codes[3], 2u);
}

// Snapping can shrink the scale so the far extreme overflows: 2 bits, range 1.75,
// -1/0.5833 = -1.71 -> q0 = -2, scale 0.5; (0.75 + 1)/0.5 = 3.5 -> 4, clamped to n_bins = 3.
TEST(AffineQuantize, CodesClampToNBins) {
  auto x = group({-1.0f, 0.75f}, 0.0f);
  auto q = quantize(x, {2, 32});
  EXPECT_EQ(q.scales[0], 0.5f);
  EXPECT_EQ(q.codes[1], 3u);
}

// Ties round away from zero (MLX GPU kernels use round(), not rint()): scale 0.125, bias -1;
// -0.9375 -> 0.5 -> 1 and -0.6875 -> 2.5 -> 3 (half-to-even would give 0 and 2).
TEST(AffineQuantize, TiesRoundAwayFromZero) {
  auto x = group({-1.0f, 0.875f, -0.9375f, -0.6875f}, 0.0f);
  auto q = quantize(x, {4, 32});
  ASSERT_EQ(q.scales[0], 0.125f);
  EXPECT_EQ(q.codes[2], 1u);
  EXPECT_EQ(q.codes[3], 3u);
}

// The GPU kernels start the running max at 0, so an all-negative group spans [w_min, 0]:
// scale0 = 1/15, q0 = round(-15) = -15, scale = -1/-15, bias = -1; -0.6 -> 6, -0.8 -> 3.
// (MLX's CPU backend would use [-1, -0.6] and a scale of 0.4/15.)
TEST(AffineQuantize, AllNegativeGroupSpansToZero) {
  auto x = group({-1.0f, -0.6f, -0.8f}, -0.6f);
  auto q = quantize(x, {4, 32});
  EXPECT_EQ(q.scales[0], -1.0f / -15.0f);
  EXPECT_EQ(q.biases[0], -1.0f);
  EXPECT_EQ(q.codes[0], 0u);
  EXPECT_EQ(q.codes[1], 6u);
  EXPECT_EQ(q.codes[2], 3u);
}

// All-positive groups keep their true minimum (the running min starts at +max): [0.5, 1]
// -> scale0 = -(0.5/15), q0 = round(1/scale0) = -30, scale = 1/-30, bias = 1; 0.5 -> 15.
TEST(AffineQuantize, AllPositiveGroupKeepsItsMinimum) {
  auto x = group({1.0f, 0.5f, 0.8f}, 0.8f);
  auto q = quantize(x, {4, 32});
  EXPECT_EQ(q.scales[0], 1.0f / -30.0f);
  EXPECT_EQ(q.biases[0], 1.0f);
  EXPECT_EQ(q.codes[0], 0u);
  EXPECT_EQ(q.codes[1], 15u);
  EXPECT_EQ(q.codes[2], 6u);  // (0.8 - 1)/(-1/30) = 6
}

// 8 bits: range 1.5 -> scale0 = 1.5/255, -1/scale0 = -170, scale = -1/-170, bias -1;
// 0.5 -> 255, 0 -> 170.
TEST(AffineQuantize, EightBits) {
  auto x = group({-1.0f, 0.5f, 0.0f}, 0.0f);
  auto q = quantize(x, {8, 32});
  EXPECT_EQ(q.scales[0], -1.0f / -170.0f);
  EXPECT_EQ(q.biases[0], -1.0f);
  EXPECT_EQ(q.codes[0], 0u);
  EXPECT_EQ(q.codes[1], 255u);
  EXPECT_EQ(q.codes[2], 170u);
}

TEST(AffineQuantize, ConstantGroupsDequantizeExactly) {
  for (float c : {0.25f, -0.25f, 3.0f, -1e-3f}) {
    auto x = group({}, c);
    auto q = quantize(x, {4, 32});
    EXPECT_EQ(q.biases[0], c) << c;
    for (uint32_t code : q.codes) EXPECT_EQ(code, 0u) << c;
    std::vector<float> y(32);
    affine_dequantize_row(q.packed.data(), q.scales.data(), q.biases.data(), 32, {4, 32}, y.data());
    for (float v : y) EXPECT_EQ(v, c);
  }
  // A positive constant has range 0, so scale0 = -eps and the snapped scale stays ~ -1e-7.
  auto q = quantize(group({}, 0.25f), {4, 32});
  EXPECT_LT(q.scales[0], 0.0f);
  EXPECT_NEAR(q.scales[0], -1e-7f, 1e-12f);
}

// All zeros: scale = -eps, edge 0 -> q0 = 0 -> bias 0, codes 0.
TEST(AffineQuantize, ZeroGroup) {
  auto q = quantize(group({}, 0.0f), {4, 32});
  EXPECT_EQ(q.scales[0], -1e-7f);
  EXPECT_EQ(q.biases[0], 0.0f);
  for (uint32_t code : q.codes) EXPECT_EQ(code, 0u);
}

// Values far below eps: scale = -eps, edge = 3e-8, q0 = round(-0.3) = 0, so bias stays 0 and
// every code rounds to 0.
TEST(AffineQuantize, TinyGroupKeepsZeroBias) {
  auto q = quantize(group({3e-8f, -2e-8f}, 0.0f), {4, 32});
  EXPECT_EQ(q.scales[0], -1e-7f);
  EXPECT_EQ(q.biases[0], 0.0f);
  EXPECT_EQ(q.codes[0], 0u);
  EXPECT_EQ(q.codes[1], 0u);
}

// scale = -1/-10 = 0.1f in f32, stored as bf16 0.10009765625. Codes come from the f32 scale:
// (0.451 + 1)/0.1 = 14.51 -> 15, where the bf16 scale would give 14.496 -> 14.
TEST(AffineQuantize, ParamsRoundedToModelDtypeCodesFromF32) {
  auto x = group({-1.0f, 0.5f, 0.451f}, 0.0f);
  auto q = quantize(x, {4, 32}, DType::kBF16);
  EXPECT_EQ(q.scales[0], 0.10009765625f);
  EXPECT_EQ(q.biases[0], -1.0f);
  EXPECT_EQ(q.codes[2], 15u);
  auto h = quantize(x, {4, 32}, DType::kF16);
  EXPECT_EQ(h.scales[0], f16_to_f32(f32_to_f16(0.1f)));
}

TEST(AffineQuantize, GroupsAreIndependent) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (int g : kAllGroups) {
    std::vector<float> x(size_t(4 * g));
    for (float& v : x) v = nd(rng);
    auto whole = quantize(x, {4, g});
    for (int k = 0; k < 4; ++k) {
      std::vector<float> part(x.begin() + k * g, x.begin() + (k + 1) * g);
      auto one = quantize(part, {4, g});
      EXPECT_EQ(one.scales[0], whole.scales[size_t(k)]);
      EXPECT_EQ(one.biases[0], whole.biases[size_t(k)]);
      for (int i = 0; i < g; ++i) EXPECT_EQ(one.codes[size_t(i)], whole.codes[size_t(k * g + i)]);
    }
  }
}

TEST(AffineQuantize, ErrorBoundsForEveryWidthAndGroup) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int bits : kAllBits)
    for (int g : kAllGroups) {
      std::vector<float> x(size_t(8 * g));
      for (float& v : x) v = nd(rng);
      auto q = quantize(x, {bits, g});
      std::vector<float> y(x.size());
      affine_dequantize_row(q.packed.data(), q.scales.data(), q.biases.data(), int64_t(x.size()),
                            {bits, g}, y.data());
      const uint32_t top = (1u << bits) - 1;
      for (size_t i = 0; i < x.size(); ++i) {
        const float step = std::fabs(q.scales[i / size_t(g)]);
        const float err = std::fabs(x[i] - y[i]);
        // Rounding error is half a step; only a clamped code can be off by up to one step.
        const float bound = (q.codes[i] == top ? 1.0f : 0.5f) * step * (1 + 1e-5f) + 1e-6f;
        EXPECT_LE(err, bound) << "bits " << bits << " group " << g << " i " << i;
        EXPECT_LE(q.codes[i], top);
      }
      // The larger-magnitude extreme of each group is reproduced exactly.
      for (int k = 0; k < 8; ++k) {
        float lo = 0, hi = 0;
        size_t ilo = 0, ihi = 0;
        for (int j = 0; j < g; ++j) {
          const size_t i = size_t(k * g + j);
          if (x[i] < lo || j == 0) lo = x[i], ilo = i;
          if (x[i] > hi || j == 0) hi = x[i], ihi = i;
        }
        const size_t ie = std::fabs(lo) > std::fabs(hi) ? ilo : ihi;
        EXPECT_EQ(y[ie], x[ie]) << "bits " << bits << " group " << g;
      }
    }
}

TEST(AffineQuantize, RejectsBadArguments) {
  std::vector<float> x(48, 1.0f);
  std::vector<uint32_t> p(8);
  std::vector<float> s(2), b(2);
  EXPECT_THROW(affine_quantize_row(x.data(), 48, {4, 32}, DType::kF32, p.data(), s.data(), b.data()),
               Error);
  EXPECT_THROW(affine_quantize_row(x.data(), 32, {4, 32}, DType::kI32, p.data(), s.data(), b.data()),
               Error);
  EXPECT_THROW(affine_quantize_row(x.data(), 32, {7, 32}, DType::kF32, p.data(), s.data(), b.data()),
               Error);
}

TEST(AffineTensor, QuantizeDequantizeShapesAndValues) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const int64_t rows = 3, cols = 128;
  Tensor w = Tensor::empty({rows, cols}, DType::kBF16);
  std::vector<float> ref(size_t(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    w.data<uint16_t>()[i] = f32_to_bf16(nd(rng));
    ref[size_t(i)] = bf16_to_f32(w.data<uint16_t>()[i]);
  }
  for (int bits : kAllBits) {
    AffineWeight q = affine_quantize(w, {bits, 64}, DType::kBF16);
    EXPECT_EQ(q.packed.shape(), (Shape{rows, cols * bits / 32}));
    EXPECT_EQ(q.packed.dtype(), DType::kU32);
    EXPECT_EQ(q.scales.shape(), (Shape{rows, 2}));
    EXPECT_EQ(q.biases.dtype(), DType::kBF16);
    // Row 1 equals the row-level codec.
    auto row = quantize(std::vector<float>(ref.begin() + cols, ref.begin() + 2 * cols), {bits, 64},
                        DType::kBF16);
    for (size_t k = 0; k < row.packed.size(); ++k)
      EXPECT_EQ(q.packed.data<uint32_t>()[size_t(cols * bits / 32) + k], row.packed[k]);
    EXPECT_EQ(bf16_to_f32(q.scales.data<uint16_t>()[2]), row.scales[0]);
    Tensor y = affine_dequantize(q);
    EXPECT_EQ(y.shape(), (Shape{rows, cols}));
    std::vector<float> yrow(static_cast<size_t>(cols));
    affine_dequantize_row(row.packed.data(), row.scales.data(), row.biases.data(), cols, {bits, 64},
                          yrow.data());
    for (int64_t i = 0; i < cols; ++i) EXPECT_EQ(y.data<float>()[cols + i], yrow[size_t(i)]);
  }
}

TEST(AffineTensor, F32InputIsRoundedToParamDtypeFirst) {
  // mlx-lm casts a weight to the model dtype before quantizing it.
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * float(i) - 0.3f + 1e-4f;
  std::vector<float> rounded(v);
  for (float& r : rounded) r = bf16_to_f32(f32_to_bf16(r));
  AffineWeight q = affine_quantize(Tensor::from_f32(v, {1, 64}), {4, 32}, DType::kBF16);
  auto ref = quantize(rounded, {4, 32}, DType::kBF16);
  for (size_t k = 0; k < ref.packed.size(); ++k) EXPECT_EQ(q.packed.data<uint32_t>()[k], ref.packed[k]);
}

TEST(AffineTensor, ShapeChecksNameTheProblem) {
  Tensor p = Tensor::zeros({4, 8}, DType::kU32);  // 4 bits -> 64 columns
  Tensor s = Tensor::zeros({4, 2}, DType::kBF16);
  EXPECT_EQ(affine_check_shapes(p, s, s, {4, 32}, "m.weight"), 64);
  try {
    affine_check_shapes(p, s, s, {4, 64}, "m.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "m.weight: scales/biases shape [4, 2] does not match packed [4, 8] at bits=4 "
                 "group_size=64 (expected [4, 1])");
  }
  EXPECT_THROW(affine_check_shapes(Tensor::zeros({4, 8}, DType::kF32), s, s, {4, 32}, "m"), Error);
  EXPECT_THROW(affine_quantize(Tensor::zeros({2, 48}, DType::kF32), {4, 32}, DType::kF32), Error);
}

}  // namespace
}  // namespace kvlm
