// Aggregate decode throughput of the continuous-batching engine on the bundled default model:
// N concurrent requests (128-token prompts, 128 new tokens, greedy, EOS ignored) through one
// Engine with max_batch N. Counters: aggregate generated tokens/s over the whole run, decode
// tokens/s per request (after its first token), and time to first token (p50, p95).
//
//   bench_batching --benchmark_filter=Engine   [KVLM_BENCH_THREADS=n to size the kernel pool]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <random>

#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/engine.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shared {
  std::shared_ptr<kvlm::Model> model;
  std::shared_ptr<const kvlm::Tokenizer> tokenizer;
};

const Shared& shared() {
  static const Shared s = [] {
    if (const char* t = std::getenv("KVLM_BENCH_THREADS")) kvlm::ThreadPool::configure_global({std::atoi(t)});
    const std::string dir = std::string(KVLM_MODELS_DIR) + "/default";
    kvlm::ModelLoadOptions o;
    o.kv_budget_bytes = int64_t(256) << 20;
    Shared out;
    out.model = std::shared_ptr<kvlm::Model>(kvlm::Model::load(dir, o).release());
    out.tokenizer = std::make_shared<const kvlm::Tokenizer>(kvlm::Tokenizer::from_model_dir(dir));
    return out;
  }();
  return s;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

void BM_EngineConcurrency(benchmark::State& state) {
  const int n = int(state.range(0));
  const int prompt_tokens = 128, new_tokens = 128;
  const Shared& s = shared();
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> id(3, s.model->config().vocab_size - 1);
  double total_tokens = 0, total_seconds = 0;
  std::vector<double> ttft_ms, per_request_tok_s;
  for (auto _ : state) {
    kvlm::Engine engine(s.model, s.tokenizer, {n, 512, 2048, 0});
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    std::vector<Clock::time_point> first(static_cast<size_t>(n)), last(static_cast<size_t>(n));
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < n; ++i) {
      kvlm::GenerationRequest r;
      for (int k = 0; k < prompt_tokens; ++k) r.prompt.push_back(id(rng));
      r.max_tokens = new_tokens;
      r.ignore_eos = true;
      engine.submit(r, [&, i, seen = 0](const kvlm::TokenEvent& ev) mutable {
        if (ev.token >= 0 && seen++ == 0) first[size_t(i)] = Clock::now();
        if (!ev.finished) return;
        std::lock_guard<std::mutex> lock(mu);
        last[size_t(i)] = Clock::now();
        ++done;
        cv.notify_all();
      });
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done == n; });
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    total_tokens += double(n) * new_tokens;
    total_seconds += seconds;
    for (int i = 0; i < n; ++i) {
      ttft_ms.push_back(std::chrono::duration<double, std::milli>(first[size_t(i)] - start).count());
      const double decode_s = std::chrono::duration<double>(last[size_t(i)] - first[size_t(i)]).count();
      per_request_tok_s.push_back((new_tokens - 1) / decode_s);
    }
  }
  state.counters["agg_tok_s"] = total_tokens / total_seconds;
  state.counters["req_decode_tok_s_p50"] = percentile(per_request_tok_s, 0.5);
  state.counters["ttft_ms_p50"] = percentile(ttft_ms, 0.5);
  state.counters["ttft_ms_p95"] = percentile(ttft_ms, 0.95);
}

BENCHMARK(BM_EngineConcurrency)->Arg(1)->Arg(4)->Arg(8)->Arg(16)->Iterations(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
