// kvlm: entry point. Parses the verb (serve when none is given), runs it, and turns kvlm::Error
// into one clear line and exit status 1.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string_view>
#include <vector>

#include "kvlm/base/error.h"
#include "kvlm/cli/command.h"

namespace kvlm::cli {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

Registration::Registration(const char* name, const char* help, Setup setup) {
  commands().push_back({name, help, std::move(setup)});
}

std::string default_model_dir() {
  if (const char* env = std::getenv("KVLM_DEFAULT_MODEL")) return env;
  return KVLM_DEFAULT_MODEL_DIR;
}

namespace {

// `kvlm` with no verb is `kvlm serve`, as `mlx_lm.server` is a server first: with no arguments,
// or when the first argument is an option (`kvlm --port 9000`) other than the binary's own
// --help/--version, "serve" is put in front.
std::vector<char*> with_default_verb(int argc, char** argv) {
  static char serve[] = "serve";
  std::vector<char*> args(argv, argv + argc);
  const std::string_view first = argc > 1 ? argv[1] : "";
  const bool own_option = first == "-h" || first == "--help" || first == "--version";
  if (argc == 1 || (first.starts_with('-') && !own_option)) args.insert(args.begin() + 1, serve);
  return args;
}

}  // namespace

}  // namespace kvlm::cli

int main(int argc, char** argv) {
  using namespace kvlm::cli;
  CLI::App app{"kvlm: an LLM inference engine and server (safetensors checkpoints, CPU backend)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvlm 0.1.0");
  std::map<CLI::App*, Runner> runners;
  for (auto& cmd : commands()) {
    // The first line of a verb's help is its summary in `kvlm --help`; the rest is shown by
    // `kvlm <verb> --help` below the options.
    const size_t nl = cmd.help.find('\n');
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.help.substr(0, nl));
    if (nl != std::string::npos) sub->footer(cmd.help.substr(nl + 1));
    runners[sub] = cmd.setup(*sub);
  }
  try {
    std::vector<char*> args = with_default_verb(argc, argv);
    app.parse(int(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const kvlm::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 1;
}
