// Row lifecycle, memory and failure containment: cancellation frees blocks, a throwing callback
// or a failed step ends only its own requests, requests that can never fit are refused with the
// numbers, a tiny pool makes requests wait instead of fail, prefix-cache hits are exact, and stop
// conditions end requests with the right reason and never leak a stop string.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "engine_test_util.h"

namespace kvlm {
namespace {

using test::Collector;
using test::Outcome;

constexpr int64_t kPoolBytes = 4 << 20;

GenerationRequest greedy(std::vector<int32_t> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

// Waits (bounded) until the engine's published stats satisfy `pred`.
template <class Pred>
EngineStats wait_stats(const Engine& engine, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  EngineStats s = engine.stats();
  while (!pred(s) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = engine.stats();
  }
  return s;
}

TEST(EngineLifecycle, CancelMidPrefillAndMidDecodeFreesEveryBlock) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  Engine engine(model, test::bundled_tokenizer(), {4, 4, 8, 0});
  const int32_t free_at_start = engine.stats().kv_blocks_free;
  std::mt19937 rng(9);
  Collector c;
  // Request 0 decodes; at its 3rd token request 1 (100 prompt tokens, 4 per step) is still
  // prefilling, and both are cancelled from inside the callback. The ids reach the callback
  // through a future, since events may start before submit() returns.
  std::promise<std::pair<RequestId, RequestId>> ids;
  std::shared_future<std::pair<RequestId, RequestId>> ids_ready = ids.get_future().share();
  auto record = c.callback(0);
  int seen = 0;
  const RequestId decoding = engine.submit(greedy(test::random_tokens(rng, 20), 100), [&](const TokenEvent& ev) {
    record(ev);
    if (++seen == 3) {
      engine.cancel(ids_ready.get().second);
      engine.cancel(ids_ready.get().first);
    }
  });
  const RequestId prefilling = engine.submit(greedy(test::random_tokens(rng, 100), 10), c.callback(1));
  ids.set_value({decoding, prefilling});
  const auto got = c.wait(2);
  EXPECT_EQ(got.at(0).reason, FinishReason::kCancelled);
  EXPECT_GE(got.at(0).tokens.size(), 3u);
  EXPECT_LT(got.at(0).tokens.size(), 100u);
  EXPECT_EQ(got.at(1).reason, FinishReason::kCancelled);
  EXPECT_TRUE(got.at(1).tokens.empty());
  const EngineStats s = wait_stats(engine, [](const EngineStats& s) { return s.running == 0; });
  EXPECT_EQ(s.kv_blocks_free, free_at_start);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST(EngineLifecycle, CancelWhileWaitingAndUnknownIds) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  Engine engine(model, test::bundled_tokenizer(), {1, 512, 2048, 0});
  std::mt19937 rng(3);
  Collector c;
  // The first request is cancelled from inside its own callback at its 2nd event: cancelled from
  // the test thread, a fast enough engine finished all 60 tokens first. The callback waits for its
  // id, which arrives only after the second request has been cancelled while still queued.
  std::promise<RequestId> first_id;
  std::shared_future<RequestId> first_ready = first_id.get_future().share();
  auto record = c.callback(0);
  int seen = 0;
  const RequestId first = engine.submit(greedy(test::random_tokens(rng, 8), 60), [&](const TokenEvent& ev) {
    record(ev);
    if (++seen == 2) engine.cancel(first_ready.get());
  });
  const RequestId second = engine.submit(greedy(test::random_tokens(rng, 8), 5), c.callback(1));
  engine.cancel(second);  // still queued behind the first (max_batch 1)
  engine.cancel(987654);  // never issued: ignored
  first_id.set_value(first);
  const auto got = c.wait(2);
  EXPECT_EQ(got.at(1).reason, FinishReason::kCancelled);
  EXPECT_EQ(got.at(1).events, 1);
  EXPECT_EQ(got.at(0).reason, FinishReason::kCancelled);
}

TEST(EngineLifecycle, ThrowingCallbackEndsOnlyItsRequest) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(4);
  const GenerationRequest a = greedy(test::random_tokens(rng, 9), 12);
  const GenerationRequest b = greedy(test::random_tokens(rng, 14), 12);
  const Outcome solo_b = test::run_solo(model, b);
  Engine engine(model, test::bundled_tokenizer(), {4, 512, 2048, 0});
  Collector c;
  auto record = c.callback(0);
  engine.submit(a, [&](const TokenEvent& ev) {
    record(ev);
    if (!ev.finished && ev.token >= 0) throw std::runtime_error("client went away");
  });
  engine.submit(b, c.callback(1));
  const auto got = c.wait(2);
  EXPECT_EQ(got.at(0).reason, FinishReason::kError);
  EXPECT_EQ(got.at(0).tokens.size(), 1u);
  EXPECT_NE(got.at(0).error.find("client went away"), std::string::npos) << got.at(0).error;
  test::expect_identical(got.at(1), solo_b, "the sibling of a failed request");
  const EngineStats s = wait_stats(engine, [](const EngineStats& s) { return s.running == 0; });
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST(EngineLifecycle, FailedStepFailsItsRequestsAndTheEngineGoesOn) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(5);
  const GenerationRequest failing = greedy(test::random_tokens(rng, 14), 20);
  const GenerationRequest later = greedy(test::random_tokens(rng, 6), 5);
  const Outcome solo_later = test::run_solo(model, later);  // before the engine: one per model
  Engine engine(model, test::bundled_tokenizer(), {4, 512, 2048, 0});
  Collector c;
  // The callback (on the engine thread) takes every free block behind the scheduler's back, so
  // the next step cannot grow the sequence past its first block: the model throws, the request
  // fails, and the hog is released with the final event.
  auto hog = std::make_unique<KVSequence>(model->kv_pool());
  auto record = c.callback(0);
  engine.submit(failing, [&](const TokenEvent& ev) {
    record(ev);
    if (ev.finished) hog->clear();
    else if (hog->length() == 0) {
      const int32_t free_tokens = model->kv_pool().num_free_blocks() * model->kv_pool().block_size();
      hog->reserve_append(free_tokens);
      hog->commit_append(free_tokens);
    }
  });
  const auto failed = c.wait(1);
  EXPECT_EQ(failed.at(0).reason, FinishReason::kError);
  EXPECT_FALSE(failed.at(0).error.empty());
  engine.submit(later, c.callback(1));
  const auto got = c.wait(2);
  test::expect_identical(got.at(1), solo_later, "a request after a failed step");
  const EngineStats s = wait_stats(engine, [](const EngineStats& s) { return s.running == 0; });
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST(EngineMemory, RefusesWhatCanNeverFitWithTheNumbers) {
  // 4 blocks of 16 tokens at 512 bytes per token (2 layers x K,V x 2 heads x 16 x f32).
  auto model = test::load_fixture("llama_untied_bias", 4 * 16 * 512);
  Engine engine(model, test::bundled_tokenizer());
  ASSERT_EQ(engine.stats().kv_blocks_total, 4);
  GenerationRequest r = greedy(std::vector<int32_t>(10, 5), 100);
  try {
    engine.submit(r, {});
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "the request can never fit the KV cache: it needs room for 110 tokens (prompt 10 "
                 "+ max_tokens 100, context limit 128), but the KV pool holds 64 tokens (4 blocks "
                 "of 16)");
  }
  // Capped at the context limit of 128: still too large for 64 tokens.
  r.max_tokens = 1000;
  EXPECT_THROW(engine.submit(r, {}), Error);
  r.max_tokens = 54;  // exactly 64 tokens: fits
  Collector c;
  engine.submit(r, c.callback(0));
  EXPECT_EQ(c.wait(1).at(0).reason, FinishReason::kLength);
  // Invalid requests are refused too.
  EXPECT_THROW(engine.submit(greedy({}, 5), {}), Error);
  EXPECT_THROW(engine.submit(greedy({300}, 5), {}), Error);
  EXPECT_THROW(engine.submit(greedy({1}, 0), {}), Error);
  EXPECT_THROW(engine.submit(greedy(std::vector<int32_t>(128, 5), 1), {}), Error);
}

TEST(EngineMemory, ManyRequestsThroughATinyPoolAllComplete) {
  // 4 blocks; each request (8 prompt + 8 new tokens) reserves one block, so at most 4 run at once
  // even though max_batch is 8; the rest wait and none fails.
  auto model = test::load_fixture("llama_untied_bias", 4 * 16 * 512);
  std::mt19937 rng(6);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 200; ++i) {
    GenerationRequest r = greedy(test::random_tokens(rng, 8), 8);
    r.sampling.temperature = 0.7f;
    r.sampling.seed = uint64_t(i);
    reqs.push_back(r);
  }
  std::map<size_t, Outcome> solo;  // computed before the engine starts: one engine per model
  for (size_t i : {0u, 57u, 199u}) solo[i] = test::run_solo(model, reqs[i]);
  Engine engine(model, test::bundled_tokenizer(), {8, 512, 2048, 0});
  std::mutex mu;
  int active = 0, most_active = 0;
  Collector c;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto record = c.callback(i);
    engine.submit(reqs[i], [&, record, started = false](const TokenEvent& ev) mutable {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!started) ++active;
        started = true;
        most_active = std::max(most_active, active);
        if (ev.finished) --active;
      }
      record(ev);
    });
  }
  const auto got = c.wait(reqs.size());
  EXPECT_LE(most_active, 4);
  EXPECT_GE(most_active, 2);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got.at(i).reason, FinishReason::kLength) << i;
  for (size_t i : {0u, 57u, 199u})
    test::expect_identical(got.at(i), solo.at(i), "tiny pool request " + std::to_string(i));
  const EngineStats s = wait_stats(engine, [](const EngineStats& s) { return s.running == 0; });
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  EXPECT_EQ(s.requests_total, 200);
  EXPECT_EQ(s.generated_tokens_total, 200 * 8);
}

