#include "kvlm/cli/model_args.h"

#include <chrono>
#include <filesystem>

#include "kvlm/base/error.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/engine_flags.h"

namespace kvlm::cli {

void add_threads_option(CLI::App& sub, int& threads) {
  sub.add_option("--threads", threads, "Worker threads (0 = one per physical core)")
      ->check(CLI::NonNegativeNumber)
      ->default_val(0);
}

void add_model_run_options(CLI::App& sub, int& threads, ModelLoadOptions& load) {
  add_threads_option(sub, threads);
  add_kv_quant_options(sub, load.kv_quant);
}

std::unique_ptr<Model> load_checkpoint(const std::string& dir, int threads, const ModelLoadOptions& load) {
  namespace fs = std::filesystem;
  check(fs::is_directory(dir), "model directory '" + dir + "' does not exist");
  check(fs::is_regular_file(fs::path(dir) / "config.json"),
        "'" + dir + "' is not a model directory (it has no config.json)");
  if (threads > 0) ThreadPool::configure_global(threads);
  return Model::load(dir, load);
}

LoadedModel load_model(const std::string& dir, int threads, const ModelLoadOptions& load) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Model> model = load_checkpoint(dir, threads, load);
  Tokenizer tokenizer = Tokenizer::from_model_dir(dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return LoadedModel{std::move(model), std::move(tokenizer), seconds};
}

}  // namespace kvlm::cli
