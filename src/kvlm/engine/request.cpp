#include "kvlm/engine/request.h"

#include <algorithm>

#include "kvlm/base/error.h"
#include "kvlm/engine/generate.h"

namespace kvlm {

void validate_request(const GenerationRequest& req, const ModelConfig& config) {
  check(!req.prompt.empty(), "the prompt is empty");
  for (int32_t t : req.prompt)
    check(t >= 0 && t < config.vocab_size, "prompt token id " + std::to_string(t) +
                                               " is outside the model's vocabulary of " +
                                               std::to_string(config.vocab_size));
  check(req.max_tokens >= 1, "max_tokens must be at least 1, got " + std::to_string(req.max_tokens));
  check(config.max_position_embeddings <= 0 ||
            int64_t(req.prompt.size()) < config.max_position_embeddings,
        "the prompt has " + std::to_string(req.prompt.size()) +
            " tokens; the model's context limit is " +
            std::to_string(config.max_position_embeddings) + " tokens");
}

std::vector<int32_t> request_end_ids(const GenerationRequest& req,
                                     const std::vector<int32_t>& eos_ids) {
  std::vector<int32_t> ids = req.stop_token_ids;
  if (!req.ignore_eos) ids.insert(ids.end(), eos_ids.begin(), eos_ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

SamplerParams effective_sampler_params(const GenerationRequest& req, const Tokenizer& tokenizer,
                                       const std::vector<int32_t>& eos_ids, int32_t vocab_size) {
  SamplerParams params = req.sampling;
  if (!params.xtc_special_tokens.empty()) return params;
  params.xtc_special_tokens = xtc_protected_tokens(tokenizer, eos_ids, vocab_size);
  return params;
}

OutputStream::OutputStream(const Tokenizer& tokenizer, const GenerationRequest& req,
                           std::vector<int32_t> end_ids, int64_t context_limit)
    : detok_(tokenizer, req.skip_special_tokens),
      stops_(req.stop),
      end_ids_(std::move(end_ids)),
      max_tokens_(req.max_tokens),
      context_limit_(context_limit) {}

std::string OutputStream::flush() {
  std::string tail = stops_.push(detok_.finish());
  if (stops_.stopped()) reason_ = FinishReason::kStop;
  tail += stops_.finish();
  return tail;
}

TokenEvent OutputStream::accept(const SampleResult& sample, int32_t kv_length) {
  TokenEvent ev;
  if (std::binary_search(end_ids_.begin(), end_ids_.end(), sample.token)) {
    // An end id is not part of the text: the event only releases what was held back.
    reason_ = FinishReason::kStop;
    ev.text = flush();
  } else {
    ++completion_tokens_;
    ev.token = sample.token;
    ev.logprob = sample.logprob;
    ev.top_logprobs = sample.top_logprobs;
    ev.text = stops_.push(detok_.push(sample.token));
    const bool context_full = context_limit_ > 0 && kv_length >= context_limit_;
    if (stops_.stopped()) {
      reason_ = FinishReason::kStop;
    } else if (completion_tokens_ >= max_tokens_ || context_full) {
      reason_ = FinishReason::kLength;
      ev.text += flush();
    }
  }
  ev.finished = finished();
  ev.reason = reason_;
  return ev;
}

TokenEvent OutputStream::end(FinishReason reason, std::string error) {
  reason_ = reason;
  TokenEvent ev;
  ev.finished = true;
  ev.reason = reason;
  ev.error = std::move(error);
  return ev;
}

Request::Request(RequestId id_, GenerationRequest req_, TokenCallback on_token_, KVPool& pool,
                 const Tokenizer& tokenizer, const std::vector<int32_t>& eos_ids,
                 const ModelConfig& config)
    : id(id_),
      req(std::move(req_)),
      on_token(std::move(on_token_)),
      sampler(effective_sampler_params(req, tokenizer, eos_ids, config.vocab_size),
              config.vocab_size),
      output(tokenizer, req, request_end_ids(req, eos_ids), config.max_position_embeddings),
      kv(std::make_unique<KVSequence>(pool)),
      history(req.prompt) {
  reserve_tokens = int64_t(req.prompt.size()) + req.max_tokens;
  if (config.max_position_embeddings > 0)
    reserve_tokens = std::min(reserve_tokens, config.max_position_embeddings);
}

int32_t Request::outstanding_blocks() const {
  const int32_t fresh_allocated = int32_t(kv->blocks().size()) - shared_blocks;
  return std::max(reserved_blocks - fresh_allocated, 0);
}

void Request::stamp(TokenEvent& ev) const {
  ev.prompt_tokens = prompt_tokens();
  ev.cached_tokens = cached_tokens;
  ev.completion_tokens = output.completion_tokens();
}

}  // namespace kvlm
