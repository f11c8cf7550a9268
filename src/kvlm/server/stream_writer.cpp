#include "kvlm/server/stream_writer.h"

#include "kvlm/server/anthropic.h"

namespace kvlm::server {

namespace {

// OpenAI streams report failures as a data event carrying an error object.
std::string openai_stream_error(const std::string& message) {
  return sse_data({{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", nullptr}}}});
}

class ChatStream : public StreamWriter {
 public:
  ChatStream(ResponseMeta meta, bool include_usage, bool logprobs)
      : meta_(std::move(meta)), include_usage_(include_usage), logprobs_(logprobs) {}

  std::string begin(int32_t) override {
    return sse_data(chat_chunk_json(meta_, {{"role", "assistant"}, {"content", ""}}, nullptr));
  }

  std::string delta(const OutputDelta& d, const LogprobEntry* lp) override {
    const bool with_logprobs = logprobs_ && lp;
    if (d.empty() && !with_logprobs) return "";
    Json logprobs = with_logprobs ? Json{{"content", Json::array({chat_logprob_entry_json(*lp)})}} : Json(nullptr);
    return sse_data(chat_chunk_json(meta_, chat_text_delta_json(d), nullptr, std::move(logprobs)));
  }

  std::string end(const FinalOutput& out) override {
    std::string s;
    if (!out.tool_calls.empty())
      s += sse_data(chat_chunk_json(meta_, {{"tool_calls", tool_calls_json(out.tool_calls, true)}}, nullptr));
    s += sse_data(chat_chunk_json(meta_, Json::object(), out.openai_finish_reason()));
    if (include_usage_) s += sse_data(usage_chunk_json(meta_, "chat.completion.chunk", out.usage));
    return s + sse_done();
  }

  std::string error(const std::string& message) override { return openai_stream_error(message); }

 private:
  ResponseMeta meta_;
  bool include_usage_, logprobs_;
};

class CompletionStream : public StreamWriter {
 public:
  CompletionStream(ResponseMeta meta, bool include_usage) : meta_(std::move(meta)), include_usage_(include_usage) {}

  std::string begin(int32_t) override { return ""; }

  std::string delta(const OutputDelta& d, const LogprobEntry*) override {
    // Raw completions collect with reasoning off, so all text is content.
    return d.content.empty() ? "" : sse_data(completion_chunk_json(meta_, d.content, nullptr));
  }

  std::string end(const FinalOutput& out) override {
    std::string s = sse_data(completion_chunk_json(meta_, "", out.openai_finish_reason()));
    if (include_usage_) s += sse_data(usage_chunk_json(meta_, "text_completion", out.usage));
    return s + sse_done();
  }

  std::string error(const std::string& message) override { return openai_stream_error(message); }

 private:
  ResponseMeta meta_;
  bool include_usage_;
};

class AnthropicStream : public StreamWriter {
 public:
  explicit AnthropicStream(ResponseMeta meta) : encoder_(std::move(meta)) {}
  std::string begin(int32_t prompt_tokens) override { return encoder_.start(prompt_tokens); }
  std::string delta(const OutputDelta& d, const LogprobEntry*) override { return encoder_.delta(d); }
  std::string end(const FinalOutput& out) override { return encoder_.finish(out); }
  std::string error(const std::string& message) override {
    return AnthropicStreamEncoder::error("api_error", message);
  }

 private:
  AnthropicStreamEncoder encoder_;
};

}  // namespace

std::unique_ptr<StreamWriter> make_chat_stream(ResponseMeta meta, bool include_usage, bool logprobs) {
  return std::make_unique<ChatStream>(std::move(meta), include_usage, logprobs);
}

std::unique_ptr<StreamWriter> make_completion_stream(ResponseMeta meta, bool include_usage) {
  return std::make_unique<CompletionStream>(std::move(meta), include_usage);
}

std::unique_ptr<StreamWriter> make_anthropic_stream(ResponseMeta meta) {
  return std::make_unique<AnthropicStream>(std::move(meta));
}

}  // namespace kvlm::server