TEST(EngineMemory, RandomCancelsUnderLoadLoseNoBlocks) {
  // A pool of 8 blocks, a prefix cache that competes for it, requests of many sizes (some sharing
  // prefixes) and cancels fired from another thread at arbitrary moments: every request ends with
  // one final event, nothing is over-allocated, and at the end every block is either free or
  // held by the prefix cache alone.
  auto model = test::load_fixture("llama_untied_bias", 8 * 16 * 512);
  Engine engine(model, test::bundled_tokenizer(), {5, 6, 12, 3 * 16 * 512});
  std::mt19937 rng(15);
  const std::vector<int32_t> common = test::random_tokens(rng, 20);
  Collector c;
  std::vector<RequestId> ids;
  const size_t n = 60;
  for (size_t i = 0; i < n; ++i) {
    GenerationRequest r;
    r.prompt = i % 2 == 0 ? common : test::random_tokens(rng, 1 + int(rng() % 40));
    r.prompt.push_back(int32_t(3 + i % 200));
    r.max_tokens = 1 + int(rng() % 60);
    r.sampling.temperature = 0.8f;
    r.sampling.seed = i;
    ids.push_back(engine.submit(r, c.callback(i)));
  }
  std::thread canceller([&] {
    std::mt19937 pick(16);
    for (int k = 0; k < 25; ++k) {
      std::this_thread::sleep_for(std::chrono::microseconds(pick() % 3000));
      engine.cancel(ids[pick() % ids.size()]);
    }
  });
  const auto got = c.wait(n);
  canceller.join();
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NE(got.at(i).reason, FinishReason::kError) << i << ": " << got.at(i).error;
    EXPECT_LE(got.at(i).tokens.size(), 60u);
  }
  const EngineStats s = wait_stats(engine, [](const EngineStats& s) { return s.running == 0 && s.waiting == 0; });
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total - s.prefix_cache_bytes / (16 * 512));
  EXPECT_LE(s.prefix_cache_bytes, 3 * 16 * 512);
}

