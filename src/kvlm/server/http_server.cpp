#include "kvlm/server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <sys/socket.h>

#include "kvlm/base/error.h"
#include "kvlm/base/log.h"
#include "kvlm/server/anthropic.h"
#include "kvlm/server/api_error.h"
#include "kvlm/server/metrics.h"
#include "kvlm/server/openai_request.h"
#include "kvlm/server/openai_response.h"
#include "kvlm/server/output.h"
#include "kvlm/server/prompt.h"
#include "kvlm/server/stream_writer.h"

namespace kvlm::server {

bool constant_time_equals(std::string_view presented, std::string_view expected) {
  unsigned diff = presented.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= unsigned(uint8_t(i < presented.size() ? presented[i] : 0) ^ uint8_t(expected[i]));
  return diff == 0;
}

namespace {

// Pending connections the listening socket queues (the kernel caps it at net.core.somaxconn).
constexpr int kListenBacklog = 1024;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

enum class Protocol { kChat, kCompletion, kAnthropic };

const char* endpoint_of(Protocol p) {
  switch (p) {
    case Protocol::kChat: return "/v1/chat/completions";
    case Protocol::kCompletion: return "/v1/completions";
    case Protocol::kAnthropic: return "/v1/messages";
  }
  return "";
}

// Everything one generation needs once its request has been validated.
struct Prepared {
  GenerationRequest request;
  OutputOptions output;
  ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
};

}  // namespace

struct Server::Impl {
  ServedModel model;
  ServerOptions options;
  httplib::Server http;
  ServerMetrics metrics;
  Clock::time_point started = Clock::now();
  int64_t created_unix = 0;
  int bound_port = -1;
  int listen_socket = -1;  // the listening socket, recorded by httplib's socket-options hook

  std::atomic<bool> draining{false};
  std::mutex mu;
  std::condition_variable idle;
  int active = 0;
  bool stopping = false;   // shutdown() has begun: run() must not start listening
  bool listening = false;  // run() is inside httplib's listen loop (or about to enter it)

  Impl(ServedModel m, ServerOptions o) : model(std::move(m)), options(std::move(o)) {
    created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  }

  // Counts a generation as active for its lifetime, so shutdown can wait for it.
  struct ActiveGuard {
    Impl* impl;
    explicit ActiveGuard(Impl* i) : impl(i) {
      std::lock_guard lock(impl->mu);
      ++impl->active;
    }
    ~ActiveGuard() {
      std::lock_guard lock(impl->mu);
      if (--impl->active == 0) impl->idle.notify_all();
    }
  };

