#pragma once
// OpenAI / mlx_lm.server requests: the JSON body of POST /v1/chat/completions and
// POST /v1/completions, parsed and validated into plain structs. No sockets, no engine: every
// rule here is unit-tested on JSON.
#include <string>
#include <string_view>

#include "kvlm/base/json.h"
#include "kvlm/server/request_fields.h"

namespace kvlm::server {

// Parses a request body; malformed JSON or a body that is not an object → 400.
RequestJson parse_request_body(std::string_view body);

struct ChatRequest {
  GenerationSettings settings;
  RequestJson messages;              // normalized for the chat template (see normalize_messages)
  RequestJson tools;                 // null, or the array of tool definitions
  RequestJson chat_template_kwargs;  // null or object: extra template variables (enable_thinking, …)
};

// Messages as chat templates expect them: the `developer` role becomes `system`, text-part
// arrays are joined into one string, null content becomes "", and tool-call arguments given as
// JSON strings are parsed into objects (templates iterate over them). Errors name the message
// index: empty or non-array messages, unknown roles, non-text parts.
RequestJson normalize_messages(const RequestJson& messages);

// Validates `tools` (an array of {"type": "function", "function": {"name": ...}}) and applies
// tool_choice: "none" drops the tools; "auto", "required" and a named function keep them.
RequestJson parse_tools(const RequestJson& body);

ChatRequest parse_chat_request(const RequestJson& body, const SamplingDefaults& defaults);

struct CompletionRequest {
  GenerationSettings settings;
  std::string prompt;  // raw text, continued without a chat template
};

CompletionRequest parse_completion_request(const RequestJson& body, const SamplingDefaults& defaults);

}  // namespace kvlm::server
