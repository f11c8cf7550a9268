#pragma once
// The SSE bytes of one streamed response, per protocol: OpenAI chat, OpenAI/mlx_lm text
// completions, Anthropic messages. Pure: events in, text out.
#include <memory>
#include <string>

#include "kvlm/server/openai_response.h"
#include "kvlm/server/output.h"

namespace kvlm::server {

class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Sent as soon as the request is accepted.
  virtual std::string begin(int32_t prompt_tokens) = 0;
  // One engine event's worth of text; `logprobs` is its token's entry when logprobs were asked.
  virtual std::string delta(const OutputDelta& d, const LogprobEntry* logprobs) = 0;
  // After the final event: finish reason, usage, terminator.
  virtual std::string end(const FinalOutput& out) = 0;
  // A failure mid-stream; the stream ends after it.
  virtual std::string error(const std::string& message) = 0;
};

// chat.completion.chunk stream: a role chunk, content/reasoning deltas (with OpenAI logprobs
// when asked), one tool_calls delta, the finish chunk, an optional usage chunk, [DONE].
std::unique_ptr<StreamWriter> make_chat_stream(ResponseMeta meta, bool include_usage, bool logprobs);
// text_completion stream: text chunks, the finish chunk, an optional usage chunk, [DONE].
std::unique_ptr<StreamWriter> make_completion_stream(ResponseMeta meta, bool include_usage);
// Anthropic's event grammar (see anthropic.h).
std::unique_ptr<StreamWriter> make_anthropic_stream(ResponseMeta meta);

}  // namespace kvlm::server
