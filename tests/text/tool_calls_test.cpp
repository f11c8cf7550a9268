#include <gtest/gtest.h>

#include "kvlm/text/tool_calls.h"

namespace kvlm {
namespace {

void expect_call(const ToolCall& c, const std::string& name, const std::string& args) {
  EXPECT_EQ(c.name, name);
  EXPECT_EQ(c.arguments_json, args);
  EXPECT_EQ(c.id.rfind("call_", 0), 0u) << c.id;
}

TEST(ToolCalls, HermesJson) {
  auto out = parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"celsius\"}}\n</tool_call>");
  EXPECT_EQ(out.content, "Let me check.");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  expect_call(out.tool_calls[0], "get_weather", R"({"city":"Paris","unit":"celsius"})");
}

TEST(ToolCalls, HermesSeveralCallsAndDistinctIds) {
  auto out = parse_tool_calls(
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
      "\"arguments\": {\"x\": 1}}\n</tool_call>");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  expect_call(out.tool_calls[0], "a", "{}");
  expect_call(out.tool_calls[1], "b", R"({"x":1})");
  EXPECT_NE(out.tool_calls[0].id, out.tool_calls[1].id);
  // Ids depend only on the output, so the same text parses to the same ids.
  EXPECT_EQ(out.tool_calls[1].id, parse_tool_calls("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"
                                                   "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": 1}}</tool_call>")
                                      .tool_calls[1]
                                      .id);
}

TEST(ToolCalls, HermesUnclosedLastCall) {
  auto out = parse_tool_calls("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}\n");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  expect_call(out.tool_calls[0], "a", R"({"q":"x"})");
}

TEST(ToolCalls, ReasoningIsSplitFirst) {
  auto out = parse_tool_calls(
      "<think>\nNeed the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}\n</tool_call>");
  EXPECT_EQ(out.reasoning, "Need the weather.");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
}

TEST(ToolCalls, QwenCoderXml) {
  auto out = parse_tool_calls(
      "<tool_call>\n<function=search>\n<parameter=query>\nParis events\n</parameter>\n<parameter=max_results>\n3\n"
      "</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  expect_call(out.tool_calls[0], "search", R"({"query":"Paris events","max_results":3})");
}

TEST(ToolCalls, QwenCoderXmlKeepsStringsWhenTheSchemaSaysString) {
  Json tools = Json::parse(R"([{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object",
      "properties": {"code": {"type": "string"}, "n": {"type": "integer"}}}}}])");
  auto out = parse_tool_calls(
      "<tool_call>\n<function=lookup>\n<parameter=code>\n007\n</parameter>\n<parameter=n>\n2\n</parameter>\n"
      "</function>\n</tool_call>",
      tools);
  ASSERT_EQ(out.tool_calls.size(), 1u);
  expect_call(out.tool_calls[0], "lookup", R"({"code":"007","n":2})");
}

TEST(ToolCalls, UnknownToolStaysContent) {
  Json tools = Json::parse(R"([{"type": "function", "function": {"name": "known"}}])");
  std::string text = "<tool_call>{\"name\": \"other\", \"arguments\": {}}</tool_call>";
  auto out = parse_tool_calls(text, tools);
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_EQ(out.content, text);
}

TEST(ToolCalls, BrokenJsonStaysContent) {
  std::string text = "<tool_call>{\"name\": \"a\", \"arguments\": {</tool_call>";
  auto out = parse_tool_calls(text);
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_EQ(out.content, text);
}

TEST(ToolCalls, Llama3Json) {
  auto out = parse_tool_calls("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  expect_call(out.tool_calls[0], "get_weather", R"({"city":"Paris"})");
}

TEST(ToolCalls, Llama3PythonTagAndSeveralCalls) {
  auto out = parse_tool_calls(
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"x;y\"}}; {\"name\": \"b\", \"parameters\": {}}");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  expect_call(out.tool_calls[0], "a", R"({"s":"x;y"})");
  expect_call(out.tool_calls[1], "b", "{}");
}

TEST(ToolCalls, PlainJsonThatIsNotACallIsContent) {
  auto out = parse_tool_calls("{\"answer\": 42}");
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_EQ(out.content, "{\"answer\": 42}");
}

TEST(ToolCalls, MistralArray) {
  auto out = parse_tool_calls(
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123def\"}, "
      "{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}]");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].id, "abc123def");
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"city":"Paris"})");
  expect_call(out.tool_calls[1], "search", R"({"query":"x"})");
}

TEST(ToolCalls, MistralNameArgsForm) {
  auto out = parse_tool_calls("Calling.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]search[ARGS]{}");
  EXPECT_EQ(out.content, "Calling.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  expect_call(out.tool_calls[0], "get_weather", R"({"city":"Paris"})");
  expect_call(out.tool_calls[1], "search", "{}");
}

TEST(ToolCalls, ArgumentsGivenAsAStringAreKept) {
  auto out = parse_tool_calls("<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call>");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments_json, R"({"k": 1})");
}

TEST(ToolCalls, PlainTextIsContent) {
  auto out = parse_tool_calls("Paris is the capital.");
  EXPECT_EQ(out.content, "Paris is the capital.");
  EXPECT_TRUE(out.tool_calls.empty());
  EXPECT_EQ(out.reasoning, "");
}

}  // namespace
}  // namespace kvlm
