#pragma once
// Anthropic Messages API (POST /v1/messages): the request translated into the chat request the
// OpenAI path runs, and the response and SSE event grammar translated back:
//   message_start → content_block_start → ping → content_block_delta… → content_block_stop
//   (per block: thinking, text, tool_use) → message_delta → message_stop.
#include <string>

#include "kvlm/base/json.h"
#include "kvlm/server/openai_request.h"
#include "kvlm/server/openai_response.h"
#include "kvlm/server/output.h"

namespace kvlm::server {

// Validates an Anthropic request and converts it: `system` becomes the first message,
// tool_use blocks become assistant tool_calls, tool_result blocks become tool messages,
// thinking blocks are dropped, `stop_sequences` become stop strings, tools' input_schema becomes
// OpenAI function parameters, and thinking.type enabled/disabled sets enable_thinking.
ChatRequest parse_anthropic_request(const RequestJson& body, const SamplingDefaults& defaults);

// Anthropic usage: input_tokens excludes the prompt tokens read from the prefix cache, which are
// reported as cache_read_input_tokens.
Json anthropic_usage_json(const Usage& u);

// The non-streamed message object.
Json anthropic_message_json(const ResponseMeta& m, const FinalOutput& out);

// Produces the SSE events of one streamed message, in order.
class AnthropicStreamEncoder {
 public:
  explicit AnthropicStreamEncoder(ResponseMeta meta) : meta_(std::move(meta)) {}

  // message_start, with the prompt's token count.
  std::string start(int32_t prompt_tokens);
  // Deltas, opening and closing thinking/text blocks as the kind of text changes.
  std::string delta(const OutputDelta& d);
  // Closes the open block, sends each tool call as a tool_use block, then message_delta (stop
  // reason, usage) and message_stop.
  std::string finish(const FinalOutput& out);
  // An error event (the stream ends after it).
  static std::string error(const std::string& type, const std::string& message);

 private:
  enum class Block { kNone, kText, kThinking, kToolUse };
  std::string open(Block kind, Json content_block);
  std::string close();

  ResponseMeta meta_;
  Block open_ = Block::kNone;
  int index_ = -1;
  bool pinged_ = false;
};

}  // namespace kvlm::server
