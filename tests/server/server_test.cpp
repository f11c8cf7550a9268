// The server end to end: a real listener on a loopback port, the bundled default model, and
// httplib's client. Covers the endpoints, SSE streaming, errors, and the client disconnect path.
#include "kvlm/base/error.h"
#include "server_fixture.h"

namespace kvlm::server {
namespace {

using namespace e2e;

TEST_F(ServerTest, HealthBodyIsExact) {
  auto res = client_->Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, R"({"status": "ok"})");
}

TEST_F(ServerTest, UnknownRouteIs404Json) {
  auto res = client_->Get("/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(Json::parse(res->body)["error"]["message"], "not found");
}

TEST_F(ServerTest, Models) {
  auto res = client_->Get("/v1/models");
  ASSERT_TRUE(res);
  const Json j = Json::parse(res->body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "default");
  EXPECT_EQ(j["data"][0]["context_window"], 2048);
  EXPECT_EQ(Json::parse(client_->Get("/v1/models/default")->body)["id"], "default");
  auto missing = client_->Get("/v1/models/other");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Json::parse(missing->body)["error"]["code"], "model_not_found");
}

TEST_F(ServerTest, ChatStreamMatchesNonStreamAtTemperatureZero) {
  auto whole = post("/v1/chat/completions", chat("Once upon a time"));
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const Json j = Json::parse(whole->body);
  const std::string content = j["choices"][0]["message"]["content"];
  EXPECT_FALSE(content.empty());
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), 24);
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"].contains("cached_tokens"));

  auto streamed = post("/v1/chat/completions",
                       chat("Once upon a time", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  const auto payloads = sse_payloads(streamed->body);
  ASSERT_GE(payloads.size(), 4u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::string text;
  std::string finish;
  Json usage;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) {
    const Json c = Json::parse(payloads[i]);
    if (c.contains("usage")) {
      usage = c["usage"];
      continue;
    }
    const Json& choice = c["choices"][0];
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(text, content);
  EXPECT_EQ(finish, j["choices"][0]["finish_reason"]);
  EXPECT_EQ(usage["completion_tokens"], j["usage"]["completion_tokens"]);
}

TEST_F(ServerTest, StopStringNeverLeaks) {
  const Json base = Json::parse(post("/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 30}, {"temperature", 0}})->body);
  const std::string text = base["choices"][0]["text"];
  ASSERT_GE(text.size(), 8u);
  const std::string stop = text.substr(text.size() / 2, 3);
  const std::string expected = text.substr(0, text.find(stop));
  const Json req = {{"prompt", "The cat"}, {"max_tokens", 30}, {"temperature", 0}, {"stop", stop}};
  const Json cut = Json::parse(post("/v1/completions", req)->body);
  EXPECT_EQ(cut["choices"][0]["text"], expected);
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
  Json streamed_req = req;
  streamed_req["stream"] = true;
  std::string streamed;
  for (const auto& p : sse_payloads(post("/v1/completions", streamed_req)->body))
    if (p != "[DONE]") streamed += Json::parse(p)["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(streamed, expected);
}

TEST_F(ServerTest, CompletionLogprobs) {
  auto res = post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", true},
                                      {"top_logprobs", 2}});
  ASSERT_EQ(res->status, 200) << res->body;
  const Json lp = Json::parse(res->body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 3u);
  for (const Json& e : lp) {
    ASSERT_EQ(e["top_logprobs"].size(), 2u);
    // Greedy: the sampled token is the most likely one.
    EXPECT_EQ(e["id"], e["top_logprobs"][0]["id"]);
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
  }
}

TEST_F(ServerTest, ValidationErrorsAre400WithOpenAiBody) {
  auto bad_json = client_->Post("/v1/chat/completions", "{not json", "application/json");
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_EQ(Json::parse(bad_json->body)["error"]["type"], "invalid_request_error");
  auto empty = post("/v1/chat/completions", {{"messages", Json::array()}});
  EXPECT_EQ(empty->status, 400);
  EXPECT_EQ(Json::parse(empty->body)["error"]["message"], "messages must be a non-empty array");
  auto temp = post("/v1/chat/completions", chat("x", {{"temperature", -1}}));
  EXPECT_EQ(temp->status, 400);
  EXPECT_EQ(Json::parse(temp->body)["error"]["param"], "temperature");
  auto over = post("/v1/chat/completions", chat("x", {{"max_tokens", 5000}}));
  EXPECT_EQ(over->status, 400);
  EXPECT_EQ(Json::parse(over->body)["error"]["code"], "context_length_exceeded");
  auto bias = post("/v1/chat/completions", chat("x", {{"logit_bias", {{"999999", 1}}}}));
  EXPECT_EQ(bias->status, 400) << bias->body;
  // The server is still serving.
  EXPECT_EQ(post("/v1/chat/completions", chat("x", {{"max_tokens", 2}}))->status, 200);
}

TEST_F(ServerTest, BodyOverTheLimitIs413) {
  ServerOptions o;
  o.max_body_bytes = 1024;
  restart(o);
  auto res = client_->Post("/v1/chat/completions", std::string(4096, ' '), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
}

TEST_F(ServerTest, AnthropicMessages) {
  const Json body = {{"model", "default"}, {"max_tokens", 12}, {"temperature", 0},
                     {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  auto res = post("/v1/messages", body);
  ASSERT_EQ(res->status, 200) << res->body;
  const Json j = Json::parse(res->body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["content"][0]["type"], "text");
  EXPECT_TRUE(j["stop_reason"] == "end_turn" || j["stop_reason"] == "max_tokens");
  EXPECT_GT(j["usage"]["input_tokens"].get<int>(), 0);

  Json stream_body = body;
  stream_body["stream"] = true;
  auto streamed = post("/v1/messages", stream_body);
  ASSERT_EQ(streamed->status, 200);
  std::vector<std::string> events;
  const auto payloads = sse_payloads(streamed->body, &events);
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events.front(), "message_start");
  EXPECT_EQ(events[1], "content_block_start");
  EXPECT_EQ(events[2], "ping");
  EXPECT_EQ(events[events.size() - 2], "message_delta");
  EXPECT_EQ(events.back(), "message_stop");
  std::string text;
  for (const auto& p : payloads) {
    const Json e = Json::parse(p);
    if (e["type"] == "content_block_delta") text += e["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(text, j["content"][0]["text"]);

  auto bad = post("/v1/messages", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json::parse(bad->body), Json::parse(R"({"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": "max_tokens: Field required"}})"));
}

TEST_F(ServerTest, MetricsAndStats) {
  ASSERT_EQ(post("/v1/chat/completions", chat("Hi", {{"max_tokens", 4}}))->status, 200);
  wait_idle();  // the engine thread retires a request a moment after its response has left
  auto res = client_->Get("/metrics");
  ASSERT_EQ(res->status, 200);
  const std::string& body = res->body;
  EXPECT_NE(body.find("kvlm_time_to_first_token_seconds_count 1\n"), std::string::npos) << body;
  EXPECT_NE(body.find("kvlm_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1\n"),
            std::string::npos);
  EXPECT_NE(body.find("kvlm_requests_running 0\n"), std::string::npos);
  const Json stats = Json::parse(client_->Get("/stats")->body);
  EXPECT_EQ(stats["model"], "default");
  EXPECT_GE(stats["requests"]["total"].get<int>(), 1);
  EXPECT_TRUE(stats.contains("batch") && stats.contains("prefix_cache") && stats.contains("memory"));
}

TEST_F(ServerTest, ClientDisconnectCancelsAndFreesKv) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = chat("Tell me a long story", {{"stream", true}, {"max_tokens", 1500}, {"ignore_eos", true}}).dump();
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  httplib::Response res;
  httplib::Error err;
  client_->send(req, res, err);  // returns once the receiver stops reading: the socket closes
  EXPECT_EQ(chunks, 3);
  const EngineStats s = wait_idle();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  EXPECT_LT(s.generated_tokens_total, 1500);
  const std::string metrics = client_->Get("/metrics")->body;
  EXPECT_NE(metrics.find("kvlm_client_disconnects_total 1\n"), std::string::npos) << metrics;
}

TEST_F(ServerTest, ApiKeyRequiredExceptForHealth) {
  ServerOptions o;
  o.api_key = "sekrit";
  restart(o);
  EXPECT_EQ(client_->Get("/health")->status, 200);
  auto denied = client_->Get("/v1/models");
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(Json::parse(denied->body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(client_->Get("/v1/models", {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(client_->Get("/v1/models", {{"Authorization", "Bearer sekrit"}})->status, 200);
  EXPECT_EQ(client_->Get("/v1/models", {{"x-api-key", "sekrit"}})->status, 200);
}

TEST_F(ServerTest, PortInUseIsRefused) {
  ServerOptions o;
  o.port = server_->port();
  ServedModel served;
  served.id = "x";
  served.engine = engine_;
  served.tokenizer = loaded().tokenizer;
  Server second(served, o);
  EXPECT_THROW(second.bind(), Error);
}

TEST(ConstantTimeEquals, Compares) {
  EXPECT_TRUE(constant_time_equals("abc", "abc"));
  EXPECT_FALSE(constant_time_equals("abd", "abc"));
  EXPECT_FALSE(constant_time_equals("ab", "abc"));
  EXPECT_FALSE(constant_time_equals("abcd", "abc"));
  EXPECT_FALSE(constant_time_equals("", "abc"));
}

}  // namespace
}  // namespace kvlm::server
