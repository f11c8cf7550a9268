// Served vs direct: what the HTTP layer costs on top of the engine.
//   decode tokens/s of one stream, served (SSE over loopback, /v1/completions) vs the engine's
//   own TokenStream on the same engine, model and settings; target: served >= 97% of direct;
//   the same for 8 streams decoding side by side; time to first token for 128-token prompts at
//   concurrency 1 and 8, served and direct.
// The server runs in-process on a free loopback port; the client is httplib's, reading the stream
// as it comes. Runs alternate direct/served so machine load hits both alike; medians reported.
//
//   bench_server [--model DIR | --synthetic 0.5b] [--decode-tokens N] [--reps R] [--threads T]
//                [--client-nice N]
// --synthetic writes the 0.5B shape with random weights and the bundled model's tokenizer (its
// vocabulary, so generated ids decode) to a temporary folder.
#include <httplib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/bench.h"
#include "kvlm/engine/generate.h"
#include "kvlm/server/http_server.h"

namespace {

using namespace kvlm;
using Clock = std::chrono::steady_clock;
double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Args {
  std::string model_dir = std::string(KVLM_MODELS_DIR) + "/default";
  std::string synthetic;
  int decode_tokens = 256, reps = 5, threads = 0;
  int client_nice = 0;  // > 0: the client threads yield the CPU, as a client on another machine would
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a.model_dir = v;
    else if (k == "--synthetic") a.synthetic = v;
    else if (k == "--decode-tokens") a.decode_tokens = std::stoi(v);
    else if (k == "--reps") a.reps = std::stoi(v);
    else if (k == "--threads") a.threads = std::stoi(v);
    else if (k == "--client-nice") a.client_nice = std::stoi(v);
    else throw Error("unknown option " + k);
  }
  return a;
}

std::string synthetic_model(const std::string& name, const std::string& tokenizer_dir) {
  const Tokenizer tok = Tokenizer::from_model_dir(tokenizer_dir);
  SyntheticShape shape = synthetic_shape(name);
  shape.vocab = tok.vocab_size();
  const std::string dir = (std::filesystem::temp_directory_path() / ("kvlm_bench_server_" + name)).string();
  write_synthetic_model(shape, dir, 0);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(std::filesystem::path(tokenizer_dir) / f, std::filesystem::path(dir) / f,
                               std::filesystem::copy_options::overwrite_existing);
  return dir;
}

// A prompt of exactly `n` tokens (by the server's encoding, special tokens included), distinct
// per `salt`, built from whole words so it encodes back to itself.
std::string prompt_of(const Tokenizer& tok, int n, int salt) {
  static const char* words[] = {"river", "stone", "light", "garden", "winter", "market", "song", "window"};
  std::string text = "Request " + std::to_string(salt) + ":";
  for (int i = 0;; ++i) {
    const std::string next = text + " " + words[(i * 7 + salt) % 8];
    if (int(tok.encode(next, true).size()) > n) break;
    text = next;
  }
  return text;
}

struct Timing {
  double ttft = 0;        // request sent → first token
  double decode_tps = 0;  // tokens after the first / time after the first
  int tokens = 0;
};

Timing direct_run(Engine& engine, const Tokenizer& tok, const std::string& prompt, int max_tokens) {
  GenerationRequest req;
  req.prompt = tok.encode(prompt, true);
  req.max_tokens = max_tokens;
  req.ignore_eos = true;
  const auto start = Clock::now();
  TokenStream stream(engine, req);
  Clock::time_point first, last;
  Timing t;
  while (auto ev = stream.next()) {
    if (ev->token >= 0) {
      last = Clock::now();
      if (t.tokens++ == 0) first = last;
    }
    if (ev->finished) break;
  }
  t.ttft = secs(first - start);
  t.decode_tps = t.tokens > 1 ? (t.tokens - 1) / secs(last - first) : 0;
  return t;
}

// One streamed /v1/completions request; token events are counted as their SSE chunks arrive.
// `nice` > 0 lowers the calling thread's priority first.
Timing served_run(int port, const std::string& prompt, int max_tokens, int nice) {
  if (nice > 0) setpriority(PRIO_PROCESS, id_t(gettid()), nice);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(600, 0);
  const Json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
                     {"ignore_eos", true}, {"stream", true}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  Timing t;
  Clock::time_point first, last;
  std::string pending;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const auto now = Clock::now();
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos; pending.erase(0, end + 2)) {
      // A text chunk per token; the finish chunk has an empty text and [DONE] ends it.
      // Matched as text rather than parsed, so the client's own work stays small.
      const std::string_view event = std::string_view(pending).substr(0, end);
      if (event.find("\"finish_reason\":null") == std::string_view::npos) continue;
      last = now;
      if (t.tokens++ == 0) first = now;
    }
    return true;
  };
  const auto start = Clock::now();
  httplib::Response res;
  httplib::Error err;
  if (!client.send(req, res, err) || res.status != 200)
    throw Error("served request failed: " + httplib::to_string(err) + " " + res.body);
  t.ttft = secs(first - start);
  t.decode_tps = t.tokens > 1 ? (t.tokens - 1) / secs(last - first) : 0;
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// `c` requests sent at once, request i with prompt prompts[i]; their timings summed: time to first
// token (divide by c for the mean) and decode tokens/s (the streams decode side by side in the
// same steps, so the sum is the batch's throughput).
template <typename Run>
Timing concurrent(const std::vector<std::string>& prompts, Run run) {
  std::vector<Timing> t(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) threads.emplace_back([&, i] { t[i] = run(prompts[i]); });
  for (auto& th : threads) th.join();
  Timing sum;
  for (const Timing& x : t) sum.ttft += x.ttft, sum.decode_tps += x.decode_tps, sum.tokens += x.tokens;
  return sum;
}

