#include "kvlm/engine/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kvlm/base/error.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm {
namespace {

TEST(PerplexityWindows, OverlappingStride) {
  // context 4, stride 2 over 10 tokens: every token but the first is scored exactly once.
  const auto w = perplexity_windows(10, 4, 2);
  const std::vector<PerplexityWindow> expected{{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 10, 8}};
  EXPECT_EQ(w, expected);
}

TEST(PerplexityWindows, StrideEqualToContextLeavesEachWindowsFirstTokenUnscored) {
  const auto w = perplexity_windows(9, 4, 4);
  const std::vector<PerplexityWindow> expected{{0, 4, 1}, {4, 8, 5}, {8, 9, 9}};
  EXPECT_EQ(w, expected);
}

TEST(PerplexityWindows, ShortTextIsOneWindow) {
  const std::vector<PerplexityWindow> expected{{0, 3, 1}};
  EXPECT_EQ(perplexity_windows(3, 8, 4), expected);
}

TEST(PerplexityWindows, RejectsBadArguments) {
  EXPECT_THROW(perplexity_windows(10, 1, 1), Error);
  EXPECT_THROW(perplexity_windows(10, 4, 0), Error);
  EXPECT_THROW(perplexity_windows(10, 4, 5), Error);
  EXPECT_THROW(perplexity_windows(1, 4, 2), Error);
}

TEST(TokenNll, IsMinusLogSoftmax) {
  const std::vector<float> logits{0.0f, float(std::log(3.0))};
  EXPECT_NEAR(token_nll(logits, 1), -std::log(0.75), 1e-7);
  EXPECT_NEAR(token_nll(logits, 0), -std::log(0.25), 1e-7);
  const std::vector<float> big{1000.0f, 1000.0f};
  EXPECT_NEAR(token_nll(big, 0), std::log(2.0), 1e-9);
}

class PerplexityModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = std::string(KVLM_MODELS_DIR) + "/default";
    model_ = Model::load(dir).release();
    tokens_ = new std::vector<int32_t>(Tokenizer::from_model_dir(dir).encode(
        "The jury further said in term-end presentments that the City Executive Committee, which had "
        "over-all charge of the election, deserves the praise and thanks of the City of Atlanta for "
        "the manner in which the election was conducted.",
        true));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tokens_;
  }

  // Sum of NLLs of tokens [first, end) given tokens [begin, t), from one forward pass.
  static double reference_nll(int64_t begin, int64_t end, int64_t first) {
    KVSequence seq(model_->kv_pool());
    Batch b;
    b.tokens.assign(tokens_->begin() + begin, tokens_->begin() + end);
    b.seqs = {{&seq, 0, int32_t(end - begin)}};
    for (int64_t t = first; t < end; ++t) b.logit_rows.push_back(int32_t(t - 1 - begin));
    const std::vector<float> logits = model_->forward(b).to_f32_vector();
    const size_t vocab = size_t(model_->config().vocab_size);
    double sum = 0;
    for (int64_t t = first; t < end; ++t)
      sum += token_nll(std::span(logits).subspan(size_t(t - first) * vocab, vocab), (*tokens_)[size_t(t)]);
    return sum;
  }

  static Model* model_;
  static std::vector<int32_t>* tokens_;
};

Model* PerplexityModelTest::model_ = nullptr;
std::vector<int32_t>* PerplexityModelTest::tokens_ = nullptr;

TEST_F(PerplexityModelTest, OneWindowScoresEveryTokenButTheFirst) {
  const int64_t n = int64_t(tokens_->size());
  PerplexityOptions o;
  o.context = 512;
  const auto r = perplexity(*model_, *tokens_, o);
  EXPECT_EQ(r.scored_tokens, n - 1);
  EXPECT_EQ(r.windows, 1);
  EXPECT_NEAR(r.nll_sum, reference_nll(0, n, 1), 1e-6);
  EXPECT_NEAR(r.perplexity(), std::exp(r.nll_sum / double(n - 1)), 1e-9);
  // A trained English model is far better than uniform over its 8192 ids.
  EXPECT_GT(r.perplexity(), 1.0);
  EXPECT_LT(r.perplexity(), 2000.0);
}

TEST_F(PerplexityModelTest, StridedWindowsScoreEachTokenOnceWithItsWindowContext) {
  const int64_t n = int64_t(tokens_->size());
  ASSERT_GT(n, 20);
  PerplexityOptions o;
  o.context = 12;
  o.stride = 5;
  o.prefill_chunk = 4;
  const auto r = perplexity(*model_, *tokens_, o);
  double expected = 0;
  int64_t scored = 0;
  for (const auto& w : perplexity_windows(n, 12, 5)) {
    expected += reference_nll(w.begin, w.end, w.first_scored);
    scored += w.end - w.first_scored;
  }
  EXPECT_EQ(r.scored_tokens, n - 1);
  EXPECT_EQ(scored, n - 1);
  EXPECT_NEAR(r.nll_sum, expected, 1e-6);
}

TEST_F(PerplexityModelTest, ChunkingDoesNotChangeTheResultAndBlocksAreFreed) {
  const int32_t free_before = model_->kv_pool().num_free_blocks();
  PerplexityOptions a, b;
  a.context = b.context = 16;
  a.stride = b.stride = 8;
  b.prefill_chunk = 3;
  EXPECT_EQ(perplexity(*model_, *tokens_, a).nll_sum, perplexity(*model_, *tokens_, b).nll_sum);
  EXPECT_EQ(model_->kv_pool().num_free_blocks(), free_before);
}

TEST_F(PerplexityModelTest, RejectsAContextBeyondTheModel) {
  PerplexityOptions o;
  o.context = int(model_->config().max_position_embeddings) + 1;
  o.stride = 8;
  EXPECT_THROW(perplexity(*model_, *tokens_, o), Error);
}

}  // namespace
}  // namespace kvlm
