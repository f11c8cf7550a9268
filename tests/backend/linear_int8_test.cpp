// The int8 path of linear layers (linear_int8.h): the portable kernel follows the stated formula,
// every ISA path equals it bit for bit, results stay close to the exact path, and a token's
// outputs never depend on the batch or the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "int8_test_util.h"
#include "isa_test_util.h"
#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/base/half.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/quant/affine.h"

namespace kvlm::cpu {
namespace {

std::vector<float> run_int8(Isa isa, const std::vector<float>& x, int64_t T, const ops::Weight& w,
                            int64_t r0, int64_t R) {
  const Int8Acts acts = quantize_int8_acts(isa, x.data(), T, w.in_features, w.quant->group_size, w.quant->bits);
  std::vector<float> y(size_t(T * R), -1.0f);
  int8_kernels(isa).linear({x.data(), T, &w, r0, R, y.data(), R}, acts);
  return y;
}

std::vector<float> run_exact(const std::vector<float>& x, int64_t T, const ops::Weight& w) {
  std::vector<float> y(size_t(T * w.out_features));
  linear_rows_portable({x.data(), T, &w, 0, w.out_features, y.data(), w.out_features}, {});
  return y;
}

// linear_int8.h's formula written out directly from the checkpoint's layout: quantize, then per
// group the bias step and the scaled integer sum.
float formula(const float* x, const QuantWeight& qw, int64_t row) {
  const ops::Weight& w = qw.w;
  const int64_t in = w.in_features, G = w.quant->group_size, groups = in / G;
  const int bits = w.quant->bits, m = 1 << (bits - 1);
  const uint32_t* packed = qw.packed.data<uint32_t>() + row * affine_packed_words(in, bits);
  const auto param = [&](const Tensor& t, int64_t g) {
    const int64_t k = row * groups + g;
    switch (t.dtype()) {
      case DType::kBF16: return bf16_to_f32(t.data<uint16_t>()[k]);
      case DType::kF16: return f16_to_f32(t.data<uint16_t>()[k]);
      default: return t.data<float>()[k];
    }
  };
  float y = 0.0f;
  for (int64_t g = 0; g < groups; ++g) {
    float amax = 0, lanes[kDotLanes];
    for (int64_t i = g * G; i < (g + 1) * G; ++i) {
      amax = std::max(amax, std::fabs(x[i]));
      float& lane = lanes[i % kDotLanes];
      lane = i < g * G + kDotLanes ? x[i] : lane + x[i];
    }
    const float sx = fold_lanes(lanes);
    const float d = amax == 0 ? 0.0f : amax / 127.0f;
    int32_t P = 0;
    for (int64_t i = g * G; i < (g + 1) * G; ++i) {
      const int32_t xq = amax == 0 ? 0 : int32_t(std::nearbyint(x[i] * (127.0f / amax)));
      P += (int32_t(affine_code(packed, i, bits)) - m) * xq;
    }
    const float s = param(qw.scales, g), centred = param(qw.biases, g) + s * float(m);
    y = std::fma(centred, sx, y);
    y = std::fma(s * d, float(P), y);
  }
  return y;
}

TEST(LinearInt8, PortableFollowsTheFormula) {
  for (int bits : {4, 8})
    for (int group : {32, 64, 128})
      for (DType params : {DType::kBF16, DType::kF16, DType::kF32}) {
        const int64_t in = 17 * group, R = 19, T = 2;  // 19 rows: a second, partial tile
        const QuantWeight qw = quantized(R, in, bits, group, params, uint32_t(bits + group));
        const auto x = normal(size_t(T * in), 9);
        const auto y = run_int8(Isa::kPortable, x, T, qw.w, 0, R);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t r = 0; r < R; ++r)
            EXPECT_EQ(y[size_t(t * R + r)], formula(x.data() + t * in, qw, r))
                << "q" << bits << " g" << group << " " << dtype_name(params) << " t=" << t << " r=" << r;
      }
}

TEST(LinearInt8, EveryIsaEqualsPortable) {
  for (int bits : {4, 8})
    for (int group : {32, 64, 128})
      for (int64_t in : {int64_t(group), int64_t(3 * group), int64_t(7 * group)})
        // 37 and 50 rows: tiles in pairs (from 4 tokens on), a partial one alone or in a pair.
        for (int64_t R : {1, 5, 11, 37, 50})
          for (DType params : {DType::kBF16, DType::kF16, DType::kF32}) {
            const QuantWeight qw = quantized(R, in, bits, group, params, uint32_t(bits * group + R));
            for (int64_t T : {1, 3, 8, 13, 21}) {
              const auto x = normal(size_t(T * in), uint32_t(T * 31 + in));
              const auto want = run_int8(Isa::kPortable, x, T, qw.w, 0, R);
              const std::string what = "q" + std::to_string(bits) + " g" + std::to_string(group) +
                                       " in=" + std::to_string(in) + " R=" + std::to_string(R) +
                                       " T=" + std::to_string(T) + " " + dtype_name(params);
              for (Isa isa : simd_paths()) {
                EXPECT_TRUE(same_bits(want, run_int8(isa, x, T, qw.w, 0, R))) << isa_name(isa) << " " << what;
                if (R < 3) continue;
                // A sub-range of rows computes the same values as the full range.
                const auto part = run_int8(isa, x, T, qw.w, 1, R - 2);
                for (int64_t t = 0; t < T; ++t)
                  EXPECT_EQ(std::memcmp(part.data() + t * (R - 2), want.data() + t * R + 1,
                                        size_t(R - 2) * sizeof(float)), 0) << isa_name(isa) << " rows " << what;
              }
            }
          }
}

// The SIMD kernels take the tokens in blocks whose activations stay in the L2 cache (384 KB: 432
// tokens of 896 inputs, whole token tiles), so the second block starts mid-batch and ends in a
// partial tile.
TEST(LinearInt8, EveryIsaEqualsPortableAcrossTokenBlocks) {
  for (int bits : {4, 8}) {
    const int64_t in = 896, R = 37, T = 460;
    const QuantWeight qw = quantized(R, in, bits, 64, DType::kBF16, uint32_t(bits));
    const auto x = normal(size_t(T * in), 17);
    const auto want = run_int8(Isa::kPortable, x, T, qw.w, 0, R);
    for (Isa isa : simd_paths())
      EXPECT_TRUE(same_bits(want, run_int8(isa, x, T, qw.w, 0, R))) << isa_name(isa) << " q" << bits;
  }
}

// The largest integer sums a group can reach: every code at its maximum (15, or 255 whose halves
// are 15 and 15) against activations of one sign, all rounding to +-127. SIMD paths that sum
// products in narrower lanes before widening them must not overflow there.
TEST(LinearInt8, EveryIsaEqualsPortableAtTheLargestSums) {
  for (int bits : {4, 8})
    for (int group : {32, 64, 128}) {
      const int64_t in = 4 * group, R = 37;
      QuantWeight qw = quantized(R, in, bits, group, DType::kBF16, uint32_t(bits + group));
      std::memset(qw.packed.raw(), 0xFF, size_t(qw.packed.nbytes()));
      qw.w = ops::affine_weight(qw.packed, qw.scales, qw.biases, AffineSpec{bits, group});
      qw.w.matmul = ops::MatmulPath::kInt8;
      qw.w = ops::int8_weight(qw.w);
      for (int64_t T : {1, 3, 8}) {
        std::vector<float> x(size_t(T * in));
        for (int64_t t = 0; t < T; ++t)
          std::fill(x.begin() + t * in, x.begin() + (t + 1) * in, t % 2 ? -1.5f : 2.0f);
        const auto want = run_int8(Isa::kPortable, x, T, qw.w, 0, R);
        for (Isa isa : simd_paths())
          EXPECT_TRUE(same_bits(want, run_int8(isa, x, T, qw.w, 0, R)))
              << isa_name(isa) << " q" << bits << " g" << group << " T=" << T;
      }
    }
}

TEST(LinearInt8, EveryIsaQuantizesLikePortable) {
  for (int bits : {4, 8})
    for (int group : {32, 64, 128}) {
      const int64_t in = 5 * group, T = 3;
      auto x = normal(size_t(T * in), uint32_t(bits + group));
      std::fill(x.begin() + group, x.begin() + 2 * group, 0.0f);  // an all-zero group
      x[size_t(2 * group)] = -0.0f;
      const Int8Acts want = quantize_int8_acts(Isa::kPortable, x.data(), T, in, group, bits);
      for (Isa isa : simd_paths()) {
        const Int8Acts got = quantize_int8_acts(isa, x.data(), T, in, group, bits);
        EXPECT_TRUE(same_bytes(got.q, want.q)) << isa_name(isa) << " q" << bits << " g" << group;
        EXPECT_TRUE(same_scalars(got, want)) << isa_name(isa) << " q" << bits << " g" << group;
      }
    }
}

TEST(LinearInt8, CloseToTheExactPath) {
  // Rounding each activation to 1/254 of its group's range leaves a relative RMS error of a few
  // 1e-3 on random data; 1e-2 is the stated bound.
  for (int bits : {4, 8})
    for (int group : {32, 64, 128}) {
      const int64_t in = 896, R = 64, T = 5;
      const QuantWeight qw = quantized(R, in, bits, group, DType::kBF16, uint32_t(bits + group));
      const auto x = normal(size_t(T * in), 3);
      const auto exact = run_exact(x, T, qw.w);
      const auto fast = run_int8(cpu_isa(), x, T, qw.w, 0, R);
      double err = 0, ref = 0;
      for (size_t i = 0; i < exact.size(); ++i) {
        err += double(fast[i] - exact[i]) * double(fast[i] - exact[i]);
        ref += double(exact[i]) * double(exact[i]);
      }
      const double rel = std::sqrt(err / ref);
      EXPECT_LT(rel, 1e-2) << "q" << bits << " g" << group;
      EXPECT_GT(rel, 0.0) << "the int8 path must not be the exact one";
    }
}

TEST(LinearInt8, ATokenAloneEqualsTheSameTokenInABatch) {
  for (int bits : {4, 8}) {
    const int64_t in = 384, R = 37, T = 13;
    const QuantWeight qw = quantized(R, in, bits, 64, DType::kBF16, 7);
    const auto x = normal(size_t(T * in), 11);
    for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
      if (!isa_supported(isa)) continue;
      const auto batch = run_int8(isa, x, T, qw.w, 0, R);
      for (int64_t t = 0; t < T; ++t) {
        const std::vector<float> row(x.begin() + t * in, x.begin() + (t + 1) * in);
        const auto alone = run_int8(isa, row, 1, qw.w, 0, R);
        EXPECT_EQ(std::memcmp(alone.data(), batch.data() + t * R, size_t(R) * sizeof(float)), 0)
            << isa_name(isa) << " q" << bits << " token " << t;
      }
    }
  }
}

