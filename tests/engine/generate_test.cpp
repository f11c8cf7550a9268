// Single-sequence generation on the bundled default model (8k vocabulary, 15.7M parameters).
#include "kvlm/engine/generate.h"

#include <gtest/gtest.h>

#include <memory>

#include "kvlm/base/error.h"

namespace kvlm {
namespace {

const std::string kModelDir = std::string(KVLM_MODELS_DIR) + "/default";

class GenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::load(kModelDir).release();
    tokenizer_ = new Tokenizer(Tokenizer::from_model_dir(kModelDir));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tokenizer_;
  }

  std::vector<int32_t> prompt(const std::string& text) const { return tokenizer_->encode(text, true); }

  GenerationResult run(const std::string& text, GenerateOptions opts, const GenerateCallback& cb = {}) {
    return generate(*model_, *tokenizer_, prompt(text), opts, cb);
  }

  static GenerateOptions greedy(int max_tokens) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    return o;
  }

  static GenerateOptions sampled(int max_tokens, uint64_t seed) {
    GenerateOptions o = greedy(max_tokens);
    o.sampler.temperature = 1.0f;
    o.sampler.seed = seed;
    return o;
  }

  static Model* model_;
  static Tokenizer* tokenizer_;
};

Model* GenerateTest::model_ = nullptr;
Tokenizer* GenerateTest::tokenizer_ = nullptr;

TEST_F(GenerateTest, GreedyMatchesArgmaxOfFullRecompute) {
  const auto ids = prompt("The jury said");
  const auto r = generate(*model_, *tokenizer_, ids, greedy(6));
  ASSERT_EQ(r.tokens.size(), 6u);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  // Recompute every step from scratch in a fresh sequence: the KV-cached decode must agree.
  std::vector<int32_t> context = ids;
  for (int32_t expected : r.tokens) {
    KVSequence seq(model_->kv_pool());
    Batch b;
    b.tokens = context;
    b.seqs = {{&seq, 0, int32_t(context.size())}};
    const std::vector<float> logits = model_->forward(b).to_f32_vector();
    EXPECT_EQ(argmax(logits), expected);
    context.push_back(expected);
  }
}

TEST_F(GenerateTest, PrefillChunkingDoesNotChangeTheOutput) {
  const std::string text = "It was a bright cold day in April, and the clocks were striking thirteen.";
  for (const GenerateOptions& base : {greedy(8), sampled(8, 5)}) {
    GenerateOptions whole = base, small = base, one = base;
    small.prefill_chunk = 3;
    one.prefill_chunk = 1;
    const auto a = run(text, whole);
    EXPECT_EQ(run(text, small).tokens, a.tokens);
    EXPECT_EQ(run(text, one).tokens, a.tokens);
  }
}

TEST_F(GenerateTest, StreamedTextIsTheDecodedTokens) {
  std::string streamed;
  int calls = 0;
  const auto r = run("The jury said", greedy(12), [&](const GeneratedToken& t) {
    streamed += t.text;
    ++calls;
  });
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.text, tokenizer_->decode(r.tokens, true));
  EXPECT_GE(calls, int(r.tokens.size()));
  EXPECT_FALSE(r.text.empty());
}

TEST_F(GenerateTest, StopsAtEosWithoutEmittingIt) {
  // A large bias makes <|im_end|> (id 2, an EOS id in generation_config.json) the only choice.
  GenerateOptions o = greedy(8);
  o.sampler.logit_bias = {{2, 1000.0f}};
  const auto r = run("The jury said", o);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stats.decode_steps, 0);
}

TEST_F(GenerateTest, EosIdsComeFromConfigGenerationConfigAndTokenizer) {
  EXPECT_EQ(stop_token_ids(model_->config(), *tokenizer_), (std::vector<int32_t>{0, 2}));
}

TEST_F(GenerateTest, LogitBiasOnAnOrdinaryTokenRepeatsIt) {
  const int32_t the = tokenizer_->encode(" the", false).at(0);
  GenerateOptions o = greedy(4);
  o.sampler.logit_bias = {{the, 1000.0f}};
  const auto r = run("Once", o);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{the, the, the, the}));
  const std::string piece = tokenizer_->decode(std::vector<int32_t>{the}, true);
  EXPECT_EQ(r.text, piece + piece + piece + piece);
  EXPECT_EQ(r.stats.decode_steps, 3);  // the last token needs no forward pass
}

TEST_F(GenerateTest, StopStringCutsTheText) {
  const auto full = run("The jury said", greedy(24));
  ASSERT_GT(full.text.size(), 12u);
  const std::string stop = full.text.substr(8, 3);
  GenerateOptions o = greedy(24);
  o.stop_strings = {stop};
  std::string streamed;
  const auto cut = run("The jury said", o, [&](const GeneratedToken& t) { streamed += t.text; });
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(streamed, cut.text);
  EXPECT_EQ(cut.finish, FinishReason::kStop);
  EXPECT_LT(cut.tokens.size(), full.tokens.size());
}

TEST_F(GenerateTest, SeedDeterminesTheSample) {
  const auto a = run("The jury said", sampled(16, 1));
  EXPECT_EQ(run("The jury said", sampled(16, 1)).tokens, a.tokens);
  EXPECT_NE(run("The jury said", sampled(16, 2)).tokens, a.tokens);
}

TEST_F(GenerateTest, ReleasesItsKvBlocks) {
  const int32_t free_before = model_->kv_pool().num_free_blocks();
  run("The jury said", greedy(20));
  EXPECT_EQ(model_->kv_pool().num_free_blocks(), free_before);
}

TEST_F(GenerateTest, StatsCountTokensAndTime) {
  const auto r = run("The jury said", greedy(5));
  EXPECT_EQ(r.stats.prompt_tokens, int(prompt("The jury said").size()));
  EXPECT_EQ(r.stats.generated_tokens, 5);
  EXPECT_EQ(r.stats.decode_steps, 4);
  EXPECT_GT(r.stats.prefill_seconds, 0.0);
  EXPECT_GT(r.stats.decode_tokens_per_second(), 0.0);
}

TEST_F(GenerateTest, RejectsBadRequests) {
  EXPECT_THROW(generate(*model_, *tokenizer_, std::vector<int32_t>{}, greedy(4)), Error);
  const std::vector<int32_t> too_long(size_t(model_->config().max_position_embeddings), 5);
  EXPECT_THROW(generate(*model_, *tokenizer_, too_long, greedy(4)), Error);
  EXPECT_THROW(generate(*model_, *tokenizer_, std::vector<int32_t>{8192}, greedy(4)), Error);
  EXPECT_THROW(run("x", greedy(0)), Error);
  GenerateOptions bad = greedy(4);
  bad.sampler.top_p = 2.0f;
  EXPECT_THROW(run("x", bad), Error);
}

}  // namespace
}  // namespace kvlm
