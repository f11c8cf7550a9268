#pragma once
// Shared helpers of the engine tests: loading a fixture model with the bundled tokenizer, running
// requests through an Engine and collecting what each one emitted, and byte-wise comparison.
#include <gtest/gtest.h>

#include <condition_variable>
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "kvlm/engine/engine.h"

namespace kvlm::test {

// The fixtures carry no tokenizer; their 256 ids are the bundled tokenizer's first 256 pieces.
inline std::shared_ptr<const Tokenizer> bundled_tokenizer() {
  static const auto tok =
      std::make_shared<const Tokenizer>(Tokenizer::from_model_dir(std::string(KVLM_MODELS_DIR) + "/default"));
  return tok;
}

inline std::shared_ptr<Model> load_fixture(const std::string& name, int64_t kv_budget_bytes,
                                           int block_size = 16) {
  ModelLoadOptions o;
  o.kv_budget_bytes = kv_budget_bytes;
  o.kv_block_size = block_size;
  return std::shared_ptr<Model>(
      Model::load(std::string(KVLM_TEST_DATA) + "/models/" + name, o).release());
}

// Everything one request emitted.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<TokenLogprob> top;  // all steps' top_logprobs, concatenated
  std::string text;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  int events = 0;
  int32_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  bool done = false;

  void add(const TokenEvent& ev) {
    ++events;
    if (ev.token >= 0) {
      tokens.push_back(ev.token);
      logprobs.push_back(ev.logprob);
      top.insert(top.end(), ev.top_logprobs.begin(), ev.top_logprobs.end());
    }
    text += ev.text;
    if (ev.finished) {
      done = true;
      reason = ev.reason;
      error = ev.error;
      prompt_tokens = ev.prompt_tokens;
      cached_tokens = ev.cached_tokens;
      completion_tokens = ev.completion_tokens;
    }
  }
};

// Byte equality of two outcomes: ids, logprob bits, top-logprob bits, text and finish reason.
inline void expect_identical(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * sizeof(float)))
      << what << ": logprobs differ in their bits";
  ASSERT_EQ(a.top.size(), b.top.size()) << what;
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].token, b.top[i].token) << what << " top " << i;
    EXPECT_EQ(0, std::memcmp(&a.top[i].logprob, &b.top[i].logprob, sizeof(float))) << what << " top " << i;
  }
  EXPECT_EQ(a.text, b.text) << what;
  EXPECT_EQ(a.reason, b.reason) << what;
}

// Collects the outcomes of requests submitted to one engine and waits for all of them.
class Collector {
 public:
  TokenCallback callback(size_t index) {
    return [this, index](const TokenEvent& ev) {
      std::lock_guard<std::mutex> lock(mu_);
      Outcome& o = outcomes_[index];
      if (o.events == 0) ++active_;
      peak_active_ = std::max(peak_active_, active_);
      if (ev.finished) --active_;
      o.add(ev);
      progress_.notify_all();
      if (ev.finished) done_.notify_all();
    };
  }
  // Blocks until `n` requests have finished (each index must have been used once).
  std::map<size_t, Outcome> wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] {
      size_t finished = 0;
      for (const auto& [i, o] : outcomes_) finished += o.done ? 1 : 0;
      return finished == n;
    });
    return outcomes_;
  }
  // The most requests that were streaming at the same time (between first and final event).
  int peak_active() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_active_;
  }
  // Blocks until request `index` has received at least `n` events.
  void wait_events(size_t index, int n) {
    std::unique_lock<std::mutex> lock(mu_);
    progress_.wait(lock, [&] { return outcomes_[index].events >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable done_, progress_;
  std::map<size_t, Outcome> outcomes_;
  int active_ = 0, peak_active_ = 0;
};

inline std::vector<int32_t> random_tokens(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int32_t> id(3, 255);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = id(rng);
  return t;
}

// Requests of different prompt lengths (within and across block boundaries), sampling settings
// and token limits. Two pairs share long prefixes so that the prefix cache has something to hit.
inline std::vector<GenerationRequest> request_pool() {
  std::mt19937 rng(1234);
  const int prompt_lengths[] = {1, 3, 7, 16, 17, 31, 40, 5, 12, 33};
  const int max_tokens[] = {12, 20, 8, 30, 15, 9, 25, 18, 6, 14};
  std::vector<GenerationRequest> pool;
  for (int i = 0; i < 10; ++i) {
    GenerationRequest r;
    r.prompt = random_tokens(rng, prompt_lengths[i]);
    r.max_tokens = max_tokens[i];
    r.ignore_eos = i % 3 == 0;
    SamplerParams& s = r.sampling;
    s.seed = uint64_t(100 + i);
    switch (i % 5) {
      case 0: break;  // greedy
      case 1: s.temperature = 0.9f; break;
      case 2: s.temperature = 0.7f; s.top_p = 0.9f; s.top_k = 40; s.top_logprobs = 3; break;
      case 3: s.temperature = 1.2f; s.min_p = 0.05f; s.repetition_penalty = 1.3f; break;
      case 4: s.temperature = 0.5f; s.presence_penalty = 0.5f; s.frequency_penalty = 0.2f;
              s.top_logprobs = 2; break;
    }
    pool.push_back(std::move(r));
  }
  // Shared prefixes: request 10 extends request 6's prompt; request 11 shares request 9's first
  // 32 tokens and then diverges.
  GenerationRequest a = pool[6];
  a.prompt.insert(a.prompt.end(), {7, 8, 9, 10, 11});
  a.sampling.seed = 77;
  pool.push_back(a);
  GenerationRequest b = pool[9];
  b.prompt.resize(32);
  b.prompt.push_back(200);
  b.sampling.temperature = 0.8f;
  pool.push_back(b);
  return pool;
}

// Runs one request alone in a fresh single-sequence engine.
inline Outcome run_solo(const std::shared_ptr<Model>& model, const GenerationRequest& req,
                        EngineOptions opts = {}) {
  opts.max_batch = 1;
  opts.prompt_cache_bytes = 0;
  Engine engine(model, bundled_tokenizer(), opts);
  Collector c;
  engine.submit(req, c.callback(0));
  return c.wait(1).at(0);
}

// Runs `req` (a prompt of more than 64 tokens) in an engine whose prefix cache already holds its
// first 64 tokens, left there by a donor request with the same first 65 tokens.
inline Outcome run_after_prefix_donor(const std::shared_ptr<Model>& model, const GenerationRequest& req) {
  Engine engine(model, bundled_tokenizer(), {1, 512, 2048, -1});
  Collector c;
  GenerationRequest donor = req;
  donor.prompt.resize(65);
  donor.max_tokens = 1;
  engine.submit(donor, c.callback(0));
  c.wait(1);
  engine.submit(req, c.callback(1));
  return c.wait(2).at(1);
}

}  // namespace kvlm::test
