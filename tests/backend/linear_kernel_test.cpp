// Every ISA path of the dot product and of the linear kernel equals the portable reference bit for
// bit, for every weight format and for sizes that are not multiples of the vector width or tile.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "isa_test_util.h"
#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/backend/cpu/linear_rows.h"
#include "kvlm/backend/cpu/panels.h"
#include "kvlm/base/half.h"
#include "kvlm/quant/affine.h"

namespace kvlm::cpu {
namespace {

TEST(Dot, PortableFollowsTheSixteenLaneOrder) {
  // A 1e8 in lane 0 absorbs the ones added after it (float spacing there is 8), so the result
  // shows which elements share a lane and the order in which lanes fold.
  std::vector<float> a(33, 1.0f), b(33, 1.0f);
  a[0] = 1e8f;
  float lanes[kDotLanes];
  lanes[0] = 1e8f;  // elements 0, 16 and 32 (the zero-padded tail block)
  for (int k = 1; k < kDotLanes; ++k) lanes[k] = 2.0f;  // elements k and 16 + k
  const float folded = fold_lanes(lanes);
  EXPECT_EQ(dot_portable(a.data(), b.data(), 33), folded);
  // Folding: 1e8+2 and 1e8+4 round back to 1e8 (the second a tie to even), then + 8 and + 16 are
  // exact: 1e8 + 24, where a sequential sum would give 1e8 + 32.
  EXPECT_EQ(folded, 1e8f + 24.0f);
  EXPECT_EQ(dot_portable(a.data(), b.data(), 0), 0.0f);
}

TEST(Dot, EveryIsaEqualsPortable) {
  for (Isa isa : simd_paths())
    for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 32, 33, 64, 100, 1000, 4099}) {
      const auto a = normal(size_t(n), 1), b = normal(size_t(n), 2);
      const float want = dot_portable(a.data(), b.data(), n);
      const float got = dot_kernel(isa)(a.data(), b.data(), n);
      EXPECT_EQ(std::memcmp(&want, &got, sizeof(float)), 0) << isa_name(isa) << " n=" << n;
    }
}

TEST(Dot, CloseToTheExactSum) {
  const auto a = normal(1000, 3), b = normal(1000, 4);
  double exact = 0;
  for (size_t i = 0; i < a.size(); ++i) exact += double(a[i]) * double(b[i]);
  EXPECT_NEAR(dot_portable(a.data(), b.data(), 1000), exact, 1e-4);
}

// A weight [R, in] in every stored format, built from the same f32 values.
struct TestWeight {
  Tensor data, scales, biases;
  ops::Weight w;
};

TestWeight dense(const std::vector<float>& v, int64_t R, int64_t in, DType dt) {
  TestWeight t;
  t.data = Tensor::empty({R, in}, dt);
  for (int64_t i = 0; i < R * in; ++i) {
    if (dt == DType::kF32) t.data.data<float>()[i] = v[size_t(i)];
    if (dt == DType::kBF16) t.data.data<uint16_t>()[i] = f32_to_bf16(v[size_t(i)]);
    if (dt == DType::kF16) t.data.data<uint16_t>()[i] = f32_to_f16(v[size_t(i)]);
  }
  t.w = ops::dense_weight(t.data);
  return t;
}

TestWeight affine(const std::vector<float>& v, int64_t R, int64_t in, int bits, int group,
                  DType param_dtype) {
  Tensor f = Tensor::empty({R, in}, DType::kF32);
  std::memcpy(f.data<float>(), v.data(), size_t(R * in) * sizeof(float));
  const AffineWeight q = affine_quantize(f, AffineSpec{bits, group}, param_dtype);
  TestWeight t{q.packed, q.scales, q.biases, {}};
  t.w = ops::affine_weight(t.data, t.scales, t.biases, AffineSpec{bits, group});
  return t;
}

std::vector<float> run(Isa isa, const std::vector<float>& x, int64_t T, const ops::Weight& w,
                       int64_t r0, int64_t R) {
  std::vector<float> y(size_t(T * R), -1.0f);
  LinearKernel(isa, w, x.data(), T)({x.data(), T, &w, r0, R, y.data(), R});
  return y;
}

void expect_paths_equal(const TestWeight& tw, int64_t T, const std::string& what) {
  const int64_t R = tw.w.out_features, in = tw.w.in_features;
  const auto x = normal(size_t(T * in), uint32_t(T * 31 + in));
  const auto want = run(Isa::kPortable, x, T, tw.w, 0, R);
  for (Isa isa : simd_paths())
    EXPECT_TRUE(same_bits(want, run(isa, x, T, tw.w, 0, R)))
        << isa_name(isa) << " " << what << " T=" << T << " R=" << R << " in=" << in;
  // A sub-range of rows computes the same values as the full range.
  if (R > 2)
    for (Isa isa : simd_paths()) {
      const auto part = run(isa, x, T, tw.w, 1, R - 2);
      for (int64_t t = 0; t < T; ++t)
        EXPECT_EQ(std::memcmp(part.data() + t * (R - 2), want.data() + t * R + 1,
                              size_t(R - 2) * sizeof(float)), 0) << isa_name(isa) << " " << what;
    }
}

