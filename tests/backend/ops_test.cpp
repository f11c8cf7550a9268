// Each CPU reference op against small hand-computed expectations, plus the batch-invariance
// properties the model relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kvlm/backend/cpu/dot.h"
#include "kvlm/backend/ops.h"
#include "kvlm/base/error.h"
#include "kvlm/base/half.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm::ops {
namespace {

std::vector<float> values(const Tensor& t) { return t.to_f32_vector(); }

std::vector<float> random_values(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

Tensor to_bf16(const std::vector<float>& v, const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  for (size_t i = 0; i < v.size(); ++i) t.data<uint16_t>()[i] = f32_to_bf16(v[i]);
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// ---- RoPE frequencies ------------------------------------------------------------------------

RopeParams rope8(RopeParams::Type type) {
  RopeParams p;
  p.type = type;
  p.theta = 10000.0;
  p.rotary_dim = 8;
  return p;
}

TEST(RopeFrequencies, Default) {
  const RopeFrequencies f = rope_frequencies(rope8(RopeParams::Type::kDefault), 1);
  ASSERT_EQ(f.inv_freq.size(), 4u);
  const float expect[] = {1.0f, 0.1f, 0.01f, 0.001f};  // 10000^(-2i/8)
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(f.inv_freq[size_t(i)], expect[i]);
  EXPECT_EQ(f.attention_scaling, 1.0f);
}

TEST(RopeFrequencies, LinearDividesByFactor) {
  RopeParams p = rope8(RopeParams::Type::kLinear);
  p.factor = 4.0;
  const RopeFrequencies f = rope_frequencies(p, 1);
  const float expect[] = {0.25f, 0.025f, 0.0025f, 0.00025f};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(f.inv_freq[size_t(i)], expect[i]);
}

TEST(RopeFrequencies, Llama3KeepsHighScalesLowAndSmoothsMedium) {
  RopeParams p = rope8(RopeParams::Type::kLlama3);
  p.factor = 8.0;
  p.low_freq_factor = 1.0;
  p.high_freq_factor = 4.0;
  p.original_max_position_embeddings = 128;  // wavelengths: low > 128, high < 32
  const RopeFrequencies f = rope_frequencies(p, 1);
  // wavelength 2π: high frequency, kept. 2π/0.1 ≈ 62.8: medium, smooth = (128/62.8 - 1)/3.
  // 628 and 6283: low frequency, divided by 8.
  EXPECT_FLOAT_EQ(f.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(f.inv_freq[1], 0.042751178754307596f);
  EXPECT_FLOAT_EQ(f.inv_freq[2], 0.00125f);
  EXPECT_FLOAT_EQ(f.inv_freq[3], 0.000125f);
}

TEST(RopeFrequencies, YarnRampAndAttentionFactor) {
  RopeParams p = rope8(RopeParams::Type::kYarn);
  p.factor = 4.0;
  p.original_max_position_embeddings = 32;
  const RopeFrequencies f = rope_frequencies(p, 1);
  // Correction range for beta_fast 32 / beta_slow 1 at dim 8: floor(-0.80) -> 0, ceil(0.71) -> 1,
  // so pair 0 extrapolates (kept) and pairs 1..3 interpolate (divided by the factor).
  EXPECT_FLOAT_EQ(f.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(f.inv_freq[1], 0.025f);
  EXPECT_FLOAT_EQ(f.inv_freq[2], 0.0025f);
  EXPECT_FLOAT_EQ(f.inv_freq[3], 0.00025f);
  EXPECT_FLOAT_EQ(f.attention_scaling, 1.138629436111989f);  // 0.1 ln 4 + 1
  p.attention_factor = 0.5;
  EXPECT_EQ(rope_frequencies(p, 1).attention_scaling, 0.5f);
}

TEST(RopeFrequencies, DynamicRescalesOnlyPastTheTrainedLength) {
  RopeParams p = rope8(RopeParams::Type::kDynamic);
  p.factor = 2.0;
  p.max_position_embeddings = 16;
  const RopeFrequencies short_seq = rope_frequencies(p, 16);
  EXPECT_FLOAT_EQ(short_seq.inv_freq[1], 0.1f);
  // seq_len 32: base = 10000 * (2*32/16 - 1)^(8/6) = 43267.487...
  const RopeFrequencies long_seq = rope_frequencies(p, 32);
  EXPECT_FLOAT_EQ(long_seq.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(long_seq.inv_freq[1], 0.06933612743506347f);
  EXPECT_FLOAT_EQ(long_seq.inv_freq[2], 0.004807498567691361f);
  EXPECT_FLOAT_EQ(long_seq.inv_freq[3], 0.0003333333333333334f);
}

TEST(Rope, RotatesHalvesByPosition) {
  RopeParams p;
  p.theta = 10000.0;
  p.rotary_dim = 4;  // inv_freq {1, 0.01}; pairs (0, 2) and (1, 3)
  Tensor x = Tensor::from_f32({1, 2, 3, 4, 1, 2, 3, 4}, {2, 1, 4});
  const int32_t pos[] = {0, 1};
  rope_inplace(x, pos, p);
  const std::vector<float> v = values(x);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(v[size_t(i)], float(i + 1));  // position 0: identity
  EXPECT_FLOAT_EQ(v[4], 1 * std::cos(1.0f) - 3 * std::sin(1.0f));
  EXPECT_FLOAT_EQ(v[6], 3 * std::cos(1.0f) + 1 * std::sin(1.0f));
  EXPECT_FLOAT_EQ(v[5], 2 * std::cos(0.01f) - 4 * std::sin(0.01f));
  EXPECT_FLOAT_EQ(v[7], 4 * std::cos(0.01f) + 2 * std::sin(0.01f));
}

TEST(RopeTable, DynamicTokensUseTheirOwnLength) {
  RopeParams p = rope8(RopeParams::Type::kDynamic);
  p.factor = 2.0;
  p.max_position_embeddings = 16;
  const int32_t pos[] = {3, 31};
  const std::vector<float> table = values(rope_table(pos, p));
  ASSERT_EQ(table.size(), 16u);
  for (int64_t t = 0; t < 2; ++t) {
    const RopeFrequencies f = rope_frequencies(p, pos[t] + 1);  // token 0 within, token 1 past 16
    for (size_t i = 0; i < 4; ++i) {
      const float angle = f.inv_freq[i] * float(pos[t]);
      EXPECT_EQ(table[size_t(t * 8) + i], std::cos(angle) * f.attention_scaling);
      EXPECT_EQ(table[size_t(t * 8) + 4 + i], std::sin(angle) * f.attention_scaling);
    }
  }
  EXPECT_NE(table[9], std::cos(rope_frequencies(p, 1).inv_freq[1] * 31.0f));
}

TEST(Rope, TableMustMatchTheTokens) {
  RopeParams p = rope8(RopeParams::Type::kDefault);
  Tensor x = Tensor::empty({2, 1, 8}, DType::kF32);
  const int32_t pos[] = {5};
  const Tensor table = rope_table(pos, p);
  try {
    rope_inplace(x, table);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rope: 1 rows in the rope table for f32[2, 1, 8] cpu");
  }
}

// ---- Norms, activations, softmax -------------------------------------------------------------

TEST(RmsNorm, PlainAndOnePlusWeights) {
  const Tensor x = Tensor::from_f32({3, 4, 0, 0}, {2, 2});
  const std::vector<float> plain = values(rms_norm(x, Tensor::from_f32({1, 2}, {2}), 0.0f));
  const float inv = 1.0f / std::sqrt(12.5f);  // mean of 9 and 16
  EXPECT_FLOAT_EQ(plain[0], 3 * inv);
  EXPECT_FLOAT_EQ(plain[1], 2 * 4 * inv);
  const std::vector<float> one_plus =
      values(rms_norm(x, Tensor::from_f32({0, 1}, {2}), 0.0f, NormWeight::kOnePlus));
  EXPECT_EQ(one_plus[0], plain[0]);
  EXPECT_EQ(one_plus[1], plain[1]);
  // eps keeps an all-zero row finite.
  const std::vector<float> zero = values(rms_norm(x, Tensor::from_f32({1, 2}, {2}), 1e-6f));
  EXPECT_EQ(zero[2], 0.0f);
}

TEST(RmsNorm, Bf16Weight) {
  const Tensor x = Tensor::from_f32({3, 4}, {1, 2});
  EXPECT_EQ(values(rms_norm(x, to_bf16({1, 2}, {2}), 1e-5f)),
            values(rms_norm(x, Tensor::from_f32({1, 2}, {2}), 1e-5f)));
}

TEST(GatedActivation, SiluAndGeluTanh) {
  const Tensor g = Tensor::from_f32({1, 0}, {1, 2});
  const Tensor u = Tensor::from_f32({2, 5}, {1, 2});
  const std::vector<float> silu = values(gated_activation(g, u, GateActivation::kSiLU));
  EXPECT_FLOAT_EQ(silu[0], 1.4621171572600098f);  // 2 * sigmoid(1)
  EXPECT_EQ(silu[1], 0.0f);
  const std::vector<float> gelu = values(gated_activation(g, u, GateActivation::kGeluTanh));
  EXPECT_FLOAT_EQ(gelu[0], 2 * 0.8411919906082768f);
  EXPECT_EQ(gelu[1], 0.0f);
}

TEST(GatedLinear, GivesTheBitsOfTwoLinearsAndTheActivation) {
  // 100 outputs (not whole 16-row blocks), 33 inputs (a ragged last block), with biases; 600 tokens
  // make pieces of 48 rows, so a thread's rows take several. Dense bf16 and panel-order weights,
  // 1 and 3 threads, both activations.
  const int64_t n = 100, in = 33;
  const Weight gate = dense_weight(to_bf16(random_values(size_t(n * in), 1), {n, in}),
                                   to_bf16(random_values(size_t(n), 2), {n}));
  const Weight up = dense_weight(to_bf16(random_values(size_t(n * in), 3), {n, in}));
  const int64_t in32 = 64;
  const Weight gate32 = panel_weight(dense_weight(to_bf16(random_values(size_t(n * in32), 4), {n, in32})));
  const Weight up32 = panel_weight(dense_weight(to_bf16(random_values(size_t(n * in32), 5), {n, in32})));
  ASSERT_TRUE(gate32.panels);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    set_thread_pool(&pool);
    for (int64_t T : {1, 8, 37, 600})
      for (GateActivation act : {GateActivation::kSiLU, GateActivation::kGeluTanh})
        for (const auto& [g, u] : {std::pair{&gate, &up}, std::pair{&gate32, &up32}}) {
          const Tensor x = Tensor::from_f32(random_values(size_t(T * g->in_features), unsigned(T)),
                                            {T, g->in_features});
          EXPECT_TRUE(same_bits(gated_linear(x, *g, *u, act),
                                gated_activation(linear(x, *g), linear(x, *u), act)))
              << "threads " << threads << " T " << T << " in " << g->in_features;
        }
    set_thread_pool(nullptr);
  }
}

TEST(GatedLinear, RejectsMismatchedProjections) {
  const Weight gate = dense_weight(Tensor::from_f32(random_values(6, 1), {3, 2}));
  const Weight up = dense_weight(Tensor::from_f32(random_values(8, 2), {4, 2}));
  const Tensor x = Tensor::from_f32({1, 2}, {1, 2});
  try {
    gated_linear(x, gate, up, GateActivation::kSiLU);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "gated_linear: gate has 3 outputs, up 4");
  }
  try {
    gated_linear(Tensor::from_f32({1, 2, 3}, {1, 3}), gate, gate, GateActivation::kSiLU);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "linear: input f32[1, 3] cpu does not match a weight with 2 inputs");
  }
}

TEST(Softmax, RowsSumToOne) {
  const std::vector<float> s = values(softmax(Tensor::from_f32({0, std::log(3.0f), 5, 5}, {2, 2})));
  EXPECT_FLOAT_EQ(s[0], 0.25f);
  EXPECT_FLOAT_EQ(s[1], 0.75f);
  EXPECT_FLOAT_EQ(s[2], 0.5f);
}

TEST(Elementwise, AddScaledScaleDivide) {
  Tensor x = Tensor::from_f32({1, 2}, {2});
  add_scaled_inplace(x, Tensor::from_f32({10, 20}, {2}), 0.5f);
  EXPECT_EQ(values(x), (std::vector<float>{6, 12}));
  scale_inplace(x, 2.0f);
  EXPECT_EQ(values(x), (std::vector<float>{12, 24}));
  divide_inplace(x, 3.0f);
  EXPECT_EQ(values(x), (std::vector<float>{4, 8}));
}

TEST(Rows, GatherAndConcat) {
  const Tensor x = Tensor::from_f32({1, 2, 3, 4, 5, 6}, {3, 2});
  const int32_t rows[] = {2, 0};
  EXPECT_EQ(values(gather_rows(x, rows)), (std::vector<float>{5, 6, 1, 2}));
  EXPECT_EQ(values(concat_rows({x.slice(0, 1, 2), x.slice(0, 0, 1)})),
            (std::vector<float>{3, 4, 1, 2}));
}

// ---- Embedding and linear ----------------------------------------------------------------------

TEST(Linear, DenseWithBias) {
  const Tensor x = Tensor::from_f32({1, 2, 3, -1, 0, 1}, {2, 3});
  const Weight w = dense_weight(Tensor::from_f32({1, 0, 0, 1, 1, 1}, {2, 3}),
                                Tensor::from_f32({0.5f, -1}, {2}));
  EXPECT_EQ(values(linear(x, w)), (std::vector<float>{1.5f, 5, -0.5f, -1}));
}

TEST(Linear, Bf16WeightEqualsItsF32Widening) {
  const std::vector<float> wv = random_values(24 * 40, 1);
  const Tensor wb = to_bf16(wv, {24, 40});
  const Tensor wf = Tensor::from_f32(wb.to_f32_vector(), {24, 40});
  const Tensor x = Tensor::from_f32(random_values(3 * 40, 2), {3, 40});
  EXPECT_TRUE(same_bits(linear(x, dense_weight(wb)), linear(x, dense_weight(wf))));
}

// MLX affine weights reduce along the input like dense ones (cpu/panels.h): the outputs are their
// dequantized float twin's bits, whether the codes are read from the checkpoint's rows or from
// affine panels.
TEST(Linear, AffineWeightEqualsItsDequantization) {
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    const AffineSpec spec{bits, 32};
    const Tensor w = Tensor::from_f32(random_values(20 * 64, 3), {20, 64});
    const AffineWeight q = affine_quantize(w, spec, DType::kBF16);
    const Weight qw = affine_weight(q.packed, q.scales, q.biases, spec);
    EXPECT_EQ(qw.in_features, 64);
    const Weight dense = dense_weight(affine_dequantize(q));
    const Weight panels = panel_weight(qw);
    EXPECT_TRUE(panels.affine_panels.defined()) << bits;
    for (int64_t T : {1, 2, 9}) {
      const Tensor x = Tensor::from_f32(random_values(size_t(T * 64), 4), {T, 64});
      const Tensor want = linear(x, dense);
      EXPECT_TRUE(same_bits(linear(x, qw), want)) << bits << " T=" << T;
      EXPECT_TRUE(same_bits(linear(x, panels), want)) << bits << " panels T=" << T;
    }
    const int32_t ids[] = {7, 0, 19};
    EXPECT_TRUE(same_bits(embedding(qw, ids), embedding(dense, ids))) << bits;
    EXPECT_TRUE(same_bits(embedding(panels, ids), embedding(dense, ids))) << bits;
  }
}

TEST(Linear, RowsDoNotDependOnBatchOrThreads) {
  const Weight w = dense_weight(to_bf16(random_values(70 * 96, 5), {70, 96}));
  const Tensor x = Tensor::from_f32(random_values(5 * 96, 6), {5, 96});
  ThreadPool one(1), three(3);
  set_thread_pool(&one);
  const Tensor all1 = linear(x, w);
  set_thread_pool(&three);
  const Tensor all3 = linear(x, w);
  const Tensor row3 = linear(x.slice(0, 3, 4), w);
  set_thread_pool(nullptr);
  EXPECT_TRUE(same_bits(all1, all3));
  EXPECT_EQ(std::memcmp(row3.raw(), all1.slice(0, 3, 4).raw(), row3.nbytes()), 0);
}

TEST(Linear, ManyInOneRoundEqualsEachAlone) {
  // Odd row counts so the pool's chunks straddle weights; formats and a bias mixed.
  const Weight a = dense_weight(to_bf16(random_values(37 * 64, 7), {37, 64}),
                                Tensor::from_f32(random_values(37, 8), {37}));
  const AffineSpec spec{4, 32};
  const AffineWeight q = affine_quantize(Tensor::from_f32(random_values(21 * 64, 9), {21, 64}),
                                         spec, DType::kBF16);
  const Weight b = affine_weight(q.packed, q.scales, q.biases, spec);
  const Weight c = dense_weight(Tensor::from_f32(random_values(5 * 64, 10), {5, 64}));
  const Tensor x = Tensor::from_f32(random_values(3 * 64, 11), {3, 64});
  ThreadPool three(3);
  set_thread_pool(&three);
  const Weight* ws[] = {&a, &b, &c};
  const std::vector<Tensor> many = linear_many(x, ws);
  set_thread_pool(nullptr);
  ASSERT_EQ(many.size(), 3u);
  EXPECT_TRUE(same_bits(many[0], linear(x, a)));
  EXPECT_TRUE(same_bits(many[1], linear(x, b)));
  EXPECT_TRUE(same_bits(many[2], linear(x, c)));
}

TEST(Linear, ManyRejectsAWeightOfAnotherWidth) {
  const Weight a = dense_weight(Tensor::from_f32(random_values(4 * 8, 12), {4, 8}));
  const Weight b = dense_weight(Tensor::from_f32(random_values(4 * 6, 13), {4, 6}));
  const Tensor x = Tensor::from_f32(random_values(8, 14), {1, 8});
  const Weight* ws[] = {&a, &b};
  try {
    linear_many(x, ws);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "linear: input f32[1, 8] cpu does not match a weight with 6 inputs");
  }
}

TEST(Embedding, GathersWidenedRowsAndRejectsBadIds) {
  const Weight table = dense_weight(to_bf16({1, 2, 3, 4, 5, 6}, {3, 2}));
  const int32_t ids[] = {2, 2, 0};
  EXPECT_EQ(values(embedding(table, ids)), (std::vector<float>{5, 6, 5, 6, 1, 2}));
  const int32_t bad[] = {3};
  try {
    embedding(table, bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding: token id 3 is outside the vocabulary [0, 3)");
  }
}

TEST(Weight, BiasShapeIsChecked) {
  EXPECT_THROW(dense_weight(Tensor::from_f32({1, 2, 3, 4}, {2, 2}), Tensor::from_f32({1}, {1})),
               Error);
}

}  // namespace
}  // namespace kvlm::ops
