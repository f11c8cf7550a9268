// Many clients at once against the real loopback server: 32 concurrent streams each produce the
// bytes of their solo run (the engine's batch invariance, seen through HTTP), and clients that
// hang up mid-stream get their requests cancelled and their KV freed within a step or two.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "server_fixture.h"

namespace kvlm::server {
namespace {

using namespace e2e;

constexpr int kClients = 32;

// Request i: its own prompt; even ones greedy, odd ones sampled with their own seed, so both the
// argmax path and the per-request RNG are checked under batching.
Json streaming_request(int i) {
  std::string prompt = "Story " + std::to_string(i) + ":";
  for (int w = 0; w < i % 5; ++w) prompt += " once upon a time";
  Json extra = {{"stream", true}, {"max_tokens", 12}};
  if (i % 2) extra.update({{"temperature", 0.9}, {"seed", 1000 + i}});
  return chat(prompt, extra);
}

std::string stream_text(httplib::Client& client, const Json& body) {
  auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  if (!res || res->status != 200) return "<failed>";
  return chat_stream_text(res->body);
}

Json get_stats(httplib::Client& client) { return Json::parse(client.Get("/stats")->body); }

TEST_F(ServerTest, ThirtyTwoConcurrentStreamsMatchTheirSoloRuns) {
  EngineOptions eo = default_engine_options();
  eo.max_batch = kClients;
  restart({}, eo);
  std::vector<std::string> solo(kClients);
  for (int i = 0; i < kClients; ++i) solo[i] = stream_text(*client_, streaming_request(i));

  std::vector<std::string> together(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server_->port());
      c.set_read_timeout(120, 0);
      together[i] = stream_text(c, streaming_request(i));
    });
  for (auto& t : clients) t.join();

  for (int i = 0; i < kClients; ++i) {
    EXPECT_NE(solo[i], "<failed>") << "request " << i;
    EXPECT_EQ(together[i], solo[i]) << "request " << i;
  }
  wait_idle();
  const Json stats = get_stats(*client_);
  EXPECT_EQ(stats["batch"]["running"], 0);
  EXPECT_EQ(stats["batch"]["waiting"], 0);
  EXPECT_EQ(stats["memory"]["kv_blocks_free"], stats["memory"]["kv_blocks_total"]);
  EXPECT_EQ(stats["requests"]["total"], 2 * kClients);
}

TEST_F(ServerTest, DisconnectingStreamsAreCancelledAndFreeTheirKv) {
  constexpr int kLeavers = 8;
  constexpr int kMaxTokens = 1000;
  EngineOptions eo = default_engine_options();
  eo.max_batch = kLeavers;
  restart({}, eo);
  std::atomic<int> started{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kLeavers; ++i)
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server_->port());
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/chat/completions";
      req.body = chat("Leaver " + std::to_string(i), {{"stream", true}, {"max_tokens", kMaxTokens},
                                                      {"ignore_eos", true}})
                     .dump();
      req.set_header("Content-Type", "application/json");
      // Hang up once the stream is under way (a few reads in, different for each client).
      int reads = 0;
      req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
        if (reads == 0) ++started;
        return ++reads < 3 + i;
      };
      httplib::Response res;
      httplib::Error err;
      c.send(req, res, err);  // returns once the receiver stops reading: the socket closes
    });
  for (auto& t : clients) t.join();
  ASSERT_EQ(started, kLeavers);
  // Every client has closed its socket. The server notices when a write to it fails (the next
  // token's, or the one after when the first still reached the kernel before the peer's reset
  // came back) and cancels; the engine frees the request's KV at its next step. That is 3 or 4
  // steps after the last hang-up on an idle machine. The bound leaves room for the HTTP threads
  // running late under load, and still fails by hundreds of steps if cancellation is broken
  // (the requests would run on to kMaxTokens).
  const int64_t steps_when_gone = engine_->stats().steps;
  const EngineStats idle = wait_idle();
  EXPECT_EQ(idle.running, 0);
  EXPECT_EQ(idle.kv_blocks_free, idle.kv_blocks_total);
  EXPECT_LE(idle.steps - steps_when_gone, 32);
  EXPECT_LT(idle.generated_tokens_total, int64_t(kLeavers) * kMaxTokens);

  const Json stats = get_stats(*client_);
  EXPECT_EQ(stats["memory"]["kv_blocks_free"], stats["memory"]["kv_blocks_total"]);
  EXPECT_EQ(stats["server"]["active_generations"], 0);
  const std::string metrics = client_->Get("/metrics")->body;
  EXPECT_NE(metrics.find("kvlm_client_disconnects_total 8\n"), std::string::npos) << metrics;
  // And the server keeps serving.
  EXPECT_EQ(post("/v1/chat/completions", chat("Hi", {{"max_tokens", 2}}))->status, 200);
}

}  // namespace
}  // namespace kvlm::server