TEST(EnginePrefixCache, HitsAreCountedAndBitIdenticalToAColdRun) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(7);
  const std::vector<int32_t> shared = test::random_tokens(rng, 40);  // 2 whole blocks + 8
  GenerationRequest first = greedy(shared, 10);
  first.prompt.push_back(11);
  GenerationRequest second = greedy(shared, 10);
  second.prompt.insert(second.prompt.end(), {12, 13, 14});
  second.sampling.temperature = 0.9f;
  second.sampling.seed = 3;
  second.sampling.top_logprobs = 4;
  const Outcome cold = test::run_solo(model, second);

  Engine engine(model, test::bundled_tokenizer(), {4, 512, 2048, -1});
  Collector c;
  engine.submit(first, c.callback(0));
  c.wait(1);
  engine.submit(second, c.callback(1));
  const auto got = c.wait(2);
  test::expect_identical(got.at(1), cold, "prefix hit vs cold run");
  EXPECT_EQ(got.at(0).cached_tokens, 0);
  EXPECT_EQ(got.at(1).cached_tokens, 32);
  EXPECT_EQ(got.at(1).prompt_tokens, 43);
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.prefix_hits, 1);
  EXPECT_EQ(s.prefix_misses, 1);
  EXPECT_EQ(s.prefix_cached_tokens, 32);
  EXPECT_GT(s.prefix_cache_bytes, 0);
  // The same prompt again reuses at most prompt length - 1 tokens, rounded down to whole blocks:
  // a 32-token prompt reuses one block, not two.
  GenerationRequest exact = greedy(std::vector<int32_t>(shared.begin(), shared.begin() + 32), 4);
  engine.submit(exact, c.callback(2));
  EXPECT_EQ(c.wait(3).at(2).cached_tokens, 16);
}

