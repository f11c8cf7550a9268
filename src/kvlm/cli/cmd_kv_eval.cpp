// kvlm kv-eval [MODEL_DIR] --file TEXT --kv-quant SCHEME: teacher-forced quality of a KV codec
// against a baseline cache on the same text.
#include <cstdio>
#include <random>

#include "kvlm/base/file.h"
#include "kvlm/cli/command.h"
#include "kvlm/cli/model_args.h"
#include "kvlm/engine/engine_flags.h"
#include "kvlm/engine/perplexity.h"

namespace kvlm::cli {
namespace {

constexpr const char* kHelp =
    "Teacher-forced comparison of a KV cache codec (--kv-quant) against a baseline cache "
    "(--baseline, default bf16) on the same text: the model is loaded twice, differing only in its "
    "KV codec, and both run the sliding windows of `kvlm perplexity`. At every scored position it "
    "compares the next-token distributions: mean KL(baseline || codec), top-1 agreement (the same "
    "argmax token), and the perplexity of both with the relative change. Prefill reads the cache "
    "through the codec exactly as decode does, so these are the decode path's figures. The last "
    "line is a Markdown table row: scheme, bits per element, KV bytes per token, perplexity, "
    "change, mean KL, top-1 agreement. --baseline-matmul exact --matmul int8 with --kv-quant equal "
    "to --baseline measures the int8 linear path of a quantized model instead of a codec. "
    "--random-tokens evaluates uniformly random token ids "
    "instead of a text, for models without a tokenizer (the random test fixtures).";

struct Options {
  std::string model_dir, file, baseline = "bf16";
  ThreadOptions threads;
  PerplexityOptions window;
  int64_t max_tokens = 0, random_tokens = 0;
  ModelLoadOptions load;
  ops::MatmulPath baseline_matmul = ops::MatmulPath::kExact;
  CLI::Option* baseline_matmul_flag = nullptr;  // unset: the baseline uses --matmul
};

std::vector<int32_t> random_ids(int64_t n, int32_t vocab) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> t(size_t(n), 0);
  for (int32_t& x : t) x = id(rng);
  return t;
}

// A pool's scheme: its codec's name, or "config" plus each layer's when they differ.
std::string scheme_name(const KVPool& pool) {
  std::string name = pool.codec(0).name(), layers;
  bool mixed = false;
  for (int l = 0; l < pool.config().n_layers; ++l) {
    mixed |= pool.codec(l).name() != name;
    layers += (l ? "," : "") + pool.codec(l).name();
  }
  return mixed ? "config [" + layers + "]" : name;
}

double bits_per_element(const KVPool& pool) {
  const KVPoolConfig& c = pool.config();
  return double(pool.bytes_per_token()) * 8.0 / (double(c.n_layers) * c.n_kv_heads * 2 * c.head_dim);
}

int run(const Options& o) {
  const std::string dir = o.model_dir.empty() ? default_model_dir() : o.model_dir;
  ModelLoadOptions base_load = o.load;
  base_load.kv_quant = KVQuantOptions{o.baseline, 0, ""};
  if (o.baseline_matmul_flag->count() > 0) base_load.matmul = o.baseline_matmul;
  const std::unique_ptr<Model> test = load_checkpoint(dir, o.threads, o.load);
  const std::unique_ptr<Model> base = load_checkpoint(dir, o.threads, base_load);
  std::vector<int32_t> tokens = o.random_tokens > 0
                                    ? random_ids(o.random_tokens, test->config().vocab_size)
                                    : Tokenizer::from_model_dir(dir).encode(read_file(o.file), true);
  if (o.max_tokens > 0 && int64_t(tokens.size()) > o.max_tokens) tokens.resize(size_t(o.max_tokens));
  const KVEvalResult r = kv_eval(*base, *test, tokens, o.window);
  const KVPool& tp = test->kv_pool();
  const KVPool& bp = base->kv_pool();
  const double delta = 100.0 * (r.perplexity_test() / r.perplexity_baseline() - 1.0);
  std::printf("scheme: %s\nbaseline: %s\n", scheme_name(tp).c_str(), scheme_name(bp).c_str());
  std::printf("matmul: %s (baseline %s)\n", matmul_path_name(o.load.matmul),
              matmul_path_name(base_load.matmul));
  std::printf("tokens: %zu (scored: %lld, context %d, stride %d)\n", tokens.size(),
              (long long)r.scored_tokens, o.window.context, o.window.stride);
  std::printf("bits per element: %.3f (baseline %.3f)\n", bits_per_element(tp), bits_per_element(bp));
  std::printf("KV bytes per token: %lld (baseline %lld)\n", (long long)tp.bytes_per_token(),
              (long long)bp.bytes_per_token());
  std::printf("perplexity: %.4f (baseline %.4f, change %+.3f%%)\n", r.perplexity_test(),
              r.perplexity_baseline(), delta);
  std::printf("mean KL: %.6g\ntop-1 agreement: %.4f\n", r.mean_kl(), r.top1_agreement());
  std::printf("| %s | %.2f | %lld | %.3f | %+.2f%% | %.4g | %.2f%% |\n", scheme_name(tp).c_str(),
              bits_per_element(tp), (long long)tp.bytes_per_token(), r.perplexity_test(), delta,
              r.mean_kl(), 100.0 * r.top1_agreement());
  std::fprintf(stderr, "evaluation: %.2f s\n", r.seconds);
  return 0;
}

Runner setup(CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.description(kHelp);
  sub.add_option("model_dir", o->model_dir, "Model folder (default: the bundled model)");
  auto* file = sub.add_option("--file,-f", o->file, "UTF-8 text file to evaluate");
  auto* random = sub.add_option("--random-tokens", o->random_tokens,
                                "Evaluate this many random token ids (seed 1) instead of a file")
                     ->check(CLI::PositiveNumber);
  file->excludes(random);
  sub.callback([file, random] {
    if (file->count() + random->count() == 0) throw CLI::RequiredError("--file or --random-tokens");
  });
  sub.add_option("--baseline", o->baseline, "The reference cache, a --kv-quant spelling")
      ->capture_default_str();
  add_window_options(sub, o->window, o->max_tokens);
  add_model_run_options(sub, o->threads, o->load);
  o->baseline_matmul_flag = add_matmul_option(sub, o->baseline_matmul, "--baseline-matmul",
                                              "The baseline's --matmul (default: the same as --matmul)");
  return [o] { return run(*o); };
}

const Registration reg{"kv-eval", "Quality of a KV cache codec against a baseline cache (KL, top-1, perplexity)", setup};

}  // namespace
}  // namespace kvlm::cli