TEST(LinearInt8, ZeroActivationsGiveZero) {
  for (int bits : {4, 8}) {
    const int64_t in = 256, R = 9, T = 3;
    const QuantWeight qw = quantized(R, in, bits, 64, DType::kBF16, 5);
    auto x = normal(size_t(T * in), 13);
    std::fill(x.begin(), x.begin() + in, 0.0f);              // token 0: all zero
    std::fill(x.begin() + in + 64, x.begin() + in + 128, 0.0f);  // token 1: one zero group
    const auto exact = run_exact(x, T, qw.w);
    double rms = 0;  // of token 1's exact outputs, the scale of the int8 error bound
    for (int64_t r = 0; r < R; ++r) rms += double(exact[size_t(R + r)]) * exact[size_t(R + r)] / double(R);
    rms = std::sqrt(rms);
    for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
      if (!isa_supported(isa)) continue;
      const auto y = run_int8(isa, x, T, qw.w, 0, R);
      for (int64_t r = 0; r < R; ++r) {
        EXPECT_EQ(y[size_t(r)], 0.0f) << isa_name(isa);
        EXPECT_TRUE(std::isfinite(y[size_t(R + r)])) << isa_name(isa);
        EXPECT_NEAR(y[size_t(R + r)], exact[size_t(R + r)], 0.03 * rms) << isa_name(isa);
      }
    }
  }
}

