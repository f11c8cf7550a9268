// kvlm generate [MODEL_DIR] PROMPT: one-shot generation, streamed to stdout, statistics on stderr.
#include <cstdio>
#include <filesystem>
#include <random>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/base/json.h"
#include "kvlm/cli/command.h"
#include "kvlm/cli/model_args.h"
#include "kvlm/engine/generate.h"
#include "kvlm/text/chat_template.h"

namespace kvlm::cli {
namespace {

constexpr const char* kHelp =
    "Generate text from a prompt, streaming it to stdout; prompt and generation speed go to "
    "stderr.\n\n"
    "With one positional argument it is the prompt and the bundled default model is used.\n"
    "The prompt is continued as raw text (encoded with the tokenizer's special tokens, e.g. BOS) "
    "unless --chat is given, which wraps it as a user message (after --system, if any) in the "
    "model's chat template. Raw is the default because a base model, like the bundled one, "
    "continues plain text.\n\n"
    "Sampling defaults: an option given here wins; otherwise, when the model's "
    "generation_config.json sets do_sample: true, its temperature, top_p, top_k, min_p and "
    "repetition_penalty apply (the transformers rule); otherwise greedy decoding (temperature 0). "
    "The sampler follows mlx-lm's chain: logit bias, repetition/presence/frequency penalties, "
    "top-p, min-p, XTC, top-k, then temperature. Generation stops at an EOS token (config.json, "
    "generation_config.json and the tokenizer's eos token), a --stop string or --max-tokens.";

struct Options {
  std::vector<std::string> positional;
  int max_tokens = 256;
  float temp = 0, top_p = 0, min_p = 0, repetition_penalty = 0, presence_penalty = 0, frequency_penalty = 0;
  float xtc_probability = 0, xtc_threshold = 0.1f;
  int top_k = 0, repetition_context_size = 20;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::string system;
  ThreadOptions threads;
  int prefill_chunk = 512;
  ModelLoadOptions load;
  bool chat = false, raw = false, verbose = false;
  // Which sampling options the user gave (the rest fall back to generation_config.json).
  CLI::Option *temp_opt, *top_p_opt, *top_k_opt, *min_p_opt, *rep_opt, *seed_opt;
};

// Sampling defaults from generation_config.json, applied only when it asks for sampling.
void apply_generation_config(const std::string& dir, SamplerParams& p) {
  const std::string path = (std::filesystem::path(dir) / "generation_config.json").string();
  if (!file_exists(path)) return;
  const Json gen = read_json_file(path);
  if (!json_get_or<bool>(gen, "do_sample", false, path)) return;
  p.temperature = json_get_or<float>(gen, "temperature", 1.0f, path);
  p.top_p = json_get_or<float>(gen, "top_p", p.top_p, path);
  p.top_k = json_get_or<int>(gen, "top_k", p.top_k, path);
  p.min_p = json_get_or<float>(gen, "min_p", p.min_p, path);
  p.repetition_penalty = json_get_or<float>(gen, "repetition_penalty", p.repetition_penalty, path);
}

SamplerParams sampler_params(const Options& o, const std::string& dir) {
  SamplerParams p;
  apply_generation_config(dir, p);
  auto given = [](const CLI::Option* opt) { return opt->count() > 0; };
  if (given(o.temp_opt)) p.temperature = o.temp;
  if (given(o.top_p_opt)) p.top_p = o.top_p;
  if (given(o.top_k_opt)) p.top_k = o.top_k;
  if (given(o.min_p_opt)) p.min_p = o.min_p;
  if (given(o.rep_opt)) p.repetition_penalty = o.repetition_penalty;
  p.repetition_context_size = o.repetition_context_size;
  p.presence_penalty = o.presence_penalty;
  p.frequency_penalty = o.frequency_penalty;
  p.xtc_probability = o.xtc_probability;
  p.xtc_threshold = o.xtc_threshold;
  p.seed = given(o.seed_opt) ? o.seed : (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  return p;
}

std::vector<int32_t> encode_prompt(const Options& o, const std::string& dir, const std::string& prompt,
                                   const Tokenizer& tok) {
  if (!o.chat) {
    check(o.system.empty(), "--system needs --chat (a raw prompt has no system message)");
    return tok.encode(prompt, true);
  }
  const auto tmpl = ChatTemplate::from_model_dir(dir);
  check(tmpl.has_value(), "--chat: the model in '" + dir + "' has no chat template");
  Json messages = Json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  messages.push_back({{"role", "user"}, {"content", prompt}});
  const std::string rendered = tmpl->render(messages, ChatTemplateOptions{});
  if (o.verbose) std::fprintf(stderr, "[chat prompt]\n%s\n[end chat prompt]\n", rendered.c_str());
  // The template writes BOS and the other special tokens itself.
  return tok.encode(rendered, false);
}

void print_stats(const GenerationResult& r, double load_seconds) {
  const GenerationStats& s = r.stats;
  std::fprintf(stderr, "prompt: %d tokens, %.1f tokens/s\n", s.prompt_tokens, s.prefill_tokens_per_second());
  std::fprintf(stderr, "generation: %d tokens, %.1f tokens/s (finish: %s)\n", s.generated_tokens,
               s.decode_tokens_per_second(), finish_reason_name(r.finish));
  std::fprintf(stderr, "load: %.3f s, time to first token: %.3f s\n", load_seconds, s.prefill_seconds);
}

int run(const Options& o) {
  const bool default_model = o.positional.size() == 1;
  const std::string dir = default_model ? default_model_dir() : o.positional[0];
  const std::string& prompt = o.positional.back();
  LoadedModel loaded = load_model(dir, o.threads, o.load);
  GenerateOptions gen;
  gen.sampler = sampler_params(o, dir);
  gen.max_tokens = o.max_tokens;
  gen.prefill_chunk = o.prefill_chunk;
  gen.stop_strings = o.stop;
  const std::vector<int32_t> ids = encode_prompt(o, dir, prompt, loaded.tokenizer);
  if (o.verbose)
    std::fprintf(stderr, "model: %s\ntemperature %g, top_p %g, top_k %d, min_p %g, seed %llu\n", dir.c_str(),
                 double(gen.sampler.temperature), double(gen.sampler.top_p), gen.sampler.top_k,
                 double(gen.sampler.min_p), (unsigned long long)gen.sampler.seed);
  const GenerationResult result = generate(*loaded.model, loaded.tokenizer, ids, gen, [](const GeneratedToken& t) {
    std::fwrite(t.text.data(), 1, t.text.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  print_stats(result, loaded.load_seconds);
  return 0;
}

Runner setup(CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.description(kHelp);
  sub.add_option("args", o->positional, "[MODEL_DIR] PROMPT (MODEL_DIR defaults to the bundled model)")
      ->required()
      ->expected(1, 2);
  sub.add_option("--max-tokens,-n", o->max_tokens, "Most tokens to generate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  o->temp_opt = sub.add_option("--temp,--temperature", o->temp, "Sampling temperature; 0 = greedy (ties → lowest id)")
                    ->check(CLI::NonNegativeNumber);
  o->top_p_opt = sub.add_option("--top-p", o->top_p, "Nucleus sampling mass in (0, 1); 0 or 1 = off")
                     ->check(CLI::Range(0.0f, 1.0f));
  o->top_k_opt = sub.add_option("--top-k", o->top_k, "Keep the k most likely tokens; 0 = off")
                     ->check(CLI::NonNegativeNumber);
  o->min_p_opt = sub.add_option("--min-p", o->min_p, "Drop tokens below min_p × the top probability; 0 = off")
                     ->check(CLI::Range(0.0f, 1.0f));
  o->rep_opt = sub.add_option("--repetition-penalty", o->repetition_penalty,
                              "Divide positive / multiply negative logits of recent tokens; 0 = off")
                   ->check(CLI::NonNegativeNumber);
  sub.add_option("--repetition-context-size", o->repetition_context_size,
                 "Window of previous tokens the penalties look at (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub.add_option("--presence-penalty", o->presence_penalty, "Subtracted once from each recent token's logit");
  sub.add_option("--frequency-penalty", o->frequency_penalty, "Subtracted per occurrence of a recent token");
  sub.add_option("--xtc-probability", o->xtc_probability, "Chance that XTC removes the top choices; 0 = off")
      ->check(CLI::Range(0.0f, 1.0f));
  sub.add_option("--xtc-threshold", o->xtc_threshold, "XTC probability threshold in [0, 0.5]")
      ->check(CLI::Range(0.0f, 0.5f))
      ->capture_default_str();
  o->seed_opt = sub.add_option("--seed", o->seed, "Sampling seed (default: random); the same seed gives the same text");
  sub.add_option("--stop", o->stop, "Stop when this string appears (repeatable); it is not printed");
  auto* chat = sub.add_flag("--chat", o->chat, "Wrap the prompt in the model's chat template");
  sub.add_flag("--raw", o->raw, "Continue the prompt as raw text (the default)")->excludes(chat);
  sub.add_option("--system", o->system, "System message (with --chat)");
  add_model_run_options(sub, o->threads, o->load);
  sub.add_option("--prefill-chunk", o->prefill_chunk, "Prompt tokens per forward pass during prefill")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub.add_flag("--verbose,-v", o->verbose, "Print the resolved model, sampling settings and chat prompt to stderr");
  return [o] { return run(*o); };
}

const Registration reg{"generate", "Generate text from a prompt (streams to stdout)", setup};

}  // namespace
}  // namespace kvlm::cli