  void setup_routes();
  void send_error(httplib::Response& res, const ApiError& e, Protocol p) const;
  void handle_generation(const httplib::Request& req, httplib::Response& res, Protocol p);
  Prepared prepare(const RequestJson& body, Protocol p) const;
  Prepared prepare_chat(const ChatRequest& r, Protocol p) const;
  void respond_whole(Prepared p, httplib::Response& res, Protocol proto);
  void respond_stream(Prepared p, httplib::Response& res, Protocol proto);
  Json model_json() const;
  bool authorized(const httplib::Request& req) const;
};

namespace {

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

// Pulls one request's events and feeds them to `on_delta`; returns the final output. Records
// time to first token and inter-token latency. `on_delta` returns false when the client has
// gone, which cancels the request (its KV is freed within one engine step).
FinalOutput drive(TokenStream& stream, OutputCollector& collector, ServerMetrics& metrics, Clock::time_point start,
                  const std::function<bool(const OutputDelta&, const LogprobEntry*)>& on_delta) {
  std::optional<Clock::time_point> last_token;
  while (auto ev = stream.next()) {
    if (ev->token >= 0) {
      if (last_token) metrics.observe_inter_token_latency(seconds_since(*last_token));
      else metrics.observe_time_to_first_token(seconds_since(start));
      last_token = Clock::now();
    }
    const OutputDelta d = collector.on_event(*ev);
    if (on_delta && !on_delta(d, collector.last_logprobs())) {
      stream.cancel();
      metrics.count_disconnect();
      // Drain to the final event so the request is known to be gone before we return.
      while (stream.next()) {
      }
      break;
    }
    if (ev->finished) break;
  }
  metrics.observe_request_duration(seconds_since(start));
  return collector.result();
}

}  // namespace

void Server::Impl::send_error(httplib::Response& res, const ApiError& e, Protocol p) const {
  send_json(res, e.status(), p == Protocol::kAnthropic ? anthropic_error_body(e) : openai_error_body(e));
}

bool Server::Impl::authorized(const httplib::Request& req) const {
  if (options.api_key.empty()) return true;
  // OpenAI clients send "Authorization: Bearer <key>"; Anthropic's send "x-api-key: <key>".
  std::string presented;
  const std::string auth = req.get_header_value("Authorization");
  static const std::string kBearer = "Bearer ";
  if (auth.compare(0, kBearer.size(), kBearer) == 0) presented = auth.substr(kBearer.size());
  else presented = req.get_header_value("x-api-key");
  return constant_time_equals(presented, options.api_key);
}

Prepared Server::Impl::prepare_chat(const ChatRequest& r, Protocol p) const {
  if (!model.chat_template)
    throw invalid_request("the served model has no chat template; use /v1/completions", "messages");
  ChatPrompt prompt = build_chat_prompt(*model.chat_template, *model.tokenizer, r, options.chat_template_args);
  const int32_t max_tokens =
      resolve_max_tokens(r.settings, int64_t(prompt.tokens.size()), model.context_window, std::nullopt, "messages");
  Prepared out;
  out.request = make_generation_request(std::move(prompt.tokens), r.settings, max_tokens, model.eos_token_ids,
                                        *model.tokenizer, model.engine->model_config().vocab_size);
  out.output.tools = !r.tools.is_null();
  out.output.starts_in_reasoning = prompt.starts_in_reasoning;
  out.output.logprobs = r.settings.logprobs;
  out.output.stop = r.settings.stop;
  out.meta = make_meta(p == Protocol::kAnthropic ? "msg_" : "chatcmpl-", model.id);
  out.stream = r.settings.stream;
  out.include_usage = r.settings.include_usage;
  out.logprobs = r.settings.logprobs;
  out.top_logprobs = r.settings.top_logprobs;
  return out;
}

Prepared Server::Impl::prepare(const RequestJson& body, Protocol p) const {
  if (p == Protocol::kChat) return prepare_chat(parse_chat_request(body, options.defaults), p);
  if (p == Protocol::kAnthropic) return prepare_chat(parse_anthropic_request(body, options.defaults), p);
  CompletionRequest r = parse_completion_request(body, options.defaults);
  std::vector<int32_t> tokens = model.tokenizer->encode(r.prompt, true);
  const int32_t max_tokens = resolve_max_tokens(r.settings, int64_t(tokens.size()), model.context_window,
                                                options.completion_max_tokens, "prompt");
  Prepared out;
  out.request = make_generation_request(std::move(tokens), r.settings, max_tokens, model.eos_token_ids,
                                        *model.tokenizer, model.engine->model_config().vocab_size);
  out.output.reasoning = false;
  out.output.logprobs = r.settings.logprobs;
  out.output.stop = r.settings.stop;
  out.meta = make_meta("cmpl-", model.id);
  out.stream = r.settings.stream;
  out.include_usage = r.settings.include_usage;
  out.logprobs = r.settings.logprobs;
  out.top_logprobs = r.settings.top_logprobs;
  return out;
}

namespace {

// Submits to the engine; a request that can never fit (context or KV capacity) is the client's
// problem, so it is a 400 naming the limit.
std::unique_ptr<TokenStream> submit(Engine& engine, GenerationRequest req) {
  try {
    return std::make_unique<TokenStream>(engine, std::move(req));
  } catch (const Error& e) {
    throw invalid_request(e.what(), "max_tokens", "context_over_budget");
  }
}

ApiError generation_failure(const FinalOutput& out) {
  if (out.reason == FinishReason::kCancelled)
    return ApiError(503, "generation cancelled: the server is shutting down", "server_error");
  return ApiError(500, "generation failed: " + out.error, "server_error");
}

bool failed(const FinalOutput& out) {
  return out.reason == FinishReason::kError || out.reason == FinishReason::kCancelled;
}

}  // namespace

void Server::Impl::respond_whole(Prepared p, httplib::Response& res, Protocol proto) {
  ActiveGuard guard(this);
  const Clock::time_point start = Clock::now();
  auto stream = submit(*model.engine, std::move(p.request));
  OutputCollector collector(*model.tokenizer, p.output);
  const FinalOutput out = drive(*stream, collector, metrics, start, {});
  if (failed(out)) return send_error(res, generation_failure(out), proto);
  Json body;
  if (proto == Protocol::kChat) body = chat_completion_json(p.meta, out, p.logprobs);
  else if (proto == Protocol::kCompletion) body = completion_json(p.meta, out, p.top_logprobs, p.logprobs);
  else body = anthropic_message_json(p.meta, out);
  send_json(res, 200, body);
}

void Server::Impl::respond_stream(Prepared p, httplib::Response& res, Protocol proto) {
  auto guard = std::make_shared<ActiveGuard>(this);
  const Clock::time_point start = Clock::now();
  const int32_t prompt_tokens = int32_t(p.request.prompt.size());
  // Submitting before the headers go out lets a request that can never fit get a plain 400.
  std::shared_ptr<TokenStream> stream = submit(*model.engine, std::move(p.request));
  std::shared_ptr<StreamWriter> writer =
      proto == Protocol::kChat         ? make_chat_stream(p.meta, p.include_usage, p.logprobs)
      : proto == Protocol::kCompletion ? make_completion_stream(p.meta, p.include_usage)
                                       : make_anthropic_stream(p.meta);
  auto output = p.output;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, guard, stream, writer, output, start, prompt_tokens](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
        OutputCollector collector(*model.tokenizer, output);
        bool open = write(writer->begin(prompt_tokens));
        const FinalOutput out = drive(*stream, collector, metrics, start,
                                      [&](const OutputDelta& d, const LogprobEntry* lp) {
                                        // Every token is written (and so flushed) as it comes.
                                        return open = open && write(writer->delta(d, lp));
                                      });
        if (!open) return false;  // the client went away; the request was cancelled
        write(failed(out) ? writer->error(generation_failure(out).what()) : writer->end(out));
        sink.done();
        return true;
      });
}

