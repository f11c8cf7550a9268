#pragma once
// A real server on a loopback port for the end-to-end server tests: the bundled default model, an
// engine of its own per test (prefix cache off, so freed KV shows as free blocks), httplib's
// client, and helpers to build requests and read SSE bodies.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvlm/engine/generate.h"
#include "kvlm/server/http_server.h"

namespace kvlm::server::e2e {

inline const std::string kModelDir = std::string(KVLM_MODELS_DIR) + "/default";

struct Loaded {
  std::shared_ptr<Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
};

// The model is loaded once per test binary and shared by every test's engine.
inline const Loaded& loaded() {
  static const Loaded l{std::shared_ptr<Model>(Model::load(kModelDir)),
                        std::make_shared<const Tokenizer>(Tokenizer::from_model_dir(kModelDir))};
  return l;
}

class ServerTest : public ::testing::Test {
 protected:
  void start(ServerOptions options = {}, EngineOptions engine_options = default_engine_options()) {
    const Loaded& l = loaded();
    engine_ = std::make_shared<Engine>(l.model, l.tokenizer, engine_options);
    ServedModel served;
    served.id = "default";
    served.engine = engine_;
    served.tokenizer = l.tokenizer;
    served.chat_template = ChatTemplate::from_model_dir(kModelDir);
    served.eos_token_ids = stop_token_ids(l.model->config(), *l.tokenizer);
    served.context_window = l.model->config().max_position_embeddings;
    options.port = 0;
    server_ = std::make_unique<Server>(served, options);
    server_->bind();
    thread_ = std::thread([this] { server_->run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(60, 0);
  }
  static EngineOptions default_engine_options() {
    EngineOptions eo;
    eo.max_batch = 4;
    eo.prompt_cache_bytes = 0;
    return eo;
  }
  void SetUp() override { start(); }
  void TearDown() override {
    if (!server_) return;
    server_->shutdown(std::chrono::milliseconds(0));
    thread_.join();
  }
  void restart(ServerOptions options, EngineOptions engine_options = default_engine_options()) {
    TearDown();
    start(std::move(options), engine_options);
  }

  httplib::Result post(const std::string& path, const Json& body, httplib::Headers headers = {}) {
    return client_->Post(path.c_str(), headers, body.dump(), "application/json");
  }

  // Waits (up to 5 s) until the engine has nothing running or queued and every KV block is free.
  EngineStats wait_idle() {
    EngineStats s;
    for (int i = 0; i < 500; ++i) {
      s = engine_->stats();
      if (s.running == 0 && s.waiting == 0 && s.kv_blocks_free == s.kv_blocks_total) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return s;
  }

  std::shared_ptr<Engine> engine_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

// A greedy chat request for one user message; `extra` fields are added or replaced.
inline Json chat(const std::string& text, Json extra = Json::object()) {
  Json body = {{"model", "default"}, {"messages", {{{"role", "user"}, {"content", text}}}}, {"temperature", 0},
               {"max_tokens", 24}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// The data payloads of an SSE body, in order (and the event names, when asked).
inline std::vector<std::string> sse_payloads(const std::string& body, std::vector<std::string>* events = nullptr) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find_first_not_of('\n', pos)) != std::string::npos) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(pos, end - pos);
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
    else if (line.rfind("event: ", 0) == 0 && events) events->push_back(line.substr(7));
    pos = end;
  }
  return out;
}

// The text of a streamed chat completion: its content deltas, concatenated.
inline std::string chat_stream_text(const std::string& body) {
  std::string text;
  for (const std::string& p : sse_payloads(body)) {
    if (p == "[DONE]") continue;
    const Json c = Json::parse(p);
    if (c.contains("choices") && !c["choices"].empty() && c["choices"][0]["delta"].contains("content"))
      text += c["choices"][0]["delta"]["content"].get<std::string>();
  }
  return text;
}

}  // namespace kvlm::server::e2e