TEST(LinearRows, DenseReducesAlongTheInput) {
  // One fma after another from input 0: 1e8 + 1 rounds back to 1e8, and -1e8 then leaves 0 (the
  // 16-lane order of dot.h would add the 1 last and give 1). Each ISA, each stored dtype, any
  // number of tokens.
  const std::vector<float> xs = {1e8f, 1.0f, -1e8f};
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    const TestWeight tw = dense({1.0f, 1.0f, 1.0f}, 1, 3, dt);
    for (int64_t T : {1, 3, 9}) {
      std::vector<float> x;
      for (int64_t t = 0; t < T; ++t) x.insert(x.end(), xs.begin(), xs.end());
      for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
        if (!isa_supported(isa)) continue;
        for (float y : run(isa, x, T, tw.w, 0, 1))
          EXPECT_EQ(y, 0.0f) << isa_name(isa) << " " << dtype_name(dt);
        for (float y : run(isa, x, T, ops::panel_weight(tw.w), 0, 1)) EXPECT_EQ(y, 0.0f) << isa_name(isa);
      }
    }
  }
}

TEST(LinearRows, DenseEveryIsaEqualsPortable) {
  for (int64_t in : {1, 7, 16, 17, 33, 100, 384})
    for (int64_t R : {1, 2, 3, 4, 5, 9, 17})
      for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
        const TestWeight tw = dense(normal(size_t(R * in), uint32_t(R + in)), R, in, dt);
        for (int64_t T : {1, 2, 3, 5, 8, 9, 17})
          expect_paths_equal(tw, T, dtype_name(dt));
      }
}

TEST(LinearRows, AffineEveryIsaEqualsPortable) {
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (int64_t in : {int64_t(group), int64_t(3 * group)})
        for (int64_t R : {1, 5, 11})
          for (DType params : {DType::kBF16, DType::kF32}) {
            const TestWeight tw = affine(normal(size_t(R * in), uint32_t(bits * group + R)), R, in,
                                         bits, group, params);
            const std::string what = "affine" + std::to_string(bits) + "g" + std::to_string(group) + " " +
                                     dtype_name(params);
            for (int64_t T : {1, 3, 8, 13}) expect_paths_equal(tw, T, what);
          }
}

// Affine panels (ops::panel_weight; 2- to 4-bit codes in nibbles, 5- to 8-bit in bytes) give the
// bits of the portable loop over the checkpoint's rows, on every ISA: 37 rows end in a panel of 5
// (one token reads two panels at once on AVX-512), row ranges from 1 and 11 start inside the first
// panel, 5 and 13 tokens take halving tiles.
TEST(LinearRows, AffinePanelsGiveTheRowsBits) {
  const int64_t R = 37;
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (DType params : {DType::kBF16, DType::kF16, DType::kF32}) {
        const int64_t in = 2 * group;
        const TestWeight tw = affine(normal(size_t(R * in), uint32_t(bits + group)), R, in, bits, group, params);
        const ops::Weight panels = ops::panel_weight(tw.w);
        ASSERT_TRUE(panels.affine_panels.defined());
        for (int64_t T : {1, 5, 8, 13}) {
          const auto x = normal(size_t(T * in), uint32_t(T + in));
          for (int64_t r0 : {0, 1, 11}) {
            const auto want = run(Isa::kPortable, x, T, tw.w, r0, R - r0);
            for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
              if (!isa_supported(isa)) continue;
              EXPECT_TRUE(same_bits(want, run(isa, x, T, panels, r0, R - r0)))
                  << isa_name(isa) << " q" << bits << " g" << group << " " << dtype_name(params)
                  << " T=" << T << " r0=" << r0;
            }
          }
        }
      }
}

TEST(LinearRows, LongPromptsCrossTokenAndRowBlocks) {
  // Dense: in = 4001 makes token blocks of 128 tokens (2 MB of inputs): 149 tokens end in a ragged
  // block of 21, whose last tile takes halving tiles; 71 rows end in a panel of 7.
  const int64_t in = 4001, R = 71;
  expect_paths_equal(dense(normal(size_t(R * in), 5), R, in, DType::kBF16), 149, "bf16");
  // MLX affine rows of 4096 weights, 4-bit, dequantized a panel at a time and in affine panels:
  // 128-token blocks; 131 rows end in a panel of 3.
  const int64_t qin = 4096, qR = 131;
  const TestWeight q4 = affine(normal(size_t(qR * qin), 6), qR, qin, 4, 64, DType::kBF16);
  expect_paths_equal(q4, 140, "affine4");
  const auto x = normal(size_t(140 * qin), 7);
  const ops::Weight panels = ops::panel_weight(q4.w);
  for (Isa isa : simd_paths())
    EXPECT_TRUE(same_bits(run(Isa::kPortable, x, 140, q4.w, 0, qR), run(isa, x, 140, panels, 0, qR)))
        << isa_name(isa) << " affine panels";
}

