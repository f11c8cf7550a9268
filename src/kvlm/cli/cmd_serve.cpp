// kvlm serve [MODEL_DIR]: OpenAI-, mlx_lm.server- and Anthropic-compatible HTTP server on the
// continuous-batching engine (docs/server.md).
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/base/json.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/cli/command.h"
#include "kvlm/cli/model_args.h"
#include "kvlm/engine/engine.h"
#include "kvlm/engine/engine_flags.h"
#include "kvlm/engine/generate.h"
#include "kvlm/server/http_server.h"

namespace kvlm::cli {
namespace {

constexpr const char* kHelp =
    "Serve a model over HTTP: OpenAI (/v1/chat/completions, /v1/completions, /v1/models), "
    "mlx_lm.server extras (top_k, min_p, xtc_*, repetition_penalty, logprobs) and Anthropic "
    "(/v1/messages), plus /health, /stats and /metrics (Prometheus).\n\n"
    "Without MODEL_DIR (or --model) the bundled default model is served. Sampling defaults: a "
    "request field wins, then the flags here, then the model's generation_config.json, then "
    "greedy decoding. SIGINT/SIGTERM stop admitting requests, let running ones finish for "
    "--shutdown-grace seconds, cancel the rest and exit 0.";

struct Options {
  std::string model_positional, model_flag, served_name;
  server::ServerOptions server;
  EngineOptions engine;
  ModelLoadOptions load;
  ThreadOptions threads;
  float temp = 0, top_p = 1, min_p = 0, repetition_penalty = 0;
  int top_k = 0, max_tokens = 0;
  uint64_t seed = 0;
  std::string chat_template_args, log_level;
  double shutdown_grace = 10;
  CLI::Option *temp_opt, *top_p_opt, *top_k_opt, *min_p_opt, *rep_opt, *seed_opt, *max_tokens_opt;
};

// The flag layer of the defaults: only the flags the user gave.
server::SamplingDefaults flag_defaults(const Options& o) {
  server::SamplingDefaults d;
  if (o.temp_opt->count()) d.temperature = o.temp;
  if (o.top_p_opt->count()) d.top_p = o.top_p;
  if (o.top_k_opt->count()) d.top_k = o.top_k;
  if (o.min_p_opt->count()) d.min_p = o.min_p;
  if (o.rep_opt->count()) d.repetition_penalty = o.repetition_penalty;
  if (o.seed_opt->count()) d.seed = o.seed;
  if (o.max_tokens_opt->count()) d.max_tokens = o.max_tokens;
  return d;
}

server::SamplingDefaults generation_config_layer(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "generation_config.json").string();
  if (!file_exists(path)) return {};
  return server::generation_config_defaults(read_json_file(path), path);
}

Json parse_template_args(const std::string& text) {
  if (text.empty()) return nullptr;
  const Json args = parse_json(text, "--chat-template-args");
  check(args.is_object(), "--chat-template-args must be a JSON object, e.g. '{\"enable_thinking\": false}'");
  return args;
}

// SIGINT and SIGTERM are blocked in every thread (they inherit the mask) and taken by one
// thread with sigwait, so shutdown runs as ordinary code rather than in a signal handler.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

std::string model_name(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

int run(Options& o) {
  if (!o.log_level.empty()) setenv("KVLM_LOG", o.log_level.c_str(), 1);
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client that hangs up mid-stream must fail the write (and cancel its request), not kill
  // the process.
  signal(SIGPIPE, SIG_IGN);

  const std::string dir = !o.model_flag.empty()        ? o.model_flag
                          : !o.model_positional.empty() ? o.model_positional
                                                        : default_model_dir();
  check(std::filesystem::is_regular_file(std::filesystem::path(dir) / "config.json"),
        "'" + dir + "' is not a model directory (it has no config.json)");
  ThreadPool::configure_global(o.threads);
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Model> model = Model::load(dir, o.load);
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::from_model_dir(dir));

  server::ServedModel served;
  served.id = o.served_name.empty() ? model_name(dir) : o.served_name;
  served.tokenizer = tokenizer;
  served.chat_template = ChatTemplate::from_model_dir(dir);
  served.eos_token_ids = stop_token_ids(model->config(), *tokenizer);
  served.context_window = model->config().max_position_embeddings;
  served.engine = std::make_shared<Engine>(model, tokenizer, o.engine);
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  o.server.defaults = server::merge_defaults(
      flag_defaults(o), server::merge_defaults(generation_config_layer(dir), server::builtin_defaults()));
  o.server.chat_template_args = parse_template_args(o.chat_template_args);
  server::Server srv(served, o.server);
  srv.bind();

  const EngineStats stats = served.engine->stats();
  std::printf("kvlm serve: listening on http://%s:%d (model %s, context %lld tokens, KV budget %.1f MiB, "
              "batch %d, loaded in %.2f s)\n",
              o.server.host.c_str(), srv.port(), served.id.c_str(), (long long)served.context_window,
              double(stats.kv_bytes_total) / double(1 << 20), o.engine.max_batch, load_seconds);
  std::fflush(stdout);

  const auto grace = std::chrono::milliseconds(int64_t(o.shutdown_grace * 1000));
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    std::fprintf(stderr, "kvlm serve: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv.shutdown(grace);
  });
  srv.run();
  waiter.join();
  return 0;
}

