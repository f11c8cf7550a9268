// Response bodies, stream chunks and SSE framing for the OpenAI, mlx_lm and Anthropic protocols.
#include <gtest/gtest.h>

#include "kvlm/server/anthropic.h"
#include "kvlm/server/openai_response.h"
#include "kvlm/server/stream_writer.h"

namespace kvlm::server {
namespace {

const ResponseMeta kMeta{"chatcmpl-1", 1700000000, "tiny"};

FinalOutput sample_output() {
  FinalOutput out;
  out.content = "Hello";
  out.reason = FinishReason::kStop;
  out.usage = Usage{10, 2, 4};
  return out;
}

// Splits an SSE stream into its events' data payloads, checking the framing on the way: every
// event ends with a blank line and every data line starts with "data: ".
std::vector<std::string> sse_payloads(const std::string& stream, std::vector<std::string>* events = nullptr) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t end = stream.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event at " << pos;
    if (end == std::string::npos) break;
    const std::string block = stream.substr(pos, end - pos);
    size_t line_start = 0;
    while (line_start <= block.size()) {
      size_t nl = block.find('\n', line_start);
      if (nl == std::string::npos) nl = block.size();
      const std::string line = block.substr(line_start, nl - line_start);
      if (line.rfind("event: ", 0) == 0) {
        if (events) events->push_back(line.substr(7));
      } else {
        EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
        out.push_back(line.substr(6));
      }
      line_start = nl + 1;
    }
    pos = end + 2;
  }
  return out;
}

TEST(OpenAiResponse, ChatCompletionShape) {
  const Json j = chat_completion_json(kMeta, sample_output(), false);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"], Json::parse(R"({"role": "assistant", "content": "Hello"})"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"], Json::parse(R"({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12,
                                         "prompt_tokens_details": {"cached_tokens": 4}})"));
}

TEST(OpenAiResponse, ToolCallsMapToOpenAiShape) {
  FinalOutput out = sample_output();
  out.content = "";
  out.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris"})"}};
  const Json j = chat_completion_json(kMeta, out, false);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"], Json::parse(R"([{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}])"));
  EXPECT_EQ(tool_calls_json(out.tool_calls, true)[0]["index"], 0);
}

TEST(OpenAiResponse, ReasoningIsANonStandardMessageField) {
  FinalOutput out = sample_output();
  out.reasoning = "thought";
  EXPECT_EQ(chat_completion_json(kMeta, out, false)["choices"][0]["message"]["reasoning"], "thought");
}

LogprobEntry entry() {
  return LogprobEntry{{5, "Hi", "ĠHi", -0.25f}, {{5, "Hi", "ĠHi", -0.25f}, {9, "Yo", "ĠYo", -2.0f}}};
}

TEST(OpenAiResponse, ChatLogprobsInOpenAiShape) {
  FinalOutput out = sample_output();
  out.logprobs = {entry()};
  const Json j = chat_completion_json(kMeta, out, true)["choices"][0]["logprobs"];
  EXPECT_EQ(j, Json::parse(R"({"content": [{"token": "Hi", "logprob": -0.25, "bytes": [72, 105],
      "top_logprobs": [{"token": "Hi", "logprob": -0.25, "bytes": [72, 105]},
                       {"token": "Yo", "logprob": -2.0, "bytes": [89, 111]}]}]})"));
}

