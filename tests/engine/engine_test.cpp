// Batch invariance of the engine: every request's tokens, logprob bits, text and finish reason in
// any mix of concurrent requests (batch sizes, prefill chunks, token budgets, thread counts,
// arrival orders, prefix-cache hits) equal its solo run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>

#include "engine_test_util.h"
#include "kvlm/backend/ops.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm {
namespace {

using test::Collector;
using test::Outcome;

constexpr int64_t kPoolBytes = 4 << 20;

struct Mix {
  const char* name;
  int max_batch, prefill_chunk, token_budget, threads;
  bool stagger;
  int64_t prompt_cache_bytes;
};

class EngineInvariance : public ::testing::TestWithParam<Mix> {
 protected:
  static void SetUpTestSuite() {
    model_ = test::load_fixture("llama_untied_bias", kPoolBytes);
    pool_ = test::request_pool();
    for (const auto& r : pool_) solo_.push_back(test::run_solo(model_, r));
  }
  static void TearDownTestSuite() {
    solo_.clear();
    model_.reset();
  }
  static std::shared_ptr<Model> model_;
  static std::vector<GenerationRequest> pool_;
  static std::vector<Outcome> solo_;
};
std::shared_ptr<Model> EngineInvariance::model_;
std::vector<GenerationRequest> EngineInvariance::pool_;
std::vector<Outcome> EngineInvariance::solo_;

TEST_P(EngineInvariance, EveryRequestMatchesItsSoloRunByteForByte) {
  const Mix mix = GetParam();
  ThreadPool threads(mix.threads);
  ops::set_thread_pool(&threads);
  std::vector<size_t> order(pool_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 rng(uint32_t(mix.max_batch * 31 + mix.prefill_chunk));
  std::shuffle(order.begin(), order.end(), rng);

  std::map<size_t, Outcome> got;
  EngineStats stats;
  int peak = 0;
  {
    Engine engine(model_, test::bundled_tokenizer(),
                  {mix.max_batch, mix.prefill_chunk, mix.token_budget, mix.prompt_cache_bytes});
    Collector c;
    for (size_t k = 0; k < order.size(); ++k) {
      engine.submit(pool_[order[k]], c.callback(order[k]));
      // Staggered arrivals join a batch that is already decoding.
      if (mix.stagger && k % 3 == 2) c.wait_events(order[k], 1);
    }
    got = c.wait(order.size());
    stats = engine.stats();
    peak = c.peak_active();
  }
  ops::set_thread_pool(nullptr);
  for (size_t i = 0; i < pool_.size(); ++i)
    test::expect_identical(got.at(i), solo_[i], std::string(mix.name) + " request " + std::to_string(i));
  // The mix really ran requests side by side.
  if (mix.max_batch > 1) {
    EXPECT_GT(peak, 1);
  }
  if (mix.prompt_cache_bytes != 0) {
    EXPECT_GT(stats.prefix_hits, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, EngineInvariance,
    ::testing::Values(Mix{"serial", 1, 512, 2048, 1, false, 0},
                      Mix{"batch3_chunk7", 3, 7, 16, 1, true, 0},
                      Mix{"batch8_chunk1_2threads", 8, 1, 8, 2, false, 0},
                      Mix{"batch8_chunk64_cache", 8, 64, 64, 2, true, -1},
                      Mix{"batch16_chunk5_cache", 16, 5, 40, 1, true, -1},
                      Mix{"batch2_budget2_cache", 2, 3, 2, 2, true, 1 << 20}),
    [](const auto& info) { return std::string(info.param.name); });

// Chunked prefill invariance over whole distributions: with top_logprobs covering the vocabulary,
// every step reports the full log-softmax row, and it must not depend on how the prompt was cut
// (one chunk, chunks of 1, 7 and 64 tokens) or on starting from a prefix-cache hit.
TEST(EngineChunkedPrefill, FullDistributionsAreIdenticalForEveryChunking) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(21);
  GenerationRequest r;
  r.prompt = test::random_tokens(rng, 70);
  r.max_tokens = 4;
  r.ignore_eos = true;
  r.sampling.top_logprobs = model->config().vocab_size;
  const Outcome reference = test::run_solo(model, r, {1, 512, 2048, 0});
  ASSERT_EQ(reference.top.size(), size_t(4 * model->config().vocab_size));
  for (int chunk : {1, 7, 64}) {
    const Outcome chunked = test::run_solo(model, r, {1, chunk, 2048, 0});
    test::expect_identical(chunked, reference, "prefill chunk " + std::to_string(chunk));
  }
  // From a prefix hit: the first 64 tokens (4 blocks) come from the cache.
  const Outcome hit = test::run_after_prefix_donor(model, r);
  EXPECT_EQ(hit.cached_tokens, 64);
  test::expect_identical(hit, reference, "prefix-cache hit");
}

// Client threads submitting concurrently, each pulling its own TokenStream, over a bf16 KV cache
// (the codec rounds K/V when written, so reuse and chunking stay exact there too).
TEST(EngineInvarianceClients, ConcurrentStreamsOverACompressedKvCacheEqualSolo) {
  ModelLoadOptions o;
  o.kv_budget_bytes = kPoolBytes;
  o.kv_quant.quant = "bf16";
  std::shared_ptr<Model> model(
      Model::load(std::string(KVLM_TEST_DATA) + "/models/llama_untied_bias", o).release());
  const auto pool = test::request_pool();
  std::vector<Outcome> solo;
  for (const auto& r : pool) solo.push_back(test::run_solo(model, r));
  Engine engine(model, test::bundled_tokenizer(), {6, 9, 24, -1});
  std::vector<Outcome> got(pool.size());
  std::vector<std::thread> clients;
  for (size_t t = 0; t < 4; ++t)
    clients.emplace_back([&, t] {
      for (size_t i = t; i < pool.size(); i += 4) {
        TokenStream stream(engine, pool[i]);
        while (auto ev = stream.next()) got[i].add(*ev);
      }
    });
  for (auto& c : clients) c.join();
  for (size_t i = 0; i < pool.size(); ++i)
    test::expect_identical(got[i], solo[i], "bf16 KV, client request " + std::to_string(i));
}

// Each supported architecture's fixture: a staggered batch equals the solo runs.
TEST(EngineInvarianceArchitectures, BatchedEqualsSolo) {
  for (const char* arch : {"qwen2_untied", "qwen3_untied", "minicpm_llama",
                           "linear_rope_mistral_swa"}) {
    auto model = test::load_fixture(arch, kPoolBytes);
    auto pool = test::request_pool();
    pool.resize(6);
    std::vector<Outcome> solo;
    for (const auto& r : pool) solo.push_back(test::run_solo(model, r));
    Engine engine(model, test::bundled_tokenizer(), {4, 5, 16, -1});
    Collector c;
    for (size_t i = 0; i < pool.size(); ++i) engine.submit(pool[i], c.callback(i));
    const auto got = c.wait(pool.size());
    for (size_t i = 0; i < pool.size(); ++i)
      test::expect_identical(got.at(i), solo[i], std::string(arch) + " request " + std::to_string(i));
  }
}

// The bundled default model, short prompts of real text.
TEST(EngineInvarianceDefaultModel, BatchedEqualsSolo) {
  ModelLoadOptions o;
  o.kv_budget_bytes = 8 << 20;
  std::shared_ptr<Model> model(Model::load(std::string(KVLM_MODELS_DIR) + "/default", o).release());
  const auto tok = test::bundled_tokenizer();
  std::vector<GenerationRequest> reqs;
  for (const char* text : {"Once upon a time", "The capital of France is", "def add(a, b):"}) {
    GenerationRequest r;
    r.prompt = tok->encode(text, false);
    r.max_tokens = 12;
    r.sampling.temperature = reqs.size() == 1 ? 0.8f : 0.0f;
    r.sampling.seed = 5;
    reqs.push_back(r);
  }
  std::vector<Outcome> solo;
  for (const auto& r : reqs) solo.push_back(test::run_solo(model, r));
  Engine engine(model, tok, {8, 4, 16, -1});
  Collector c;
  for (size_t i = 0; i < reqs.size(); ++i) engine.submit(reqs[i], c.callback(i));
  const auto got = c.wait(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i)
    test::expect_identical(got.at(i), solo[i], "default model request " + std::to_string(i));
}

}  // namespace
}  // namespace kvlm
