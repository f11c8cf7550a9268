#include "kvlm/server/prompt.h"

#include <algorithm>

#include "kvlm/base/error.h"
#include "kvlm/server/api_error.h"
#include "kvlm/text/reasoning.h"

namespace kvlm::server {

ChatPrompt build_chat_prompt(const ChatTemplate& tmpl, const Tokenizer& tokenizer, const ChatRequest& r,
                             const Json& template_args) {
  RequestJson extra = template_args.is_object() ? RequestJson(template_args) : RequestJson::object();
  if (r.chat_template_kwargs.is_object())
    for (const auto& [k, v] : r.chat_template_kwargs.items()) extra[k] = v;
  ChatPrompt p;
  try {
    // The ordered overload, so tool schemas and arguments print in the client's key order.
    p.rendered = tmpl.render(r.messages, /*add_generation_prompt=*/true, r.tools, extra);
  } catch (const Error& e) {
    throw invalid_request(std::string("prompt build failed: ") + e.what(), "messages");
  }
  // The template writes BOS and the other special tokens itself.
  p.tokens = tokenizer.encode(p.rendered, false);
  if (p.tokens.empty()) throw invalid_request("the rendered prompt is empty", "messages");
  p.starts_in_reasoning = prompt_ends_in_open_think(p.rendered);
  return p;
}

int32_t resolve_max_tokens(const GenerationSettings& s, int64_t prompt_tokens, int64_t context_window,
                           std::optional<int32_t> fallback, const std::string& param) {
  int64_t n;
  if (s.max_tokens) n = *s.max_tokens;
  else if (fallback) n = std::min<int64_t>(*fallback, std::max<int64_t>(1, context_window - prompt_tokens));
  else n = std::max<int64_t>(1, context_window - prompt_tokens);
  check_context_length(prompt_tokens, n, context_window, param);
  return int32_t(n);
}

GenerationRequest make_generation_request(std::vector<int32_t> prompt, const GenerationSettings& s,
                                          int32_t max_tokens, const std::vector<int32_t>& eos_token_ids,
                                          const Tokenizer& tokenizer, int32_t vocab_size) {
  GenerationRequest req;
  req.prompt = std::move(prompt);
  req.sampling = s.sampling;
  req.max_tokens = max_tokens;
  req.stop = s.stop;
  req.ignore_eos = s.ignore_eos;
  if (req.sampling.xtc_probability > 0 && req.sampling.xtc_special_tokens.empty()) {
    std::vector<int32_t> special = eos_token_ids;
    for (int32_t id : tokenizer.encode("\n", false)) special.push_back(id);
    std::sort(special.begin(), special.end());
    special.erase(std::unique(special.begin(), special.end()), special.end());
    req.sampling.xtc_special_tokens = std::move(special);
  }
  try {
    Sampler check_only(req.sampling, vocab_size);
  } catch (const Error& e) {
    // request_fields has already range-checked every other sampler setting, so what is left to
    // fail here is a logit_bias token id past the vocabulary.
    throw invalid_request(e.what(), "logit_bias");
  }
  return req;
}

}  // namespace kvlm::server
