// Batch invariance and prefix caching over compressed KV caches: with every codec, a request's
// tokens and logprob bits in any mix (batching, chunked prefill, thread counts, prefix-cache hits)
// equal its solo run. Compressed blocks join, leave, are shared and handed to the prefix cache
// exactly like f32 blocks. The fixtures' head_dim is 16, too small for TurboQuant and the
// affine groups, so these tests write a tiny random model with head_dim 64.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <random>

#include "engine_test_util.h"
#include "kvlm/backend/ops.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/bench.h"

namespace kvlm {
namespace {

using test::Collector;
using test::Outcome;

// hidden 256 over 4 heads: head_dim 64; 2 kv heads (GQA group 2); vocab 256 (the fixtures' ids).
constexpr SyntheticShape kShape = {"tiny_hd64", 256, 2, 4, 2, 512, 256};

const std::string& model_dir() {
  static const std::string dir = [] {
    const std::string d = (std::filesystem::temp_directory_path() /
                           ("kvlm_kv_codec_model_" + std::to_string(::getpid())))
                              .string();
    return write_synthetic_model(kShape, d, 0);
  }();
  return dir;
}

std::shared_ptr<Model> load(const std::string& kv_quant) {
  ModelLoadOptions o;
  o.kv_budget_bytes = 4 << 20;
  o.kv_quant.quant = kv_quant;
  return std::shared_ptr<Model>(Model::load(model_dir(), o).release());
}

class EngineKVCodec : public ::testing::TestWithParam<const char*> {
 protected:
  static void TearDownTestSuite() { std::filesystem::remove_all(model_dir()); }
};

TEST_P(EngineKVCodec, MixedBatchWithPrefixCacheEqualsSoloRuns) {
  const auto model = load(GetParam());
  const auto pool = test::request_pool();
  std::vector<Outcome> solo;
  for (const auto& r : pool) solo.push_back(test::run_solo(model, r));
  ThreadPool threads(2);
  ops::set_thread_pool(&threads);
  std::map<size_t, Outcome> got;
  EngineStats stats;
  {
    Engine engine(model, test::bundled_tokenizer(), {8, 7, 24, -1});
    Collector c;
    for (size_t k = 0; k < pool.size(); ++k) {
      engine.submit(pool[k], c.callback(k));
      if (k % 3 == 2) c.wait_events(k, 1);  // later requests join a decoding batch
    }
    c.wait(pool.size());
    // Once every request has finished, the last two (which share long prefixes with requests 6
    // and 9) run again and must start from the blocks those left in the prefix cache.
    engine.submit(pool[10], c.callback(pool.size()));
    engine.submit(pool[11], c.callback(pool.size() + 1));
    got = c.wait(pool.size() + 2);
    stats = engine.stats();
  }
  ops::set_thread_pool(nullptr);
  for (size_t i = 0; i < pool.size(); ++i)
    test::expect_identical(got.at(i), solo[i], std::string(GetParam()) + " request " + std::to_string(i));
  for (size_t i : {size_t(10), size_t(11)}) {
    const Outcome& again = got.at(pool.size() + i - 10);
    EXPECT_GE(again.cached_tokens, 32) << GetParam() << " request " << i;
    test::expect_identical(again, solo[i], std::string(GetParam()) + " request " + std::to_string(i) + " from the prefix cache");
  }
  EXPECT_GE(stats.prefix_hits, 2) << GetParam();
}

// Whole distributions (top_logprobs over the vocabulary) do not depend on the prefill chunking or
// on starting from a prefix-cache hit, whose blocks were written by another request.
TEST_P(EngineKVCodec, ChunkedPrefillAndPrefixHitEqualOneShotPrefill) {
  const auto model = load(GetParam());
  std::mt19937 rng(21);
  GenerationRequest r;
  r.prompt = test::random_tokens(rng, 70);
  r.max_tokens = 4;
  r.ignore_eos = true;
  r.sampling.top_logprobs = model->config().vocab_size;
  const Outcome reference = test::run_solo(model, r, {1, 512, 2048, 0});
  ASSERT_EQ(reference.top.size(), size_t(4 * model->config().vocab_size));
  for (int chunk : {1, 7}) {
    const Outcome chunked = test::run_solo(model, r, {1, chunk, 2048, 0});
    test::expect_identical(chunked, reference, std::string(GetParam()) + " chunk " + std::to_string(chunk));
  }
  const Outcome hit = test::run_after_prefix_donor(model, r);
  EXPECT_EQ(hit.cached_tokens, 64);
  test::expect_identical(hit, reference, std::string(GetParam()) + " prefix-cache hit");
}

INSTANTIATE_TEST_SUITE_P(Codecs, EngineKVCodec,
                         ::testing::Values("bf16", "8", "4", "3", "turbo:k8v8", "turbo:k8v3",
                                           "turbo:k4v2", "turbo:k5v5:gaussian"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return "kv_" + name;
                         });

TEST(EngineKVCodecLoad, UnsupportedHeadDimRefusesWithTheCodecsMessage) {
  ModelLoadOptions o;
  o.kv_quant.quant = "turbo";
  try {
    Model::load(std::string(KVLM_TEST_DATA) + "/models/llama_tied", o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "KV codec turbo:k8v3: TurboQuant does not support head_dim=16 "
                           "(supported: 64, 128, 256, 512)");
  }
}

}  // namespace
}  // namespace kvlm
