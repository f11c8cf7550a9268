#pragma once
// Tool calls in generated text. Models announce calls in a handful of formats; this finds them,
// returns them as OpenAI-style calls (arguments as a JSON string), and keeps the text outside the
// call markup as content. Formats:
//   Hermes/Qwen   <tool_call>{"name": ..., "arguments": {...}}</tool_call>   (one or more)
//   Qwen3-Coder   <tool_call><function=NAME><parameter=P>VALUE</parameter></function></tool_call>
//   Llama 3       {"name": ..., "parameters": {...}} as the whole output, optionally after
//                 <|python_tag|>; several may be separated by ';'
//   Mistral       [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] and
//                 [TOOL_CALLS]NAME[ARGS]{...} (repeated for several calls)
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/base/json.h"

namespace kvlm {

struct ToolCall {
  std::string id, name, arguments_json;
};

struct ParsedOutput {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
};

// Splits <think> reasoning (see reasoning.h), then finds tool calls in the rest. Markup that does
// not parse stays in content untouched.
ParsedOutput parse_tool_calls(std::string_view text);

// The same with the request's OpenAI tool definitions: XML-style parameter values are kept as
// strings when the tool's schema says the parameter is a string (otherwise a value that reads
// as JSON, like 42 or true, is decoded), and calls to tools not in the list stay content.
ParsedOutput parse_tool_calls(std::string_view text, const Json& tools);

}  // namespace kvlm
