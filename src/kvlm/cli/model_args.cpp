#include "kvlm/cli/model_args.h"

#include <chrono>
#include <filesystem>

#include "kvlm/base/error.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/engine_flags.h"

namespace kvlm::cli {

void add_threads_option(CLI::App& sub, ThreadOptions& threads) {
  sub.add_option("--threads", threads.threads, "Worker threads (0 = one per physical core)")
      ->check(CLI::NonNegativeNumber)
      ->default_val(0);
  sub.add_flag("--pin-threads", threads.pin, "Pin each worker thread to its own physical core");
}

void add_model_run_options(CLI::App& sub, ThreadOptions& threads, ModelLoadOptions& load) {
  add_threads_option(sub, threads);
  add_kv_quant_options(sub, load.kv_quant);
  add_matmul_option(sub, load.matmul);
  add_weight_layout_option(sub, load.panel_weights);
}

std::unique_ptr<Model> load_checkpoint(const std::string& dir, const ThreadOptions& threads,
                                       const ModelLoadOptions& load) {
  namespace fs = std::filesystem;
  check(fs::is_directory(dir), "model directory '" + dir + "' does not exist");
  check(fs::is_regular_file(fs::path(dir) / "config.json"),
        "'" + dir + "' is not a model directory (it has no config.json)");
  ThreadPool::configure_global(threads);
  return Model::load(dir, load);
}

LoadedModel load_model(const std::string& dir, const ThreadOptions& threads,
                       const ModelLoadOptions& load) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Model> model = load_checkpoint(dir, threads, load);
  Tokenizer tokenizer = Tokenizer::from_model_dir(dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return LoadedModel{std::move(model), std::move(tokenizer), seconds};
}

void add_window_options(CLI::App& sub, PerplexityOptions& window, int64_t& max_tokens) {
  sub.add_option("--context,-c", window.context, "Tokens per window")
      ->check(CLI::Range(2, 1 << 30))
      ->capture_default_str();
  sub.add_option("--stride,-s", window.stride, "Tokens between window starts (1..context)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub.add_option("--max-tokens", max_tokens, "Evaluate only the first N tokens of the file (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub.add_option("--prefill-chunk", window.prefill_chunk, "Tokens per forward pass within a window")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace kvlm::cli