// Activations are quantized into uninitialised memory: an all-zero group must still come out with
// zero codes, d and base whatever the buffer held.
TEST(LinearInt8, QuantizerClearsAllZeroGroups) {
  const int64_t in = 192, G = 64;
  auto x = normal(size_t(in), 14);
  std::fill(x.begin() + G, x.begin() + 2 * G, 0.0f);  // group 1
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    for (int bits : {4, 8}) {
      Int8Acts a(1, in, int(G), bits);
      std::memset(a.q.data(), 0x5A, a.q.size());
      for (Int8TokenGroup& s : a.scalars) {
        std::fill_n(s.d, 8, 7.0f);
        std::fill_n(s.base, 8, 7);
      }
      int8_kernels(isa).quantize(x.data(), int(G), bits, a, 0, 0, a.groups);
      for (int64_t i = G; i < 2 * G; ++i) ASSERT_EQ(a.q[size_t(i)], 0) << isa_name(isa) << " q" << bits << " i " << i;
      EXPECT_EQ(a.d(0, 1), 0.0f) << isa_name(isa);
      EXPECT_EQ(a.base(0, 1), 0) << isa_name(isa);
      EXPECT_EQ(a.sx(0, 1), 0.0f) << isa_name(isa);
      EXPECT_NE(a.d(0, 0), 0.0f) << isa_name(isa);
    }
  }
}

