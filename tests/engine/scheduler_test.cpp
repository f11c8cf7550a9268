// The scheduler on its own (no model): what each step feeds, admission under the block budget,
// and prefix reuse at admission. Forward passes are simulated by committing the planned tokens.
#include "kvlm/engine/scheduler.h"

#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace kvlm {
namespace {

constexpr int kBlock = 16;

ModelConfig fixture_config() {
  ModelConfig c;
  c.vocab_size = 256;
  c.max_position_embeddings = 128;
  c.eos_token_ids = {2};
  return c;
}

KVPoolConfig pool_config(int blocks) {
  KVPoolConfig c;
  c.n_layers = 1;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  c.block_size = kBlock;
  c.budget_bytes = KVPool::bytes_per_block(c) * blocks;
  return c;
}

class SchedulerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Request> make(int prompt_tokens, int max_tokens, int first_token = 10) {
    GenerationRequest g;
    for (int i = 0; i < prompt_tokens; ++i) g.prompt.push_back(first_token + i);
    g.max_tokens = max_tokens;
    return std::make_unique<Request>(next_id_++, std::move(g), TokenCallback{}, pool_,
                                     *test::bundled_tokenizer(), config_.eos_token_ids, config_);
  }
  // What a forward pass does to the sequences, plus a sampled token for each sampling row.
  void run(const StepPlan& plan) {
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      KVSequence& kv = *plan.seqs[i]->kv;
      kv.reserve_append(plan.batch.seqs[i].n_new);
      kv.commit_append(plan.batch.seqs[i].n_new);
      if (plan.logits_row[i] >= 0) plan.seqs[i]->history.push_back(99);
    }
  }

  ModelConfig config_ = fixture_config();
  KVPool pool_{pool_config(16)};
  RequestId next_id_ = 1;
};

std::vector<int32_t> n_new(const StepPlan& plan) {
  std::vector<int32_t> out;
  for (const auto& s : plan.batch.seqs) out.push_back(s.n_new);
  return out;
}

TEST_F(SchedulerTest, DecodesFirstThenPrefillChunksUnderTheBudget) {
  Scheduler s(pool_, {4, 5, 8, 0}, 128);
  s.enqueue(make(12, 4));
  s.enqueue(make(12, 4));
  s.enqueue(make(3, 4));
  s.admit();
  ASSERT_EQ(s.running().size(), 3u);
  // Budget 8, chunk 5: request 0 gets 5, request 1 the remaining 3, request 2 nothing.
  StepPlan p = s.plan();
  EXPECT_EQ(n_new(p), (std::vector<int32_t>{5, 3}));
  EXPECT_EQ(p.logits_row, (std::vector<int32_t>{-1, -1}));
  EXPECT_TRUE(p.batch.logit_rows.empty());
  EXPECT_EQ(p.batch.tokens.size(), 8u);
  EXPECT_EQ(p.batch.tokens[5], 10);  // request 1's first prompt token
  run(p);
  p = s.plan();  // the same split again: the budget is spent in admission order
  EXPECT_EQ(n_new(p), (std::vector<int32_t>{5, 3}));
  run(p);
  // Request 0 has 2 prompt tokens left and samples; request 1 has 6 left; request 2 gets 1.
  p = s.plan();
  EXPECT_EQ(n_new(p), (std::vector<int32_t>{2, 5, 1}));
  EXPECT_EQ(p.logits_row, (std::vector<int32_t>{0, -1, -1}));
  EXPECT_EQ(p.batch.logit_rows, (std::vector<int32_t>{1}));
  run(p);
  // Request 0 now decodes one token and comes first in the budget.
  p = s.plan();
  EXPECT_EQ(n_new(p), (std::vector<int32_t>{1, 1, 2}));
  EXPECT_EQ(p.logits_row, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(p.batch.logit_rows, (std::vector<int32_t>{0, 1, 3}));
}

TEST_F(SchedulerTest, AdmitsFifoOnlyWhatTheReservedBlocksAllow) {
  Scheduler s(pool_, {8, 512, 2048, 0}, 128);
  s.enqueue(make(30, 34));  // 64 tokens: 4 blocks
  s.enqueue(make(60, 68));  // 128 tokens (the context limit): 8 blocks
  s.enqueue(make(20, 50));  // 70 tokens: 5 blocks, more than the 4 left
  s.enqueue(make(1, 1));    // 1 block: would fit, but waits behind the head
  s.admit();
  EXPECT_EQ(s.running().size(), 2u);
  EXPECT_EQ(s.waiting().size(), 2u);
  EXPECT_EQ(s.available_blocks(), 4);
  // Allocation by the running sequences comes out of their reservations.
  run(s.plan());
  EXPECT_EQ(pool_.num_free_blocks(), 16 - 2 - 4);
  EXPECT_EQ(s.available_blocks(), 4);
  s.admit();
  EXPECT_EQ(s.running().size(), 2u);
  // A request leaving returns its blocks and its unused reservation; the queue moves on.
  s.running()[0]->output.end(FinishReason::kCancelled);
  EXPECT_EQ(s.retire_finished().size(), 1u);
  EXPECT_EQ(pool_.num_free_blocks(), 16 - 4);
  s.admit();
  EXPECT_EQ(s.running().size(), 3u);
  EXPECT_TRUE(s.waiting().empty());
  EXPECT_EQ(s.available_blocks(), 12 - 4 - 5 - 1);
}

TEST_F(SchedulerTest, MaxBatchLimitsTheRunningSet) {
  Scheduler s(pool_, {2, 512, 2048, 0}, 128);
  for (int i = 0; i < 4; ++i) s.enqueue(make(4, 4));
  s.admit();
  EXPECT_EQ(s.running().size(), 2u);
  EXPECT_EQ(s.waiting().size(), 2u);
}

TEST_F(SchedulerTest, ReusesPublishedPromptBlocksAtAdmission) {
  Scheduler s(pool_, {4, 512, 2048, -1}, 128);
  s.enqueue(make(40, 8));
  s.admit();
  StepPlan p = s.plan();
  run(p);
  s.publish_prompts(p);
  EXPECT_EQ(s.prefix_cache().num_blocks(), 2);
  s.enqueue(make(40, 8));
  s.admit();
  ASSERT_EQ(s.running().size(), 2u);
  const Request& second = *s.running()[1];
  EXPECT_EQ(second.cached_tokens, 32);
  EXPECT_EQ(second.kv->length(), 32);
  EXPECT_EQ(second.kv->blocks()[0], s.running()[0]->kv->blocks()[0]);
  EXPECT_EQ(second.reserved_blocks, 3 - 2);
  EXPECT_EQ(s.prefix_stats().hits, 1);
  EXPECT_EQ(s.prefix_stats().misses, 1);
  // The second request prefills only its last 8 prompt tokens.
  p = s.plan();
  EXPECT_EQ(n_new(p), (std::vector<int32_t>{1, 8}));
}

TEST_F(SchedulerTest, RejectsInconsistentOptions) {
  EXPECT_THROW(Scheduler(pool_, {0, 512, 2048, 0}, 128), Error);
  EXPECT_THROW(Scheduler(pool_, {4, 0, 2048, 0}, 128), Error);
  EXPECT_THROW(Scheduler(pool_, {8, 512, 4, 0}, 128), Error);
}

}  // namespace
}  // namespace kvlm
