// Anthropic Messages requests: validation and translation into the chat request.
#include <gtest/gtest.h>

#include "kvlm/server/anthropic.h"
#include "kvlm/server/api_error.h"

namespace kvlm::server {
namespace {

ChatRequest parse(const char* json) { return parse_anthropic_request(Json::parse(json), builtin_defaults()); }

std::string error_of(const char* json) {
  try {
    parse(json);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.what();
  }
  return "(accepted)";
}

TEST(AnthropicRequest, TranslatesSystemToolsAndBlocks) {
  const ChatRequest r = parse(R"({
      "model": "claude", "max_tokens": 32, "system": [{"type": "text", "text": "be brief"}],
      "stop_sequences": ["END", ""], "temperature": 0.3, "top_k": 5, "stream": true,
      "thinking": {"type": "disabled"},
      "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}],
      "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "x"},
                                          {"type": "text", "text": "checking"},
                                          {"type": "tool_use", "id": "t1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "sunny"}]},
                                     {"type": "text", "text": "thanks"}]}]})");
  EXPECT_EQ(r.settings.max_tokens, 32);
  EXPECT_TRUE(r.settings.stream);
  EXPECT_FLOAT_EQ(r.settings.sampling.temperature, 0.3f);
  EXPECT_EQ(r.settings.sampling.top_k, 5);
  EXPECT_EQ(r.settings.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  // Compared as key-sorted documents: the key order kept from the request is not in question here.
  EXPECT_EQ(Json(r.tools), Json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "d",
                                      "parameters": {"type": "object"}}}])"));
  const Json& m = r.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], Json::parse(R"({"role": "system", "content": "be brief"})"));
  EXPECT_EQ(m[1], Json::parse(R"({"role": "user", "content": "weather?"})"));
  EXPECT_EQ(m[2]["content"], "checking");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], Json({{"city", "Paris"}}));
  EXPECT_EQ(m[3], Json::parse(R"({"role": "tool", "tool_call_id": "t1", "content": "sunny"})"));
  EXPECT_EQ(m[4], Json::parse(R"({"role": "user", "content": "thanks"})"));
}

TEST(AnthropicRequest, ToolChoiceNoneDropsTools) {
  const ChatRequest r = parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
      "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "none"}})");
  EXPECT_TRUE(r.tools.is_null());
}

TEST(AnthropicRequest, Refusals) {
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "x"}]})"), "max_tokens: Field required");
  EXPECT_EQ(error_of(R"({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})"),
            "max_tokens must be a positive integer");
  EXPECT_EQ(error_of(R"({"max_tokens": 5, "messages": []})"), "messages must be a non-empty array");
  EXPECT_EQ(error_of(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})"),
            "messages[0].role must be 'user' or 'assistant'");
  EXPECT_EQ(error_of(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]})"),
            "messages[0].content[0]: unsupported content block type 'image'");
  EXPECT_EQ(error_of(R"({"max_tokens": 5, "system": 3, "messages": [{"role": "user", "content": "x"}]})"),
            "system must be a string or an array of text blocks");
  EXPECT_EQ(error_of(R"({"max_tokens": 5, "stop_sequences": "x", "messages": [{"role": "user", "content": "x"}]})"),
            "(accepted)");  // a single string is accepted like OpenAI's stop
  EXPECT_EQ(error_of(R"({"max_tokens": 5, "stop_sequences": [1], "messages": [{"role": "user", "content": "x"}]})"),
            "stop_sequences must be a string or a list of strings");
  EXPECT_EQ(error_of(R"({"max_tokens": 5, "tools": [{}], "messages": [{"role": "user", "content": "x"}]})"),
            "tools[0].name must be a string");
}

}  // namespace
}  // namespace kvlm::server
