#pragma once
// OpenAI / mlx_lm.server response bodies and stream chunks, built from plain structs.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/base/json.h"
#include "kvlm/server/output.h"

namespace kvlm::server {

// The fields every response object of one request repeats.
struct ResponseMeta {
  std::string id;       // "chatcmpl-…", "cmpl-…" or "msg_…"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// prefix + 24 random hex digits.
std::string new_response_id(std::string_view prefix);
ResponseMeta make_meta(std::string_view id_prefix, std::string model);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
Json usage_json(const Usage& u);
// OpenAI tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}]; stream
// deltas also number them with "index".
Json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index);

// OpenAI chat logprobs content entry: {"token", "logprob", "bytes", "top_logprobs": [...]}.
Json chat_logprob_entry_json(const LogprobEntry& e);
// mlx_lm.server's logprobs block (text completions): {"content": [...]} with
// {id, token, logprob, top_logprobs: [{id, token, logprob}]} entries when top_logprobs > 0,
// else {id, logprob}.
Json mlx_logprobs_json(const std::vector<LogprobEntry>& entries, int top_logprobs);

// Non-streamed chat.completion.
Json chat_completion_json(const ResponseMeta& m, const FinalOutput& out, bool logprobs);
// A chat.completion.chunk with one choice. `finish_reason` is null or a string; `logprobs` null
// or the choice's logprobs object.
Json chat_chunk_json(const ResponseMeta& m, Json delta, Json finish_reason,
                     Json logprobs = nullptr);
// The delta object for streamed text: {"content": ...} and/or {"reasoning": ...}.
Json chat_text_delta_json(const OutputDelta& d);
// The trailing chunk of stream_options.include_usage: no choices, just usage.
Json usage_chunk_json(const ResponseMeta& m, std::string_view object, const Usage& u);

// Non-streamed text_completion.
Json completion_json(const ResponseMeta& m, const FinalOutput& out, int logprobs_top,
                     bool logprobs);
Json completion_chunk_json(const ResponseMeta& m, const std::string& text, Json finish_reason);

// Serializes a response. Generated text can hold invalid UTF-8 (a byte-level token decoded on
// its own); such bytes become U+FFFD instead of making the serializer throw.
std::string dump_json(const Json& j);

// Server-sent events framing.
std::string sse_data(const Json& payload);                          // "data: {...}\n\n"
std::string sse_done();                                             // "data: [DONE]\n\n"
std::string sse_event(std::string_view event, const Json& payload); // "event: e\ndata: {...}\n\n"

}  // namespace kvlm::server
