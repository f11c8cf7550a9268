#pragma once
// What the verbs that run a model share: the --threads option and loading a model folder with
// its tokenizer, reporting a missing or incomplete folder by name.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kvlm/model/model.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm::cli {

// Adds --threads to `sub`, writing into `threads` (0 = one per physical core).
void add_threads_option(CLI::App& sub, int& threads);

struct LoadedModel {
  std::unique_ptr<Model> model;
  Tokenizer tokenizer;
  double load_seconds = 0;
};

// Sizes the global thread pool, then loads dir's checkpoint and tokenizer. Error if dir is not a
// folder with a config.json.
LoadedModel load_model(const std::string& dir, int threads);

}  // namespace kvlm::cli
