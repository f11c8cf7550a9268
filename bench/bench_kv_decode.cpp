// Decode speed over compressed KV caches at long context, on the synthetic 0.5B shape (hidden 896,
// 24 layers, 14 query / 2 kv heads, head_dim 64, random bf16 weights).
//
// Prefilling 16k tokens through the model would take far longer than the measurement, so the
// sequence's KV blocks are filled directly: rows of random N(0,1) keys and values are encoded
// through each layer's codec (a pool of distinct encoded rows is copied slot by slot; decode speed
// does not depend on the values). Then, per codec and context:
//   attention   one layer's attention for one decode query (14 heads) over the context,
//               microseconds per call (the median of --reps calls);
//   decode      whole-model decode steps (one token each, written through the codec), tokens/s.
// bf16 is the baseline the speed-ups are stated against; off (f32) is shown for reference.
// Every codec is measured --rounds times, interleaved with the others, and the best round is
// reported: on a shared machine the first measurements after loading ran up to 2x slower.
//
//   bench_kv_decode [--contexts 1024,4096,16384] [--codecs bf16,8,4,turbo:k8v3,...]
//                   [--steps 4] [--reps 20] [--rounds 2] [--threads N] [--cpu-time] [--model DIR]
#include <CLI/CLI.hpp>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kvlm/backend/cpu/attention_kernels.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/bench.h"
#include "kvlm/engine/engine_flags.h"
#include "kvlm/model/model.h"