TEST(LinearInt8, OpsLinearTakesThePathAndIgnoresThreads) {
  const int64_t in = 512, R = 200, T = 6;
  QuantWeight qw = quantized(R, in, 4, 64, DType::kBF16, 21);
  const auto xv = normal(size_t(T * in), 17);
  Tensor x = Tensor::empty({T, in}, DType::kF32);
  std::memcpy(x.data<float>(), xv.data(), xv.size() * sizeof(float));
  const auto want = run_int8(Isa::kPortable, xv, T, qw.w, 0, R);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    ops::set_thread_pool(&pool);
    const Tensor y = ops::linear(x, qw.w);
    ops::set_thread_pool(nullptr);
    EXPECT_EQ(std::memcmp(y.data<float>(), want.data(), want.size() * sizeof(float)), 0) << threads;
  }
  // The exact path stays the default of a Weight, and 2-bit codes ignore the int8 request.
  qw.w.matmul = ops::MatmulPath::kExact;
  EXPECT_FALSE(uses_int8(qw.w));
  EXPECT_NE(std::memcmp(ops::linear(x, qw.w).data<float>(), want.data(), want.size() * sizeof(float)), 0);
  const QuantWeight q2 = quantized(4, 64, 2, 64, DType::kBF16, 3);
  EXPECT_FALSE(uses_int8(q2.w));
}

TEST(LinearInt8, ManySharesQuantizedActivationsOnlyWhereTheyMatch) {
  // Two q4 g64 weights share one quantization of x; the q8 g64 and q4 g32 ones need their own.
  // 40 tokens on 3 threads also quantize token rows in parallel.
  const int64_t in = 256, T = 40;
  const QuantWeight a = quantized(37, in, 4, 64, DType::kBF16, 31);
  const QuantWeight b = quantized(21, in, 4, 64, DType::kBF16, 32);
  const QuantWeight c = quantized(13, in, 8, 64, DType::kBF16, 33);
  const QuantWeight d = quantized(9, in, 4, 32, DType::kBF16, 34);
  const auto xv = normal(size_t(T * in), 35);
  Tensor x = Tensor::empty({T, in}, DType::kF32);
  std::memcpy(x.data<float>(), xv.data(), xv.size() * sizeof(float));
  ThreadPool pool(3);
  ops::set_thread_pool(&pool);
  const ops::Weight* ws[] = {&a.w, &b.w, &c.w, &d.w};
  const std::vector<Tensor> many = ops::linear_many(x, ws);
  ops::set_thread_pool(nullptr);
  for (size_t i = 0; i < 4; ++i) {
    const auto want = run_int8(Isa::kPortable, xv, T, *ws[i], 0, ws[i]->out_features);
    EXPECT_EQ(std::memcmp(many[i].data<float>(), want.data(), want.size() * sizeof(float)), 0) << i;
  }
}