std::vector<std::string> prompts_of(const Tokenizer& tok, int c, int n, int salt0) {
  std::vector<std::string> out;
  for (int i = 0; i < c; ++i) out.push_back(prompt_of(tok, n, salt0 + i));
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  Args a = parse_args(argc, argv);
  const std::string tokenizer_dir = a.model_dir;
  if (!a.synthetic.empty()) a.model_dir = synthetic_model(a.synthetic, tokenizer_dir);
  if (a.threads > 0) ThreadPool::configure_global({a.threads});
  auto model = std::shared_ptr<Model>(Model::load(a.model_dir));
  auto tok = std::make_shared<const Tokenizer>(Tokenizer::from_model_dir(a.model_dir));
  EngineOptions eo;
  eo.max_batch = 8;
  eo.prompt_cache_bytes = 0;  // every run prefills its whole prompt
  auto engine = std::make_shared<Engine>(model, tok, eo);
  server::ServedModel served;
  served.id = "bench";
  served.engine = engine;
  served.tokenizer = tok;
  served.eos_token_ids = stop_token_ids(model->config(), *tok);
  served.context_window = model->config().max_position_embeddings;
  server::ServerOptions so;
  so.port = 0;
  server::Server srv(served, so);
  srv.bind();
  std::thread listener([&] { srv.run(); });
  const int port = srv.port();

  std::printf("model %s, %d threads, decode %d tokens, %d reps (medians)\n", a.model_dir.c_str(),
              ThreadPool::global().size(), a.decode_tokens, a.reps);
  const std::string decode_prompt = prompt_of(*tok, 16, 0);
  auto direct = [&](const std::string& p, int n) { return direct_run(*engine, *tok, p, n); };
  // Each served request runs on a thread of its own, so --client-nice never touches this one.
  auto http = [&](const std::string& p, int n) {
    Timing t;
    std::thread([&] { t = served_run(port, p, n, a.client_nice); }).join();
    return t;
  };
  direct(decode_prompt, 8), http(decode_prompt, 8);  // warm up
  // Runners of `n` tokens per request, for concurrent().
  auto direct_of = [&](int n) { return [&, n](const std::string& p) { return direct(p, n); }; };
  auto http_of = [&](int n) { return [&, n](const std::string& p) { return http(p, n); }; };
  std::vector<double> d_tps, s_tps, d_tps8, s_tps8, d_t1, s_t1, d_t8, s_t8;
  for (int r = 0; r < a.reps; ++r) {
    d_tps.push_back(direct(decode_prompt, a.decode_tokens).decode_tps);
    s_tps.push_back(http(decode_prompt, a.decode_tokens).decode_tps);
    const auto eight = prompts_of(*tok, 8, 16, 10 * r);
    d_tps8.push_back(concurrent(eight, direct_of(a.decode_tokens)).decode_tps);
    s_tps8.push_back(concurrent(eight, http_of(a.decode_tokens)).decode_tps);
    d_t1.push_back(direct(prompt_of(*tok, 128, 100 + r), 1).ttft);
    s_t1.push_back(http(prompt_of(*tok, 128, 200 + r), 1).ttft);
    d_t8.push_back(concurrent(prompts_of(*tok, 8, 128, 1000 + 100 * r), direct_of(1)).ttft / 8);
    s_t8.push_back(concurrent(prompts_of(*tok, 8, 128, 5000 + 100 * r), http_of(1)).ttft / 8);
  }
  // The ratio is the median of each rep's served/direct pair (run back to back), which shifts in
  // machine load between reps disturb less than a ratio of medians would.
  auto row = [](const char* name, const std::vector<double>& d, const std::vector<double>& s, double scale) {
    std::vector<double> ratio;
    for (size_t i = 0; i < d.size(); ++i) ratio.push_back(s[i] / d[i]);
    std::printf("%-40s %10.1f %10.1f %7.1f%%\n", name, scale * median(d), scale * median(s),
                100 * median(ratio));
  };
  std::printf("%-40s %10s %10s %8s\n", "", "direct", "served", "ratio");
  row("decode tokens/s, 1 stream", d_tps, s_tps, 1);
  row("decode tokens/s, 8 streams (sum)", d_tps8, s_tps8, 1);
  row("TTFT ms, 128-token prompt, c=1", d_t1, s_t1, 1e3);
  row("TTFT ms, 128-token prompts, c=8 (mean)", d_t8, s_t8, 1e3);
  srv.shutdown(std::chrono::milliseconds(0));
  listener.join();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