namespace kvlm {
namespace {

// Wall time, or with --cpu-time the CPU time of the whole process: on a machine shared with other
// work, CPU time at --threads 1 measures what one dedicated core would do.
bool g_cpu_time = false;

double now_seconds() {
  if (g_cpu_time) {
    timespec ts;
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Fills tokens 0 .. n-1 of `seq` in every layer with encoded random rows.
void fill_random_kv(Model& model, KVSequence& seq, int64_t n) {
  KVPool& pool = model.kv_pool();
  const KVPoolConfig& c = pool.config();
  seq.reserve_append(int32_t(n));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  constexpr int kDistinctRows = 509;  // prime: slot i and i + kv_heads rarely share a row
  std::vector<float> x(size_t(c.head_dim));
  for (int l = 0; l < c.n_layers; ++l) {
    const KVCodec& codec = pool.codec(l);
    std::vector<uint8_t> keys(kDistinctRows * codec.key_row_bytes()),
        values(kDistinctRows * codec.value_row_bytes());
    for (int r = 0; r < kDistinctRows; ++r) {
      for (float& v : x) v = dist(rng);
      codec.encode_key_row(x.data(), keys.data() + size_t(r) * codec.key_row_bytes());
      for (float& v : x) v = dist(rng);
      codec.encode_value_row(x.data(), values.data() + size_t(r) * codec.value_row_bytes());
    }
    const ops::PagedKV kv = seq.layer_view(l);
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      auto* kb = static_cast<uint8_t*>(kv.keys.raw()) + cpu::kv_head_offset(kv.keys, h);
      auto* vb = static_cast<uint8_t*>(kv.values.raw()) + cpu::kv_head_offset(kv.values, h);
      const cpu::KVRows rows = cpu::kv_rows(kv, h);
      for (int64_t pos = 0; pos < n; ++pos) {
        const int64_t slot = rows.slot(pos);
        const size_t r = size_t(pos * c.n_kv_heads + h) % kDistinctRows;
        std::memcpy(kb + size_t(slot) * codec.key_row_bytes(), keys.data() + r * codec.key_row_bytes(),
                    codec.key_row_bytes());
        std::memcpy(vb + size_t(slot) * codec.value_row_bytes(),
                    values.data() + r * codec.value_row_bytes(), codec.value_row_bytes());
      }
    }
  }
  seq.commit_append(int32_t(n));
}

struct Row {
  std::string codec, name;
  int64_t context;
  double bits, kv_mb, attention_us, tokens_per_s;
};

// Measures every codec at every context once, keeping the best figures in `rows`.
void run_round(const std::string& model_dir, const std::vector<int64_t>& contexts,
               const std::vector<std::string>& codecs, int steps, int reps, ops::MatmulPath matmul,
               std::vector<Row>& rows) {
  const int64_t max_ctx = *std::max_element(contexts.begin(), contexts.end());
  for (const std::string& codec : codecs) {
    ModelLoadOptions lo;
    lo.kv_quant.quant = codec;
    lo.matmul = matmul;
    lo.kv_block_size = 16;
    lo.kv_budget_bytes = 1;  // replaced below once the codec's size is known
    {
      // Budget: the longest context plus the timed steps, in this codec's bytes.
      ModelLoadOptions probe = lo;
      probe.kv_budget_bytes = int64_t(1) << 30;
      const auto m = Model::load(model_dir, probe);
      lo.kv_budget_bytes = (max_ctx + steps + 32) * m->kv_pool().bytes_per_token();
    }
    const auto model = Model::load(model_dir, lo);
    const ModelConfig& c = model->config();
    const KVPoolConfig& pc = model->kv_pool().config();
    const double bits = double(model->kv_pool().bytes_per_token()) * 8.0 /
                        (double(pc.n_layers) * pc.n_kv_heads * 2 * pc.head_dim);
    for (int64_t ctx : contexts) {
      KVSequence seq(model->kv_pool());
      fill_random_kv(*model, seq, ctx);
      // Attention alone: layer 0, one query token at position ctx - 1 over ctx keys.
      std::mt19937 rng(7);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> qv(size_t(c.num_heads) * c.head_dim);
      for (float& v : qv) v = dist(rng);
      const Tensor q = Tensor::from_f32(qv, {1, c.num_heads, c.head_dim});
      const ops::AttentionParams ap{0.125f, 0, matmul};
      std::vector<double> times;
      for (int r = 0; r < reps + 1; ++r) {
        const double t0 = now_seconds();
        const Tensor o = ops::attention(q, seq.layer_view(0), ctx - 1, ap);
        if (r > 0) times.push_back(now_seconds() - t0);  // the first call warms the pages
      }
      std::nth_element(times.begin(), times.begin() + long(times.size() / 2), times.end());
      const double attention_us = times[times.size() / 2] * 1e6;
      // Whole-model decode steps.
      Batch b;
      b.tokens = {1};
      b.seqs = {{&seq, seq.length(), 1}};
      model->forward(b);  // warm-up
      const double t0 = now_seconds();
      for (int s = 0; s < steps; ++s) {
        b.seqs = {{&seq, seq.length(), 1}};
        model->forward(b);
      }
      const double tps = steps / (now_seconds() - t0);
      const double kv_mb = double(ctx) * double(model->kv_pool().bytes_per_token()) / 1e6;
      std::fprintf(stderr, "%s %lld: attention %.1f us, decode %.2f tok/s\n", codec.c_str(),
                   (long long)ctx, attention_us, tps);
      auto it = std::find_if(rows.begin(), rows.end(),
                             [&](const Row& r) { return r.codec == codec && r.context == ctx; });
      if (it == rows.end()) {
        rows.push_back({codec, model->kv_pool().codec(0).name(), ctx, bits, kv_mb, attention_us, tps});
      } else {
        it->attention_us = std::min(it->attention_us, attention_us);
        it->tokens_per_s = std::max(it->tokens_per_s, tps);
      }
    }
  }
}

int run(const std::string& model_dir, const std::vector<int64_t>& contexts,
        const std::vector<std::string>& codecs, int steps, int reps, int rounds, ops::MatmulPath matmul) {
  std::vector<Row> rows;
  for (int r = 0; r < rounds; ++r) run_round(model_dir, contexts, codecs, steps, reps, matmul, rows);
  std::printf("threads %d, attention ISA %s, --matmul %s, best of %d rounds, %s\n", ThreadPool::global().size(),
              cpu::isa_name(cpu::cpu_isa()), matmul_path_name(matmul), rounds,
              g_cpu_time ? "process CPU time" : "wall time");
  std::printf("| codec | context | bits/element | KV MB | attention us (1 layer) | decode tok/s |\n"
              "|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %lld | %.2f | %.1f | %.0f | %.2f |\n", r.name.c_str(), (long long)r.context,
                r.bits, r.kv_mb, r.attention_us, r.tokens_per_s);
  std::printf("\n| codec | context | attention speed-up over bf16 | decode speed-up over bf16 |\n"
              "|---|---|---|---|\n");
  for (const Row& r : rows)
    for (const Row& base : rows)
      if (base.codec == "bf16" && base.context == r.context && r.codec != "bf16")
        std::printf("| %s | %lld | %.2fx | %.2fx |\n", r.name.c_str(), (long long)r.context,
                    base.attention_us / r.attention_us, r.tokens_per_s / base.tokens_per_s);
  return 0;
}

}  // namespace
}  // namespace kvlm

int main(int argc, char** argv) {
  CLI::App app("Decode speed over compressed KV caches at long context (synthetic 0.5B shape)");
  std::vector<int64_t> contexts = {1024, 4096, 16384};
  std::vector<std::string> codecs = {"bf16",       "off",        "8",          "4",
                                     "turbo:k8v8", "turbo:k8v4", "turbo:k8v3", "turbo:k8v2",
                                     "turbo:k4v3", "turbo:k4v2"};
  int steps = 4, reps = 20, rounds = 2, threads = 0;
  std::string model_dir;
  app.add_option("--contexts", contexts, "Context lengths")->delimiter(',')->capture_default_str();
  app.add_option("--codecs", codecs, "--kv-quant spellings; bf16 is the baseline")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--steps", steps, "Timed decode steps per codec and context")->capture_default_str();
  app.add_option("--reps", reps, "Timed attention calls (the median is reported)")->capture_default_str();
  app.add_option("--rounds", rounds, "Measurements per codec and context (the best is reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "Worker threads (0 = physical cores)");
  app.add_flag("--cpu-time", kvlm::g_cpu_time, "Time by the process's CPU time instead of wall time");
  kvlm::ops::MatmulPath matmul = kvlm::ModelLoadOptions().matmul;
  kvlm::add_matmul_option(app, matmul, "--matmul",
                          "int8: keys of compressed caches scored on their codes (the default); exact: decoded");
  app.add_option("--model", model_dir, "Model folder (default: write the synthetic 0.5B shape to /tmp)");
  CLI11_PARSE(app, argc, argv);
  try {
    kvlm::ThreadPool::configure_global({threads});
    std::string tmp;
    if (model_dir.empty()) {
      tmp = (std::filesystem::temp_directory_path() / "kvlm_bench_kv_decode_0.5b").string();
      std::printf("writing the synthetic 0.5b model to %s\n", tmp.c_str());
      model_dir = kvlm::write_synthetic_model(kvlm::synthetic_shape("0.5b"), tmp, 0);
      ::sync();  // the first codec's timings must not share the disk with 1 GB of writeback
    }
    const int rc = kvlm::run(model_dir, contexts, codecs, steps, reps, rounds, matmul);
    if (!tmp.empty()) std::filesystem::remove_all(tmp);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