TEST(EnginePrefixCache, SharesAPromptWithARequestStillRunning) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(8);
  const std::vector<int32_t> prompt = test::random_tokens(rng, 35);
  GenerationRequest a = greedy(prompt, 40);
  GenerationRequest b = greedy(prompt, 6);
  b.sampling.temperature = 1.0f;
  const Outcome cold_b = test::run_solo(model, b);
  Engine engine(model, test::bundled_tokenizer(), {4, 512, 2048, -1});
  Collector c;
  engine.submit(a, c.callback(0));
  c.wait_events(0, 1);  // a's prompt is fully prefilled and published
  engine.submit(b, c.callback(1));
  const auto got = c.wait(2);
  EXPECT_EQ(got.at(1).cached_tokens, 32);
  test::expect_identical(got.at(1), cold_b, "prefix shared with a running request");
}

TEST(EnginePrefixCache, EvictsUnderASmallBudgetAndWhenAdmissionNeedsBlocks) {
  // Budget of 2 blocks (8 KiB each): the third distinct prompt pushes out the first.
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  const int64_t block_bytes = 16 * 512;
  Engine engine(model, test::bundled_tokenizer(), {4, 512, 2048, 2 * block_bytes});
  std::mt19937 rng(10);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back(greedy(test::random_tokens(rng, 17), 2));
  Collector c;
  for (size_t i = 0; i < 3; ++i) {
    engine.submit(reqs[i], c.callback(i));
    c.wait(i + 1);
  }
  EXPECT_LE(engine.stats().prefix_cache_bytes, 2 * block_bytes);
  engine.submit(reqs[0], c.callback(3));
  EXPECT_EQ(c.wait(4).at(3).cached_tokens, 0);  // evicted
  engine.submit(reqs[2], c.callback(4));
  EXPECT_EQ(c.wait(5).at(4).cached_tokens, 16);  // still there

  // A pool of 4 blocks with the cache allowed to fill it: admission evicts what it needs.
  auto small = test::load_fixture("llama_untied_bias", 4 * 16 * 512);
  Engine tight(small, test::bundled_tokenizer(), {4, 512, 2048, 4 * block_bytes});
  Collector t;
  tight.submit(greedy(test::random_tokens(rng, 40), 20), t.callback(0));  // 60 tokens: 4 blocks
  t.wait(1);
  EXPECT_GT(tight.stats().prefix_cache_bytes, 0);
  tight.submit(greedy(test::random_tokens(rng, 40), 20), t.callback(1));
  EXPECT_EQ(t.wait(2).at(1).reason, FinishReason::kLength);
}

TEST(EngineStop, StopStringsEndTheRequestAndNeverLeak) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(11);
  GenerationRequest r = greedy(test::random_tokens(rng, 6), 40);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 42;
  const Outcome full = test::run_solo(model, r);
  ASSERT_GE(full.text.size(), 12u) << "the fixture should produce some text";
  // A stop string taken from the middle of the unconstrained text.
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  r.stop = {stop, "never appears \x01\x02"};
  const Outcome stopped = test::run_solo(model, r);
  EXPECT_EQ(stopped.reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(stopped.text.find(stop), std::string::npos);
  EXPECT_LT(stopped.tokens.size(), full.tokens.size());
  // Every emitted token of the stopped run is a prefix of the full run's.
  EXPECT_TRUE(std::equal(stopped.tokens.begin(), stopped.tokens.end(), full.tokens.begin()));
}