void Server::Impl::handle_generation(const httplib::Request& req, httplib::Response& res, Protocol p) {
  try {
    if (draining) throw ApiError(503, "the server is shutting down", "server_error");
    const RequestJson body = parse_request_body(req.body);
    Prepared prepared = prepare(body, p);
    if (prepared.stream) respond_stream(std::move(prepared), res, p);
    else respond_whole(std::move(prepared), res, p);
  } catch (const ApiError& e) {
    send_error(res, e, p);
  } catch (const Error& e) {
    send_error(res, invalid_request(e.what()), p);
  } catch (const std::exception& e) {
    log_error(std::string("internal error on ") + endpoint_of(p) + ": " + e.what());
    send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"), p);
  }
}

Json Server::Impl::model_json() const {
  return {{"id", model.id},
          {"object", "model"},
          {"created", created_unix},
          {"owned_by", "kvlm"},
          {"context_window", model.context_window}};
}

void Server::Impl::setup_routes() {
  http.set_socket_options([this](socket_t sock) {
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
    // server bind the same port silently instead of refusing to start.
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_socket = int(sock);
  });
  // Each SSE token is one small write; without TCP_NODELAY, Nagle's algorithm holds a write back
  // until the previous one is acknowledged, and with the peer's delayed ACKs tokens arrive in
  // bursts instead of as they are produced. (Accepted sockets inherit it from the listener.)
  http.set_tcp_nodelay(true);
  http.set_payload_max_length(options.max_body_bytes);
  http.set_keep_alive_max_count(1000);
  http.set_keep_alive_timeout(5);
  const int threads = options.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http.set_default_headers({{"Access-Control-Allow-Origin", "*"},
                            {"Access-Control-Allow-Methods", "*"},
                            {"Access-Control-Allow-Headers", "*"}});

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "OPTIONS") {
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path == "/health" || authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    const ApiError e(401, "Incorrect API key provided", "invalid_request_error", "", "invalid_api_key");
    send_error(res, e, req.path == "/v1/messages" ? Protocol::kAnthropic : Protocol::kChat);
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.count_request(req.matches.empty() ? "other" : req.path, res.status);
  });
  // Responses httplib produces itself (no route, body too large) get a JSON body too.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return;
    const Protocol p = req.path == "/v1/messages" ? Protocol::kAnthropic : Protocol::kChat;
    if (res.status == 404) return send_error(res, ApiError(404, "not found", "invalid_request_error", "", "not_found"), p);
    if (res.status == 413)
      return send_error(res, ApiError(413, "request body larger than " + std::to_string(options.max_body_bytes) + " bytes",
                                      "invalid_request_error", "", "request_too_large"), p);
    send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status), "invalid_request_error"), p);
  });

  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status": "ok"})", "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", Json::array({model_json()})}});
  });
  http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] == model.id) return send_json(res, 200, model_json());
    send_error(res, ApiError(404, "The model '" + std::string(req.matches[1]) + "' does not exist",
                             "invalid_request_error", "model", "model_not_found"), Protocol::kChat);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Protocol::kChat);
  });
  http.Post("/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Protocol::kChat);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Protocol::kCompletion);
  });
  http.Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Protocol::kAnthropic);
  });
  http.Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
    Json body = engine_stats_json(model.engine->stats());
    body["model"] = model.id;
    body["context_window"] = model.context_window;
    body["uptime_s"] = seconds_since(started);
    body["server"] = metrics.json();
    {
      std::lock_guard lock(mu);
      body["server"]["active_generations"] = active;
    }
    body["server"]["draining"] = draining.load();
    send_json(res, 200, body);
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(model.engine->stats()), "text/plain; version=0.0.4; charset=utf-8");
  });
}

