#include "kvlm/engine/generate.h"

#include <algorithm>
#include <chrono>

#include "kvlm/base/error.h"
#include "kvlm/text/detokenizer.h"

namespace kvlm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The logits of the last token after feeding `tokens` into `seq`.
std::vector<float> feed(Model& model, KVSequence& seq, std::span<const int32_t> tokens, int chunk) {
  std::vector<float> logits;
  const int32_t last = int32_t(tokens.size()) - 1;
  prefill(model, seq, tokens, chunk, {&last, 1},
          [&](std::span<const int32_t>, const Tensor& t) { logits = t.to_f32_vector(); });
  return logits;
}

void check_prompt(std::span<const int32_t> prompt, const ModelConfig& config) {
  check(!prompt.empty(), "the prompt is empty (it encodes to no tokens)");
  for (int32_t t : prompt)
    check(t >= 0 && t < config.vocab_size, "prompt token id " + std::to_string(t) +
                                               " is outside the model's vocabulary of " +
                                               std::to_string(config.vocab_size));
  check(config.max_position_embeddings <= 0 || int64_t(prompt.size()) < config.max_position_embeddings,
        "the prompt has " + std::to_string(prompt.size()) + " tokens; the model's context is " +
            std::to_string(config.max_position_embeddings) + " tokens");
}

// mlx-lm protects the newline and EOS tokens from XTC, so that XTC never forces a text to run on.
}  // namespace

std::vector<int32_t> xtc_protected_tokens(const Tokenizer& tokenizer, const std::vector<int32_t>& eos,
                                          int32_t vocab_size) {
  std::vector<int32_t> out = tokenizer.encode("\n", false);
  out.insert(out.end(), eos.begin(), eos.end());
  std::erase_if(out, [&](int32_t t) { return t < 0 || t >= vocab_size; });
  return out;
}

void prefill(Model& model, KVSequence& seq, std::span<const int32_t> tokens, int chunk,
             std::span<const int32_t> rows, const LogitsSink& sink) {
  check(chunk >= 1, "the prefill chunk must be at least 1 token, got " + std::to_string(chunk));
  check(std::is_sorted(rows.begin(), rows.end()) &&
            (rows.empty() || (rows.front() >= 0 && size_t(rows.back()) < tokens.size())),
        "prefill: logit rows must be ascending indices into the tokens");
  size_t next_row = 0;
  std::vector<int32_t> wanted;
  for (size_t begin = 0; begin < tokens.size(); begin += size_t(chunk)) {
    const size_t end = std::min(begin + size_t(chunk), tokens.size());
    Batch batch;
    batch.tokens.assign(tokens.begin() + long(begin), tokens.begin() + long(end));
    batch.seqs = {{&seq, seq.length(), int32_t(end - begin)}};
    wanted.clear();
    for (; next_row < rows.size() && size_t(rows[next_row]) < end; ++next_row) {
      wanted.push_back(rows[next_row]);
      batch.logit_rows.push_back(rows[next_row] - int32_t(begin));
    }
    // A chunk without wanted rows still returns its last row's logits (the forward API has no
    // "none"); they are dropped.
    const Tensor logits = model.forward(batch);
    if (!wanted.empty()) sink(wanted, logits);
  }
}

std::vector<int32_t> stop_token_ids(const ModelConfig& config, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids = config.eos_token_ids;
  if (auto eos = tokenizer.eos_token_id()) ids.push_back(*eos);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? decode_steps / decode_seconds : 0.0;
}

GenerationResult generate(Model& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                          const GenerateOptions& options, const GenerateCallback& on_token) {
  const ModelConfig& config = model.config();
  check_prompt(prompt, config);
  check(options.max_tokens >= 1, "max_tokens must be at least 1, got " + std::to_string(options.max_tokens));
  const std::vector<int32_t> eos = stop_token_ids(config, tokenizer);
  SamplerParams params = options.sampler;
  if (params.xtc_special_tokens.empty())
    params.xtc_special_tokens = xtc_protected_tokens(tokenizer, eos, config.vocab_size);
  const Sampler sampler(std::move(params), config.vocab_size);
  StopStringMatcher stops(options.stop_strings);
  StreamingDetokenizer detok(tokenizer, options.skip_special_tokens);
  GenerationResult result;
  auto emit = [&](int32_t token, const std::string& text, const SampleResult* sample) {
    result.text += text;
    if (on_token) on_token(GeneratedToken{token, text, sample});
  };

  result.stats.prompt_tokens = int(prompt.size());
  KVSequence seq(model.kv_pool());
  const Clock::time_point start = Clock::now();
  std::vector<float> logits = feed(model, seq, prompt, options.prefill_chunk);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  Clock::time_point first_token;
  for (uint64_t step = 0;; ++step) {
    const SampleResult sample = sampler.sample(logits, history, step);
    if (step == 0) first_token = Clock::now();
    if (std::binary_search(eos.begin(), eos.end(), sample.token)) {
      result.finish = FinishReason::kStop;
      break;
    }
    history.push_back(sample.token);
    result.tokens.push_back(sample.token);
    emit(sample.token, stops.push(detok.push(sample.token)), &sample);
    if (stops.stopped()) {
      result.finish = FinishReason::kStop;
      break;
    }
    const bool context_full = config.max_position_embeddings > 0 && seq.length() >= config.max_position_embeddings;
    if (int(result.tokens.size()) >= options.max_tokens || context_full) {
      result.finish = FinishReason::kLength;
      break;
    }
    const int32_t token = sample.token;
    logits = feed(model, seq, {&token, 1}, 1);
    ++result.stats.decode_steps;
  }
  if (!stops.stopped()) {
    std::string tail = stops.push(detok.finish());
    if (stops.stopped()) result.finish = FinishReason::kStop;
    tail += stops.finish();
    if (!tail.empty()) emit(-1, tail, nullptr);
  }
  const Clock::time_point end = Clock::now();
  result.stats.generated_tokens = int(result.tokens.size());
  result.stats.prefill_seconds = seconds_between(start, first_token);
  result.stats.decode_seconds = seconds_between(first_token, end);
  return result;
}

}  // namespace kvlm