TEST(EngineStop, StopTokenIdsEosAndLength) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(12);
  GenerationRequest r = greedy(test::random_tokens(rng, 6), 12);
  const Outcome full = test::run_solo(model, r);
  EXPECT_EQ(full.reason, FinishReason::kLength);
  EXPECT_EQ(full.tokens.size(), 12u);
  EXPECT_EQ(full.completion_tokens, 12);
  EXPECT_EQ(full.prompt_tokens, 6);
  // An extra stop id ends the request where it is sampled; the id itself is not emitted.
  r.stop_token_ids = {full.tokens[4]};
  const size_t first = size_t(std::find(full.tokens.begin(), full.tokens.end(), full.tokens[4]) - full.tokens.begin());
  const Outcome stopped = test::run_solo(model, r);
  EXPECT_EQ(stopped.reason, FinishReason::kStop);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + long(first)));
  EXPECT_EQ(stopped.completion_tokens, int32_t(first));
  // max_tokens 1 ends after exactly one token.
  r.stop_token_ids.clear();
  r.max_tokens = 1;
  const Outcome one = test::run_solo(model, r);
  EXPECT_EQ(one.tokens.size(), 1u);
  EXPECT_EQ(one.reason, FinishReason::kLength);
}

TEST(EngineStream, TokenStreamDeliversEverythingThenNullopt) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(13);
  const GenerationRequest r = greedy(test::random_tokens(rng, 5), 7);
  const Outcome solo = test::run_solo(model, r);
  Engine engine(model, test::bundled_tokenizer());
  Outcome streamed;
  {
    TokenStream stream(engine, r);
    while (auto ev = stream.next()) streamed.add(*ev);
    EXPECT_FALSE(stream.next().has_value());
  }
  test::expect_identical(streamed, solo, "TokenStream");
  // A stream dropped early cancels its request and frees its blocks.
  {
    TokenStream stream(engine, greedy(test::random_tokens(rng, 5), 100));
    ASSERT_TRUE(stream.next().has_value());
  }
  const EngineStats s = wait_stats(engine, [](const EngineStats& s) { return s.running == 0 && s.waiting == 0; });
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total - s.prefix_cache_bytes / (16 * 512));
}

// A callback that takes a millisecond per event: a request then outlasts any scheduling delay of
// the test thread between two of its calls.
TokenCallback slowly(TokenCallback inner) {
  return [inner](const TokenEvent& ev) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    inner(ev);
  };
}

TEST(EngineShutdown, FinishRunningOrCancel) {
  auto model = test::load_fixture("llama_untied_bias", kPoolBytes);
  std::mt19937 rng(14);
  Collector c;
  {
    Engine engine(model, test::bundled_tokenizer(), {1, 512, 2048, 0});
    // 100 tokens at a millisecond each (the callback runs on the engine thread), so that the
    // running request cannot finish (and admit the waiting one) between its first token and the
    // shutdown call, however fast the engine and however late this thread runs.
    engine.submit(greedy(test::random_tokens(rng, 5), 100), slowly(c.callback(0)));
    engine.submit(greedy(test::random_tokens(rng, 5), 30), c.callback(1));  // waits: max_batch 1
    c.wait_events(0, 1);
    engine.shutdown(true);
    EXPECT_THROW(engine.submit(greedy({1, 2}, 3), {}), Error);
    engine.shutdown(true);  // idempotent
  }
  auto got = c.wait(2);
  EXPECT_EQ(got.at(0).reason, FinishReason::kLength);
  EXPECT_EQ(got.at(0).tokens.size(), 100u);
  EXPECT_EQ(got.at(1).reason, FinishReason::kCancelled);
  Collector d;
  {
    Engine engine(model, test::bundled_tokenizer(), {2, 512, 2048, 0});
    engine.submit(greedy(test::random_tokens(rng, 5), 100), slowly(d.callback(0)));
    d.wait_events(0, 1);
  }  // the destructor cancels
  EXPECT_EQ(d.wait(1).at(0).reason, FinishReason::kCancelled);
}

}  // namespace
}  // namespace kvlm