Runner setup(CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.description(kHelp);
  sub.add_option("model_dir", o->model_positional, "Model folder (default: the bundled model)");
  sub.add_option("--model,-m", o->model_flag, "Model folder (same as the positional argument)");
  sub.add_option("--served-model-name", o->served_name, "Model id reported by /v1/models (default: folder name)");
  sub.add_option("--host", o->server.host, "Address to listen on (0.0.0.0 opens the server to the network)")
      ->capture_default_str();
  sub.add_option("--port", o->server.port, "Port to listen on")->check(CLI::Range(1, 65535))->capture_default_str();
  sub.add_option("--api-key", o->server.api_key,
                 "Require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on every endpoint but /health");
  o->max_tokens_opt = sub.add_option("--max-tokens", o->max_tokens,
                                     "Default completion limit (default: the rest of the context for chat, "
                                     "512 for /v1/completions)")
                          ->check(CLI::PositiveNumber);
  o->temp_opt = sub.add_option("--temp,--temperature", o->temp, "Default sampling temperature (0 = greedy)")
                    ->check(CLI::NonNegativeNumber);
  o->top_p_opt = sub.add_option("--top-p", o->top_p, "Default nucleus mass")->check(CLI::Range(0.0f, 1.0f));
  o->top_k_opt = sub.add_option("--top-k", o->top_k, "Default top-k (0 = off)")->check(CLI::NonNegativeNumber);
  o->min_p_opt = sub.add_option("--min-p", o->min_p, "Default min-p (0 = off)")->check(CLI::Range(0.0f, 1.0f));
  o->rep_opt = sub.add_option("--repetition-penalty", o->repetition_penalty, "Default repetition penalty (0 = off)")
                   ->check(CLI::NonNegativeNumber);
  o->seed_opt = sub.add_option("--seed", o->seed, "Default seed for requests without one (default: fresh per request)");
  sub.add_option("--chat-template-args", o->chat_template_args,
                 "JSON object of extra chat-template variables, e.g. '{\"enable_thinking\": false}'");
  sub.add_option("--log-level", o->log_level, "debug, info, warn or error")
      ->transform([](std::string s) {
        for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
        return s == "warning" ? std::string("warn") : s;
      })
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  sub.add_option("--max-body-bytes", o->server.max_body_bytes, "Largest request body accepted (413 above)")
      ->capture_default_str();
  sub.add_option("--http-threads", o->server.http_threads, "Connections served at once (each stream holds one)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub.add_option("--shutdown-grace", o->shutdown_grace,
                 "Seconds running requests may finish after SIGINT/SIGTERM before they are cancelled")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_threads_option(sub, o->threads);
  add_engine_options(sub, o->engine, o->load);
  return [o] { return run(*o); };
}

const Registration reg{"serve", "Serve a model over HTTP (OpenAI, mlx_lm.server and Anthropic APIs)", setup};

}  // namespace
}  // namespace kvlm::cli
