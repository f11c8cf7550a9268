#pragma once
// `kvlm serve`'s HTTP server: OpenAI-, mlx_lm.server- and Anthropic-compatible endpoints on the
// continuous-batching engine. The protocol work happens in plain functions (openai_request.h,
// openai_response.h, anthropic.h, output.h); this layer routes, checks the API key, streams SSE
// and ties each request's lifetime to its connection.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/base/json.h"
#include "kvlm/engine/engine.h"
#include "kvlm/server/request_fields.h"
#include "kvlm/text/chat_template.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm::server {

// What the server serves.
struct ServedModel {
  std::string id;  // the name /v1/models reports and responses carry
  std::shared_ptr<Engine> engine;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // none: /v1/chat/completions and /v1/messages refuse
  std::vector<int32_t> eos_token_ids;         // XTC never removes these
  int64_t context_window = 0;                 // prompt + completion tokens
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 = any free port (tests)
  std::string api_key;  // empty: no authentication
  size_t max_body_bytes = 8u << 20;
  int http_threads = 64;  // concurrent connections served (each stream holds one)
  SamplingDefaults defaults;  // flags → generation_config.json → built-in, already merged
  Json chat_template_args;    // extra template variables for every chat request (object or null)
  int completion_max_tokens = 512;  // /v1/completions default when no layer sets max_tokens
};

class Server {
 public:
  Server(ServedModel model, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; Error naming the address if it is taken or invalid.
  void bind();
  int port() const;  // the bound port (useful with port 0)
  // Serves until shutdown(); returns once the listener has stopped.
  void run();
  // Graceful shutdown, from any thread except a signal handler: new generation requests get 503,
  // running ones may finish for up to `grace`, then the rest are cancelled and the listener stops.
  void shutdown(std::chrono::milliseconds grace);
  // Generations in progress (streams and non-streamed requests).
  int active_generations() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Compares a presented secret with the expected one in time that depends only on the expected
// secret's length, so response timing reveals nothing about how much of a guess was right.
bool constant_time_equals(std::string_view presented, std::string_view expected);

}  // namespace kvlm::server
