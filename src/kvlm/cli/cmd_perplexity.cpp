// kvlm perplexity [MODEL_DIR] --file TEXT: perplexity of a model over a text file.
#include <cstdio>

#include "kvlm/base/file.h"
#include "kvlm/cli/command.h"
#include "kvlm/cli/model_args.h"
#include "kvlm/engine/perplexity.h"

namespace kvlm::cli {
namespace {

constexpr const char* kHelp =
    "Perplexity of a model over a text file, by the strided sliding-window method of Hugging "
    "Face's guide (huggingface.co/docs/transformers/perplexity).\n\n"
    "The whole file is tokenized once, with the tokenizer's special tokens (e.g. a leading BOS), "
    "as transformers' tokenizer(text) does. Windows of --context tokens start every --stride "
    "tokens; each window is a fresh sequence, and it scores only the tokens that no earlier window "
    "scored (its last end - prev_end tokens), each conditioned on all window tokens before it. "
    "The first token has no context and is not scored. Prints the number of tokens, the mean "
    "negative log-likelihood (natural log) over the scored tokens, and perplexity = exp(mean NLL). "
    "With --stride equal to --context the windows do not overlap.";

struct Options {
  std::string model_dir;
  std::string file;
  ThreadOptions threads;
  PerplexityOptions window;
  int64_t max_tokens = 0;
  ModelLoadOptions load;
};

int run(const Options& o) {
  const std::string dir = o.model_dir.empty() ? default_model_dir() : o.model_dir;
  const std::string text = read_file(o.file);
  LoadedModel loaded = load_model(dir, o.threads, o.load);
  std::vector<int32_t> tokens = loaded.tokenizer.encode(text, true);
  if (o.max_tokens > 0 && int64_t(tokens.size()) > o.max_tokens) tokens.resize(size_t(o.max_tokens));
  const PerplexityResult r = perplexity(*loaded.model, tokens, o.window);
  std::printf("tokens: %zu (scored: %lld, windows: %lld, context %d, stride %d)\n", tokens.size(),
              (long long)r.scored_tokens, (long long)r.windows, o.window.context, o.window.stride);
  std::printf("mean NLL: %.6f\nperplexity: %.4f\n", r.mean_nll(), r.perplexity());
  std::fprintf(stderr, "load: %.3f s, evaluation: %.2f s (%.1f scored tokens/s)\n", loaded.load_seconds, r.seconds,
               r.seconds > 0 ? double(r.scored_tokens) / r.seconds : 0.0);
  return 0;
}

Runner setup(CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.description(kHelp);
  sub.add_option("model_dir", o->model_dir, "Model folder (default: the bundled model)");
  sub.add_option("--file,-f", o->file, "UTF-8 text file to evaluate")->required();
  add_window_options(sub, o->window, o->max_tokens);
  add_model_run_options(sub, o->threads, o->load);
  return [o] { return run(*o); };
}

const Registration reg{"perplexity", "Perplexity of a model over a text file (strided sliding windows)", setup};

}  // namespace
}  // namespace kvlm::cli
