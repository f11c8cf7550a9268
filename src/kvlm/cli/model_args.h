#pragma once
// What the verbs that run a model share: the --threads option, the KV codec flags, and loading a
// model folder with its tokenizer, reporting a missing or incomplete folder by name.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kvlm/base/thread_pool.h"
#include "kvlm/engine/perplexity.h"
#include "kvlm/model/model.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm::cli {

// Adds --threads and --pin-threads to `sub`.
void add_threads_option(CLI::App& sub, ThreadOptions& threads);

struct LoadedModel {
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
  double load_seconds = 0;
};

// Adds --threads, --pin-threads, the KV codec flags (add_kv_quant_options) and --matmul to `sub`.
void add_model_run_options(CLI::App& sub, ThreadOptions& threads, ModelLoadOptions& load);

// --context, --stride, --prefill-chunk and --max-tokens of the verbs that score text in windows.
void add_window_options(CLI::App& sub, PerplexityOptions& window, int64_t& max_tokens);

// Configures the global thread pool, then loads dir's checkpoint (with `load`) and tokenizer. Error if
// dir is not a folder with a config.json.
LoadedModel load_model(const std::string& dir, const ThreadOptions& threads,
                       const ModelLoadOptions& load = {});
// The same without the tokenizer (for models that have none, e.g. the test fixtures).
std::unique_ptr<Model> load_checkpoint(const std::string& dir, const ThreadOptions& threads,
                                       const ModelLoadOptions& load);

}  // namespace kvlm::cli