Server::Server(ServedModel model, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options))) {
  check(impl_->model.engine && impl_->model.tokenizer, "the server needs an engine and a tokenizer");
  check(impl_->options.http_threads > 0, "--http-threads must be at least 1");
  impl_->setup_routes();
}

Server::~Server() = default;

void Server::bind() {
  const std::string where = impl_->options.host + ":" + std::to_string(impl_->options.port);
  if (impl_->options.port == 0) {
    impl_->bound_port = impl_->http.bind_to_any_port(impl_->options.host);
    check(impl_->bound_port > 0, "cannot listen on " + impl_->options.host + " (no free port, or a bad address)");
  } else {
    check(impl_->http.bind_to_port(impl_->options.host, impl_->options.port),
          "cannot listen on " + where + ": the port is already in use or the address is not valid here "
          "(choose another with --port, or stop the other server)");
    impl_->bound_port = impl_->options.port;
  }
  // The packaged httplib listens with a backlog of 5, so a burst of clients (32 streams
  // connecting at once) overflowed the accept queue and depended on SYN retransmits and
  // syncookies, which now and then lost a connection. listen() again only raises the backlog.
  if (impl_->listen_socket >= 0) ::listen(impl_->listen_socket, kListenBacklog);
}

int Server::port() const { return impl_->bound_port; }

void Server::run() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->listening = true;
  }
  impl_->http.listen_after_bind();
  std::lock_guard lock(impl_->mu);
  impl_->listening = false;
}

int Server::active_generations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->active;
}

void Server::shutdown(std::chrono::milliseconds grace) {
  impl_->draining = true;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  {
    std::unique_lock lock(impl_->mu);
    impl_->idle.wait_for(lock, grace, [&] { return impl_->active == 0; });
  }
  // Whatever is still running is cancelled; each stream gets its final event and ends.
  impl_->model.engine->shutdown(false);
  {
    // Cancelled streams end within an engine step; the bound only guards against a client
    // that stopped reading (its socket write times out on its own).
    std::unique_lock lock(impl_->mu);
    impl_->idle.wait_for(lock, std::chrono::seconds(10), [&] { return impl_->active == 0; });
  }
  // httplib's stop() does nothing until its listen loop has started, so a shutdown racing with
  // run() waits for the loop to be up (or for run() never to have started it).
  for (;;) {
    {
      std::lock_guard lock(impl_->mu);
      if (!impl_->listening) return;
    }
    if (impl_->http.is_running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->http.stop();
}

}  // namespace kvlm::server