Tensor tensor_of(const std::vector<float>& v, int64_t rows, int64_t cols) { return Tensor::from_f32(v, {rows, cols}); }

TEST(LinearInt8, NormAndGatedLinearQuantizeTheNextLayersInput) {
  // A decoder's MLP: the norm quantizes its rows for gate/up, gated_linear the result for down.
  // On 1 and 3 threads and for T = 40, where one thread's rows of gated_linear are computed in two
  // pieces, the hand-downs are the activations each layer would quantize, and the chain's result
  // has the bits of the chain without them.
  const int64_t in = 256, n = 960;
  const QuantWeight gate = quantized(n, in, 4, 64, DType::kBF16, 41);
  const QuantWeight up = quantized(n, in, 4, 64, DType::kBF16, 42);
  const Tensor norm_weight = tensor_of(normal(size_t(in), 40), 1, in).reshape({in});
  for (int bits : {4, 8})
    for (int64_t T : {1, 7, 40})
      for (int threads : {1, 3}) {
        const QuantWeight down = quantized(23, n, bits, 64, DType::kBF16, 43);
        const Tensor x = tensor_of(normal(size_t(T * in), 44), T, in);
        const std::string at = "q" + std::to_string(bits) + " T " + std::to_string(T) + " threads " +
                               std::to_string(threads);
        ThreadPool pool(threads);
        ops::set_thread_pool(&pool);
        ops::QuantizedInput normed_acts, gated_acts;
        const Tensor normed = ops::rms_norm(x, norm_weight, 1e-6f, ops::NormWeight::kPlain, &gate.w, &normed_acts);
        expect_quantized_for(normed, normed_acts, gate.w, at + " norm");
        const Tensor h = ops::gated_linear(normed, gate.w, up.w, ops::GateActivation::kSiLU, normed_acts, &down.w,
                                           &gated_acts);
        const Tensor plain = ops::gated_linear(normed, gate.w, up.w, ops::GateActivation::kSiLU);
        EXPECT_EQ(std::memcmp(h.data<float>(), plain.data<float>(), size_t(T * n) * sizeof(float)), 0) << at;
        expect_quantized_for(h, gated_acts, down.w, at + " gated");
        ops::set_thread_pool(nullptr);
      }
}

TEST(LinearInt8, OnlyLayersOnTheInt8PathGetQuantizedInput) {
  // Activations are quantized for the next layer's group size; one on the exact path gets none,
  // and a stale hand-down is cleared.
  const int64_t in = 256, n = 960;
  const QuantWeight gate = quantized(n, in, 4, 64, DType::kBF16, 41);
  const QuantWeight up = quantized(n, in, 4, 64, DType::kBF16, 42);
  const QuantWeight g32 = quantized(5, n, 4, 32, DType::kBF16, 45);
  const Tensor x = tensor_of(normal(size_t(in), 46), 1, in);
  ops::QuantizedInput acts;
  ops::gated_linear(x, gate.w, up.w, ops::GateActivation::kSiLU, nullptr, &g32.w, &acts);
  ASSERT_TRUE(acts);
  EXPECT_EQ(acts->groups, n / 32);
  QuantWeight exact = quantized(5, n, 4, 64, DType::kBF16, 47);
  exact.w.matmul = ops::MatmulPath::kExact;
  ops::gated_linear(x, gate.w, up.w, ops::GateActivation::kSiLU, nullptr, &exact.w, &acts);
  EXPECT_FALSE(acts);
  const Tensor norm_weight = tensor_of(normal(size_t(in), 40), 1, in).reshape({in});
  ops::rms_norm(x, norm_weight, 1e-6f, ops::NormWeight::kPlain, &gate.w, &acts);
  ASSERT_TRUE(acts);
  exact = quantized(5, in, 4, 64, DType::kBF16, 48);
  exact.w.matmul = ops::MatmulPath::kExact;
  ops::rms_norm(x, norm_weight, 1e-6f, ops::NormWeight::kPlain, &exact.w, &acts);
  EXPECT_FALSE(acts);
}

}  // namespace
}  // namespace kvlm::cpu
