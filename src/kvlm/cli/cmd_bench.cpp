// kvlm bench: prefill and decode throughput of a model beside the machine's measured limits.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/cli/command.h"
#include "kvlm/cli/model_args.h"
#include "kvlm/engine/bench.h"
#include "kvlm/engine/engine_flags.h"

namespace kvlm::cli {
namespace {

struct BenchArgs {
  std::string model;
  std::string synthetic;
  std::string weights = "bf16";
  std::string json_path;
  ThreadOptions threads;
  bool no_probes = false;
  BenchOptions opts;
};

int weight_bits(const std::string& w) {
  if (w == "bf16") return 0;
  if (w == "q4") return 4;
  if (w == "q8") return 8;
  throw Error("--weights must be bf16, q4 or q8, got '" + w + "'");
}

// Runs the bench on a synthetic model written into a temporary folder (under $TMPDIR, else /tmp),
// which is removed however the run ends. Every argument is checked before the folder exists.
Json run_synthetic(BenchArgs& a) {
  check(a.model.empty(), "give either a MODEL folder or --synthetic, not both");
  const SyntheticShape& shape = synthetic_shape(a.synthetic);
  const int bits = weight_bits(a.weights);
  const char* dir = std::getenv("TMPDIR");
  const std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/kvlm-bench-XXXXXX";
  std::string templ = pattern;
  check(::mkdtemp(templ.data()) != nullptr, "cannot create a temporary folder " + pattern);
  try {
    std::printf("writing a synthetic %s model (%s) to %s\n", shape.name, a.weights.c_str(), templ.c_str());
    a.opts.model_dir = write_synthetic_model(shape, templ, bits);
    Json report = run_bench(a.opts);
    std::filesystem::remove_all(templ);
    return report;
  } catch (...) {
    std::filesystem::remove_all(templ);
    throw;
  }
}

int run(BenchArgs& a) {
  check_bench_options(a.opts);  // before writing a synthetic model
  ThreadPool::configure_global(a.threads);
  a.opts.probes = !a.no_probes;
  Json report;
  if (!a.synthetic.empty()) {
    report = run_synthetic(a);
  } else {
    a.opts.model_dir = a.model.empty() ? default_model_dir() : a.model;
    report = run_bench(a.opts);
  }
  if (!a.json_path.empty()) write_file(a.json_path, report.dump(2) + "\n");
  return 0;
}

Runner setup(CLI::App& sub) {
  auto a = std::make_shared<BenchArgs>();
  sub.add_option("model", a->model, "Model folder (default: the bundled model)");
  sub.add_option("--synthetic", a->synthetic,
                 "Benchmark a random-weight shape instead: 0.5b (hidden 896, 24 layers, 14/2 heads, "
                 "MLP 4864) or 1b (2048, 16, 32/8, 8192), vocab 32000, written to a temporary folder "
                 "under $TMPDIR (default /tmp) and removed afterwards");
  sub.add_option("--weights", a->weights, "Synthetic weight format: bf16, q4 or q8 (MLX affine, group 64)");
  sub.add_option("--prompt", a->opts.prompt_tokens, "Prefill length in tokens")->capture_default_str();
  sub.add_option("--context", a->opts.decode_context, "Tokens cached before decode is timed")
      ->capture_default_str();
  sub.add_option("--decode", a->opts.decode_tokens, "Timed decode steps per concurrency level")
      ->capture_default_str();
  sub.add_option("--concurrency", a->opts.concurrency, "Sequences decoding together (list)")
      ->delimiter(',')
      ->capture_default_str();
  sub.add_option("--prefill-chunk", a->opts.prefill_chunk, "Prefill chunk size")->capture_default_str();
  sub.add_option("--repeat", a->opts.repeat,
                 "Rounds of every measurement, interleaved (prefill, then each concurrency, then "
                 "again); each figure is reported from its median round, with every round's rate")
      ->capture_default_str();
  add_threads_option(sub, a->threads);
  add_kv_quant_options(sub, a->opts.kv_quant);
  add_matmul_option(sub, a->opts.matmul);
  add_weight_layout_option(sub, a->opts.panel_weights);
  sub.add_flag("--no-probes", a->no_probes, "Skip the bandwidth and peak probes");
  sub.add_flag("--profile", a->opts.profile,
               "Print the time per op kind per step of each phase as a share of the step, and the time "
               "outside ops");
  sub.add_option("--json", a->json_path, "Also write the figures as JSON to this file");
  sub.footer(
      "Decode at concurrency 1 is reported against the bandwidth limit (read bandwidth / bytes "
      "read per token: weights + KV); prefill and batched decode against the fp32 FMA peak, and "
      "with --matmul int8 on quantized weights also against the int8 peak (AVX-512 VNNI, or AVX2's "
      "vpmaddubsw where the CPU has no VNNI); each limit is "
      "probed right before and right after the phase it bounds, and the higher probe is used. "
      "Concurrency 1 also reports the round trip of a cache line between two pool threads (the "
      "handoff every parallel op pays a few times) and each thread's arithmetic speed as a "
      "fraction of the fastest's (a parallel op waits for its slowest thread), which explain "
      "how close decode gets.");
  return [a] { return run(*a); };
}

const Registration reg{"bench", "Measure prefill and decode throughput against machine limits", setup};

}  // namespace
}  // namespace kvlm::cli