TEST(LinearRows, BatchesCrossPanelsAndTokenTiles) {
  // 100 rows: three panels and one of 4 rows (one token reads four panels at once on AVX-512, one
  // at a time on AVX2); 5 tokens take halving tiles (4 + 1 on AVX-512), 13 a full tile and halving
  // ones, 16 two tiles, the second reading each panel from the caches.
  const int64_t R = 100;
  for (int64_t in : {40, 64, 1041, 1056}) {
    const TestWeight tw = dense(normal(size_t(R * in), uint32_t(in)), R, in, DType::kBF16);
    const ops::Weight panels = ops::panel_weight(tw.w);
    ASSERT_TRUE(panels.panels);
    for (int64_t T : {1, 5, 8, 13, 16}) {
      expect_paths_equal(tw, T, "bf16");
      const auto x = normal(size_t(T * in), uint32_t(T));
      for (Isa isa : simd_paths())
        EXPECT_TRUE(same_bits(run(Isa::kPortable, x, T, tw.w, 0, R), run(isa, x, T, panels, 0, R)))
            << isa_name(isa) << " panels T=" << T;
    }
  }
}

TEST(LinearRows, PanelOrderGivesTheRowMajorBits) {
  // 37 rows end in a panel of 5; row ranges from 1 and 11 start inside the first panel.
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t in : {32, 96, 416}) {
      const int64_t R = 37;
      const TestWeight tw = dense(normal(size_t(R * in), uint32_t(in + 3)), R, in, dt);
      const ops::Weight panels = ops::panel_weight(tw.w);
      ASSERT_TRUE(panels.panels);
      for (int64_t T : {1, 3, 8, 17}) {
        const auto x = normal(size_t(T * in), uint32_t(T + in));
        for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
          if (!isa_supported(isa)) continue;
          for (int64_t r0 : {0, 1, 11})
            EXPECT_TRUE(same_bits(run(isa, x, T, tw.w, r0, R - r0), run(isa, x, T, panels, r0, R - r0)))
                << isa_name(isa) << " " << dtype_name(dt) << " in=" << in << " T=" << T << " r0=" << r0;
        }
      }
      const std::vector<int32_t> ids = {0, 7, 8, 36, 12};
      const Tensor want = ops::embedding(tw.w, ids), got = ops::embedding(panels, ids);
      EXPECT_EQ(std::memcmp(want.raw(), got.raw(), size_t(want.nbytes())), 0) << dtype_name(dt);
    }
}

TEST(LinearRows, PanelOrderTakesEveryDenseWeight) {
  // Any width and any row count (5 rows: one panel padded with 27 zero rows). MLX affine weights
  // keep the checkpoint's rows; on the exact path they also get affine panels (3-bit codes in
  // nibbles, 6-bit in bytes).
  for (int64_t in : {17, 48, 8192}) {
    const TestWeight tw = dense(normal(size_t(in * 5), uint32_t(in)), 5, in, DType::kBF16);
    const ops::Weight w = ops::panel_weight(tw.w);
    EXPECT_TRUE(w.panels) << in;
    EXPECT_EQ(w.weight.dim(0), kPanelRows) << in;
  }
  const ops::Weight q4 = ops::panel_weight(affine(normal(64 * 5, 2), 5, 64, 4, 64, DType::kBF16).w);
  EXPECT_FALSE(q4.panels);
  EXPECT_TRUE(q4.affine_panels.defined());
  EXPECT_EQ(q4.affine_panels.nbytes(), size_t(affine_panel_bytes(64, 64, 4)));
  EXPECT_EQ(ops::panel_weight(affine(normal(64 * 5, 2), 5, 64, 3, 64, DType::kBF16).w).affine_panels.nbytes(),
            size_t(affine_panel_bytes(64, 64, 4)));
  EXPECT_EQ(ops::panel_weight(affine(normal(64 * 5, 2), 5, 64, 6, 64, DType::kBF16).w).affine_panels.nbytes(),
            size_t(affine_panel_bytes(64, 64, 8)));
  // On the int8 path, 8-bit codes read their int8 tiles; 3-bit codes, which it does not take, run
  // on the exact kernels and get affine panels.
  for (int bits : {8, 3}) {
    ops::Weight w = affine(normal(64 * 5, 2), 5, 64, bits, 64, DType::kBF16).w;
    w.matmul = ops::MatmulPath::kInt8;
    const ops::Weight loaded = ops::panel_weight(ops::int8_weight(w));
    EXPECT_EQ(loaded.int8_tiles.defined(), bits == 8) << bits;
    EXPECT_EQ(loaded.affine_panels.defined(), bits == 3) << bits;
  }
}

}  // namespace
}  // namespace kvlm::cpu
