#pragma once
// From a parsed request to the engine's GenerationRequest: the chat template renders the
// messages, the tokenizer encodes the prompt, and the token limit is resolved against the
// context window.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/engine/engine.h"
#include "kvlm/server/openai_request.h"
#include "kvlm/text/chat_template.h"
#include "kvlm/text/tokenizer.h"

namespace kvlm::server {

struct ChatPrompt {
  std::string rendered;
  std::vector<int32_t> tokens;
  bool starts_in_reasoning = false;  // the template left a <think> open
};

// Renders and encodes a chat request. `template_args` (object or null) are server-wide template
// variables; the request's chat_template_kwargs override them. A template error → 400
// "prompt build failed: …".
ChatPrompt build_chat_prompt(const ChatTemplate& tmpl, const Tokenizer& tokenizer, const ChatRequest& r,
                             const Json& template_args);

// The completion limit: the request's (or the defaults') max_tokens, else `fallback` when given,
// else the rest of the context window. Refuses a prompt plus limit over the window (param names
// the prompt field).
int32_t resolve_max_tokens(const GenerationSettings& s, int64_t prompt_tokens, int64_t context_window,
                           std::optional<int32_t> fallback, const std::string& param);

// The engine request. XTC is told to spare the EOS ids and the newline token(s), as mlx_lm does.
// The sampler settings are checked against the vocabulary here (e.g. a logit_bias id past its
// end), so such a mistake is a 400 naming the value rather than an engine refusal.
GenerationRequest make_generation_request(std::vector<int32_t> prompt, const GenerationSettings& s,
                                          int32_t max_tokens, const std::vector<int32_t>& eos_token_ids,
                                          const Tokenizer& tokenizer, int32_t vocab_size);

}  // namespace kvlm::server