TEST(OpenAiResponse, CompletionLogprobsInMlxLmShape) {
  FinalOutput out = sample_output();
  out.logprobs = {entry()};
  Json j = completion_json(kMeta, out, 2, true);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Hello");
  EXPECT_EQ(j["choices"][0]["logprobs"], Json::parse(R"({"content": [{"id": 5, "token": "ĠHi", "logprob": -0.25,
      "top_logprobs": [{"id": 5, "token": "ĠHi", "logprob": -0.25}, {"id": 9, "token": "ĠYo", "logprob": -2.0}]}]})"));
  j = completion_json(kMeta, out, 0, true);
  EXPECT_EQ(j["choices"][0]["logprobs"], Json::parse(R"({"content": [{"id": 5, "logprob": -0.25}]})"));
  EXPECT_TRUE(completion_json(kMeta, out, 0, false)["choices"][0]["logprobs"].is_null());
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_data(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_EQ(sse_event("ping", Json{{"type", "ping"}}), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  // Invalid UTF-8 from a partial token is replaced, never thrown on.
  EXPECT_EQ(sse_data(Json{{"t", std::string("a\xff")}}), "data: {\"t\":\"a\xEF\xBF\xBD\"}\n\n");
}

TEST(ChatStream, ChunkSequence) {
  auto w = make_chat_stream(kMeta, true, false);
  std::string s = w->begin(10);
  s += w->delta({"Hel", ""}, nullptr);
  s += w->delta({"", ""}, nullptr);  // nothing to say: no chunk
  s += w->delta({"lo", ""}, nullptr);
  s += w->end(sample_output());
  const auto payloads = sse_payloads(s);
  ASSERT_EQ(payloads.size(), 6u);
  const Json first = Json::parse(payloads[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], Json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(Json::parse(payloads[1])["choices"][0]["delta"]["content"], "Hel");
  EXPECT_EQ(Json::parse(payloads[2])["choices"][0]["delta"]["content"], "lo");
  const Json fin = Json::parse(payloads[3]);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(fin["choices"][0]["delta"], Json::object());
  const Json usage = Json::parse(payloads[4]);
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(payloads[5], "[DONE]");
}

TEST(ChatStream, ToolCallsAndLogprobsChunks) {
  auto w = make_chat_stream(kMeta, false, true);
  const LogprobEntry e = entry();
  const auto lp = sse_payloads(w->delta({"Hi", ""}, &e));
  ASSERT_EQ(lp.size(), 1u);
  EXPECT_EQ(Json::parse(lp[0])["choices"][0]["logprobs"]["content"][0]["token"], "Hi");
  FinalOutput out = sample_output();
  out.tool_calls = {{"call_1", "f", "{}"}};
  const auto payloads = sse_payloads(w->end(out));
  ASSERT_EQ(payloads.size(), 3u);  // tool_calls delta, finish, [DONE] (no usage asked)
  EXPECT_EQ(Json::parse(payloads[0])["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(Json::parse(payloads[1])["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(payloads[2], "[DONE]");
}

TEST(ChatStream, ErrorEventNamesTheFailure) {
  auto w = make_chat_stream(kMeta, false, false);
  const auto payloads = sse_payloads(w->error("generation failed: boom"));
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(Json::parse(payloads[0])["error"]["message"], "generation failed: boom");
}

TEST(CompletionStream, TextChunksThenFinish) {
  auto w = make_completion_stream({"cmpl-1", 1, "tiny"}, false);
  std::string s = w->begin(3) + w->delta({"Once", ""}, nullptr) + w->end(sample_output());
  const auto payloads = sse_payloads(s);
  ASSERT_EQ(payloads.size(), 3u);
  EXPECT_EQ(Json::parse(payloads[0])["object"], "text_completion");
  EXPECT_EQ(Json::parse(payloads[0])["choices"][0]["text"], "Once");
  EXPECT_EQ(Json::parse(payloads[1])["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(payloads[2], "[DONE]");
}

TEST(AnthropicResponse, MessageShape) {
  FinalOutput out = sample_output();
  out.tool_calls = {{"toolu_1", "f", R"({"x": 1})"}};
  const Json j = anthropic_message_json({"msg_1", 1, "tiny"}, out);
  EXPECT_EQ(j, Json::parse(R"({"id": "msg_1", "type": "message", "role": "assistant", "model": "tiny",
      "content": [{"type": "text", "text": "Hello"},
                  {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}}],
      "stop_reason": "tool_use", "stop_sequence": null,
      "usage": {"input_tokens": 6, "output_tokens": 2, "cache_read_input_tokens": 4,
                "cache_creation_input_tokens": 0}})"));
}

TEST(AnthropicResponse, StopSequenceReported) {
  FinalOutput out = sample_output();
  out.stop_sequence = "END";
  const Json j = anthropic_message_json({"msg_1", 1, "tiny"}, out);
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "END");
}

TEST(AnthropicStream, EventGrammar) {
  auto w = make_anthropic_stream({"msg_1", 1, "tiny"});
  std::string s = w->begin(10);
  s += w->delta({"", "hmm"}, nullptr);
  s += w->delta({"Hel", ""}, nullptr);
  s += w->delta({"lo", ""}, nullptr);
  FinalOutput out = sample_output();
  out.tool_calls = {{"toolu_1", "f", R"({"x": 1})"}};
  s += w->end(out);
  std::vector<std::string> events;
  const auto payloads = sse_payloads(s, &events);
  const std::vector<std::string> expected = {
      "message_start",       "content_block_start", "ping",  // thinking block 0
      "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",  // text 1
      "content_block_start", "content_block_delta", "content_block_stop",  // tool_use 2
      "message_delta",       "message_stop"};
  EXPECT_EQ(events, expected);
  ASSERT_EQ(payloads.size(), expected.size());
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(Json::parse(payloads[i])["type"], events[i]);
  EXPECT_EQ(Json::parse(payloads[0])["message"]["usage"]["input_tokens"], 10);
  EXPECT_EQ(Json::parse(payloads[1])["content_block"]["type"], "thinking");
  EXPECT_EQ(Json::parse(payloads[3])["delta"], Json::parse(R"({"type": "thinking_delta", "thinking": "hmm"})"));
  EXPECT_EQ(Json::parse(payloads[6])["delta"], Json::parse(R"({"type": "text_delta", "text": "Hel"})"));
  EXPECT_EQ(Json::parse(payloads[6])["index"], 1);
  EXPECT_EQ(Json::parse(payloads[9])["content_block"]["type"], "tool_use");
  EXPECT_EQ(Json::parse(payloads[10])["delta"], Json::parse(R"({"type": "input_json_delta", "partial_json": "{\"x\": 1}"})"));
  const Json md = Json::parse(payloads[12]);
  EXPECT_EQ(md["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(md["usage"]["output_tokens"], 2);
}

TEST(AnthropicStream, EmptyAnswerStillHasATextBlock) {
  auto w = make_anthropic_stream({"msg_1", 1, "tiny"});
  FinalOutput out = sample_output();
  out.content = "";
  std::vector<std::string> events;
  sse_payloads(w->begin(1) + w->end(out), &events);
  EXPECT_EQ(events, (std::vector<std::string>{"message_start", "content_block_start", "ping", "content_block_stop",
                                              "message_delta", "message_stop"}));
}

}  // namespace
}  // namespace kvlm::server
