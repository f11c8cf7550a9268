// Parity of the forward pass with Hugging Face transformers (fp32 goldens from
// tools/model_fixtures.py), and the batch-invariance contract: chunked prefill, mixed batches and
// thread counts give the same bits as a one-shot run alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kvlm/base/thread_pool.h"
#include "model_test_util.h"

namespace kvlm::test {
namespace {

// Tolerance: max |kvlm - transformers| over all logits <= kRelTol * max |transformers logit|.
constexpr double kRelTol = 1e-4;

struct Diff {
  double max_abs = 0, max_ref = 0;
  double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

Diff compare(const std::vector<float>& got, const std::vector<float>& ref) {
  Diff d;
  EXPECT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(double(got[i]) - double(ref[i])));
    d.max_ref = std::max(d.max_ref, std::fabs(double(ref[i])));
  }
  return d;
}

int argmax(const float* row, int n) { return int(std::max_element(row, row + n) - row); }

class Parity : public ::testing::TestWithParam<std::string> {};

TEST_P(Parity, PrefillAndTeacherForcedDecodeMatchTransformers) {
  const Golden g = load_golden(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  ASSERT_EQ(model->config().vocab_size, g.vocab);
  KVSequence seq(model->kv_pool());
  const Diff pre = compare(run_chunk(*model, seq, g.prompt), g.prefill);
  std::vector<float> decode;
  for (int32_t tok : g.decode_tokens) {
    const std::vector<float> l = run_chunk(*model, seq, {tok});
    decode.insert(decode.end(), l.begin(), l.end());
  }
  const Diff dec = compare(decode, g.decode);
  std::printf("[parity] %-24s prefill max_abs %.3g (rel %.3g)  decode max_abs %.3g (rel %.3g)\n",
              GetParam().c_str(), pre.max_abs, pre.rel(), dec.max_abs, dec.rel());
  EXPECT_LE(pre.rel(), kRelTol);
  EXPECT_LE(dec.rel(), kRelTol);
  EXPECT_EQ(seq.length(), int32_t(g.prompt.size() + g.decode_tokens.size()));
}

TEST_P(Parity, GreedyTokensMatchTransformers) {
  const Golden g = load_golden(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  KVSequence seq(model->kv_pool());
  Batch b;
  b.tokens = g.prompt;
  b.seqs = {{&seq, 0, int32_t(g.prompt.size())}};
  std::vector<int32_t> greedy;
  for (size_t step = 0; step < g.greedy_tokens.size(); ++step) {
    const Tensor logits = model->forward(b);  // the last row only
    ASSERT_EQ(logits.dim(0), 1);
    greedy.push_back(argmax(logits.data<float>(), g.vocab));
    b.tokens = {greedy.back()};
    b.seqs = {{&seq, seq.length(), 1}};
  }
  EXPECT_EQ(greedy, g.greedy_tokens);
}

// Prompt and decode tokens as one 28-token stream.
std::vector<int32_t> stream_of(const Golden& g) {
  std::vector<int32_t> t = g.prompt;
  t.insert(t.end(), g.decode_tokens.begin(), g.decode_tokens.end());
  return t;
}

TEST_P(Parity, ChunkedPrefillIsBitIdenticalToOneShot) {
  const Golden g = load_golden(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  const std::vector<int32_t> tokens = stream_of(g);
  const std::vector<float> one_shot = run_chunked(*model, tokens, 0);
  for (size_t chunk : {1u, 3u, 7u, 16u})
    EXPECT_TRUE(same_bits(run_chunked(*model, tokens, chunk), one_shot)) << "chunk " << chunk;
}

TEST_P(Parity, MixedBatchIsBitIdenticalToSoloRuns) {
  const Golden g = load_golden(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  const std::vector<int32_t> a = stream_of(g);
  std::vector<int32_t> b_tokens(a.rbegin(), a.rend());
  b_tokens.resize(20);
  const std::vector<std::vector<int32_t>> tokens = {a, b_tokens};
  const std::vector<std::vector<float>> solo = {run_chunked(*model, a, 0),
                                                run_chunked(*model, b_tokens, 0)};
  // Steps of (sequence, new tokens), in batch order: prefill chunks next to decodes, both orders.
  const std::vector<std::vector<std::pair<int, int>>> steps = {
      {{0, 10}, {1, 5}}, {{1, 7}, {0, 1}}, {{0, 9}, {1, 1}}, {{1, 7}}, {{0, 8}}};
  KVSequence seqs[2] = {KVSequence(model->kv_pool()), KVSequence(model->kv_pool())};
  std::vector<float> batched[2];
  for (const auto& step : steps) {
    Batch b;
    for (const auto& [s, n] : step) {
      const int32_t past = seqs[s].length();
      b.seqs.push_back({&seqs[s], past, n});
      b.tokens.insert(b.tokens.end(), tokens[size_t(s)].begin() + past,
                      tokens[size_t(s)].begin() + past + n);
    }
    for (int32_t r = 0; r < int32_t(b.tokens.size()); ++r) b.logit_rows.push_back(r);
    const std::vector<float> l = model->forward(b).to_f32_vector();
    size_t row = 0;
    for (const auto& [s, n] : step) {
      batched[s].insert(batched[s].end(), l.begin() + long(row * size_t(g.vocab)),
                        l.begin() + long((row + size_t(n)) * size_t(g.vocab)));
      row += size_t(n);
    }
  }
  EXPECT_TRUE(same_bits(batched[0], solo[0]));
  EXPECT_TRUE(same_bits(batched[1], solo[1]));
}

TEST_P(Parity, ThreadCountDoesNotChangeBits) {
  const Golden g = load_golden(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  const std::vector<int32_t> tokens = stream_of(g);
  ThreadPool one(1), two(2), three(3);
  ops::set_thread_pool(&one);
  const std::vector<float> r1 = run_chunked(*model, tokens, 0);
  ops::set_thread_pool(&two);
  const std::vector<float> r2 = run_chunked(*model, tokens, 0);
  ops::set_thread_pool(&three);
  const std::vector<float> r3 = run_chunked(*model, tokens, 0);
  ops::set_thread_pool(nullptr);
  EXPECT_TRUE(same_bits(r1, r2));
  EXPECT_TRUE(same_bits(r1, r3));
}

// A prefill chunk run without logits fills the same KV: the next token's logits are unchanged.
TEST_P(Parity, ChunkWithoutLogitsFillsTheSameCache) {
  const Golden g = load_golden(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  KVSequence seq(model->kv_pool());
  Batch b;
  b.tokens = g.prompt;
  b.seqs = {{&seq, 0, int32_t(g.prompt.size())}};
  b.want_logits = false;
  const Tensor none = model->forward(b);
  EXPECT_EQ(none.shape(), (Shape{0, g.vocab}));
  EXPECT_EQ(seq.length(), int32_t(g.prompt.size()));
  const std::vector<float> next = run_chunk(*model, seq, {g.decode_tokens[0]});
  std::vector<int32_t> all = g.prompt;
  all.push_back(g.decode_tokens[0]);
  const std::vector<float> one_shot = run_chunked(*model, all, 0);
  EXPECT_TRUE(same_bits(next, std::vector<float>(one_shot.end() - g.vocab, one_shot.end())));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity, ::testing::ValuesIn(fixture_names()),
                         [](const auto& info) { return info.param; });

// Reduced-precision KV codecs: every read goes through the codec, so chunking still cannot change
// the bits, and the logits stay close to the fp32 oracle.
TEST(KVCodec, Bf16AndF16CachesStayChunkInvariantAndClose) {
  const Golden g = load_golden("qwen3_untied");
  for (DType dt : {DType::kBF16, DType::kF16}) {
    ModelLoadOptions opts;
    opts.kv_quant.quant = dtype_name(dt);
    auto model = Model::load(fixture_dir("qwen3_untied"), opts);
    const std::vector<int32_t> tokens = stream_of(g);
    const std::vector<float> one_shot = run_chunked(*model, tokens, 0);
    EXPECT_TRUE(same_bits(run_chunked(*model, tokens, 5), one_shot)) << dtype_name(dt);
    const std::vector<float> prompt_rows(one_shot.begin(),
                                         one_shot.begin() + long(g.prompt.size()) * g.vocab);
    const Diff d = compare(prompt_rows, g.prefill);
    std::printf("[kv %s] qwen3_untied prefill max_abs %.3g (rel %.3g)\n", dtype_name(dt), d.max_abs,
                d.rel());
    EXPECT_LE(d.rel(), 2e-2) << dtype_name(dt);
    EXPECT_GT(d.max_abs, 0.0) << "a reduced-precision cache should not be exact";
  }
}

// Dense weights in the checkpoint's row order (--weight-layout rows) pack each panel per call:
// the same values in the same order as the panels copied at load, so the same bits, tied and
// untied heads, with and without biases.
TEST(WeightLayout, RowsGiveThePanelsBits) {
  for (const char* name : {"llama_tied", "llama_untied_bias", "qwen3_untied"}) {
    const Golden g = load_golden(name);
    ModelLoadOptions rows;
    rows.panel_weights = false;
    auto panels_model = Model::load(fixture_dir(name));
    auto rows_model = Model::load(fixture_dir(name), rows);
    const std::vector<int32_t> tokens = stream_of(g);
    EXPECT_TRUE(same_bits(run_chunked(*rows_model, tokens, 5), run_chunked(*panels_model, tokens, 5)))
        << name;
  }
}

TEST(KVPoolBudget, OutOfBlocksIsAnErrorAndLeavesTheSequenceUnchanged) {
  const Golden g = load_golden("llama_tied");
  ModelLoadOptions opts;
  opts.kv_block_size = 4;
  // Two blocks of 4 tokens: the 12-token prompt does not fit.
  KVPoolConfig pc{2, 2, 16, 4, {kv_passthrough_spec(DType::kF32)}, 0};
  opts.kv_budget_bytes = 2 * KVPool::bytes_per_block(pc);
  auto model = Model::load(fixture_dir("llama_tied"), opts);
  ASSERT_EQ(model->kv_pool().num_blocks(), 2);
  KVSequence seq(model->kv_pool());
  run_chunk(*model, seq, {g.prompt[0], g.prompt[1], g.prompt[2]});
  try {
    run_chunk(*model, seq, g.prompt);
    FAIL() << "expected an out-of-blocks error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "KV cache out of blocks: 3 more blocks needed, 1 free of 2 (raise the KV budget)");
  }
  EXPECT_EQ(seq.length(), 3);
  EXPECT_EQ(run_chunk(*model, seq, {g.prompt[3]}).size(), size_t(g.vocab));
}

}  // namespace
}  // namespace kvlm::test
