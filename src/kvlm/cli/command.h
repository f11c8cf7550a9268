#pragma once
// Each verb of the kvlm binary lives in its own cmd_<verb>.cpp and registers itself here:
//   static const kvlm::cli::Registration reg{"generate", "Generate text from a prompt", setup};
// `setup` adds the verb's options to its CLI11 subcommand and returns the function that runs it.
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace kvlm::cli {

using Runner = std::function<int()>;
using Setup = std::function<Runner(CLI::App& sub)>;

struct Registration {
  Registration(const char* name, const char* help, Setup setup);
};

struct Command {
  std::string name, help;
  Setup setup;
};
std::vector<Command>& commands();

// The bundled default model's folder: $KVLM_DEFAULT_MODEL, else the source tree's models/default.
std::string default_model_dir();

}  // namespace kvlm::cli
