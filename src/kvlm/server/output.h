#pragma once
// From engine events to what a response says: the streamed text is split into content, reasoning
// (<think>…</think>) and tool-call markup, which is withheld while streaming and parsed into
// tool calls at the end; logprobs, usage and the finish reason are collected on the way. A
// non-streamed response is the concatenation of the same deltas, so both agree by construction.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/engine/engine.h"
#include "kvlm/text/tokenizer.h"
#include "kvlm/text/tool_calls.h"

namespace kvlm::server {

struct OutputDelta {
  std::string content, reasoning;
  bool empty() const { return content.empty() && reasoning.empty(); }
};

// Splits streamed text. Text that might be the start of a marker is held back until the next
// push decides it, so no marker ever leaks half-way into a delta.
class OutputSplitter {
 public:
  // `tools`: watch for tool-call markup (only when the request offered tools).
  // `reasoning`: route <think>…</think> to reasoning (chat); off, all text is content (raw
  // completions). `starts_in_reasoning`: the prompt ended inside an open <think>.
  OutputSplitter(bool tools, bool reasoning, bool starts_in_reasoning);

  OutputDelta push(std::string_view text);
  // Releases held text, parses the withheld markup into tool calls (markup that does not parse
  // is released as content) and returns the last delta.
  OutputDelta finish();
  const std::vector<ToolCall>& tool_calls() const { return tool_calls_; }

 private:
  enum class Mode { kContent, kReasoning, kWithheld };
  OutputDelta drain(bool final);
  bool step_content(OutputDelta& d, bool final);  // true: continue draining
  bool step_reasoning(OutputDelta& d, bool final);

  bool tools_, reasoning_;
  Mode mode_;
  bool content_started_ = false;  // a non-space content character has been emitted
  std::string pending_, withheld_;
  std::vector<ToolCall> tool_calls_;
};

// One generated token's logprob report, with its text resolved for the response formats.
struct TopLogprob {
  int32_t token = 0;
  std::string text;   // the token decoded on its own
  std::string piece;  // the raw vocabulary piece (mlx_lm.server reports this as "token")
  float logprob = 0;
};
struct LogprobEntry {
  TopLogprob sampled;
  std::vector<TopLogprob> top;
};

struct Usage {
  int32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

struct OutputOptions {
  bool tools = false;
  bool reasoning = true;  // split <think> blocks out of the content
  bool starts_in_reasoning = false;
  bool logprobs = false;
  std::vector<std::string> stop;  // to tell which stop string ended generation (Anthropic)
};

// Everything a response needs once generation has ended.
struct FinalOutput {
  std::string content, reasoning;
  std::vector<ToolCall> tool_calls;
  FinishReason reason = FinishReason::kNone;
  std::optional<std::string> stop_sequence;  // the stop string that ended generation, if any
  std::string error;                         // reason kError
  Usage usage;
  std::vector<LogprobEntry> logprobs;
  // OpenAI's finish_reason: "tool_calls" when calls were parsed, else "stop" or "length".
  std::string openai_finish_reason() const;
  // Anthropic's stop_reason: tool_use, stop_sequence, max_tokens or end_turn.
  std::string anthropic_stop_reason() const;
};

// Consumes one request's TokenEvents in order.
class OutputCollector {
 public:
  OutputCollector(const Tokenizer& tokenizer, OutputOptions options);

  // Returns what may be streamed now. On the final event the delta includes everything
  // released at the end (held text, unparsed markup).
  OutputDelta on_event(const TokenEvent& ev);
  bool finished() const { return finished_; }
  // The logprob entry of the most recent token event, when logprobs were asked for.
  const LogprobEntry* last_logprobs() const;
  const FinalOutput& result() const { return out_; }

 private:
  TopLogprob describe(int32_t token, float logprob) const;
  void finalize();

  const Tokenizer& tokenizer_;
  OutputOptions options_;
  OutputSplitter splitter_;
  std::vector<int32_t> tokens_;
  bool finished_ = false;
  bool last_had_token_ = false;
  FinalOutput out_;
};

}  // namespace kvlm::server
