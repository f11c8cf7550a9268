// Splitting streamed text into content, reasoning and tool calls; collecting engine events.
#include <gtest/gtest.h>

#include "kvlm/server/output.h"

namespace kvlm::server {
namespace {

// Feeds `pieces` one by one; returns the concatenated deltas (content, reasoning). With
// `markers_consumed`, checks that no delta ever carries part of a marker.
OutputDelta feed(OutputSplitter& s, const std::vector<std::string>& pieces, bool markers_consumed = true) {
  OutputDelta all;
  auto add = [&](const OutputDelta& d) {
    if (markers_consumed)
      for (const char* marker : {"<think", "</think", "<tool_call", "think>"}) {
      EXPECT_EQ(d.content.find(marker), std::string::npos) << d.content;
      EXPECT_EQ(d.reasoning.find(marker), std::string::npos) << d.reasoning;
    }
    all.content += d.content;
    all.reasoning += d.reasoning;
  };
  for (const auto& p : pieces) add(s.push(p));
  add(s.finish());
  return all;
}

TEST(OutputSplitter, PlainTextPassesThroughUnchanged) {
  OutputSplitter s(false, true, false);
  const OutputDelta d = feed(s, {"Hello", " wor", "ld <b>", "!"});
  EXPECT_EQ(d.content, "Hello world <b>!");
  EXPECT_EQ(d.reasoning, "");
}

TEST(OutputSplitter, HoldsBackOnlyWhatMightBeAMarker) {
  OutputSplitter s(false, true, false);
  EXPECT_EQ(s.push("a <").content, "a ");
  EXPECT_EQ(s.push("b").content, "<b");
  EXPECT_EQ(s.push("<thi").content, "");
  EXPECT_EQ(s.finish().content, "<thi");  // the end of the stream releases it
}

TEST(OutputSplitter, ThinkBlocksSplitAcrossTokens) {
  OutputSplitter s(false, true, false);
  const OutputDelta d = feed(s, {"<th", "ink>plan", "ning</th", "ink>answer"});
  EXPECT_EQ(d.reasoning, "planning");
  EXPECT_EQ(d.content, "answer");
}

TEST(OutputSplitter, PromptThatOpenedThinkStartsInReasoning) {
  OutputSplitter s(false, true, true);
  const OutputDelta d = feed(s, {"hmm", "</think>", "yes"});
  EXPECT_EQ(d.reasoning, "hmm");
  EXPECT_EQ(d.content, "yes");
}

TEST(OutputSplitter, ReasoningOffKeepsTagsAsText) {
  OutputSplitter s(false, false, true);
  EXPECT_EQ(feed(s, {"<think>x</think>y"}, false).content, "<think>x</think>y");
}

TEST(OutputSplitter, ToolCallMarkupIsWithheldAndParsed) {
  OutputSplitter s(true, true, false);
  const OutputDelta d = feed(s, {"Let me check.", "<tool", "_call>{\"name\": \"get_weather\", ",
                                 "\"arguments\": {\"city\": \"Paris\"}}</tool_call>"});
  EXPECT_EQ(d.content.find("tool_call"), std::string::npos);
  EXPECT_EQ(d.content.rfind("Let me check.", 0), 0u);
  ASSERT_EQ(s.tool_calls().size(), 1u);
  EXPECT_EQ(s.tool_calls()[0].name, "get_weather");
  EXPECT_EQ(Json::parse(s.tool_calls()[0].arguments_json), Json({{"city", "Paris"}}));
}

TEST(OutputSplitter, UnparseableMarkupFallsBackToContent) {
  OutputSplitter s(true, true, false);
  const OutputDelta d = feed(s, {"<tool_call>not json"}, false);
  EXPECT_EQ(d.content, "<tool_call>not json");
  EXPECT_TRUE(s.tool_calls().empty());
}

TEST(OutputSplitter, BareJsonAnswerIsATentativeToolCall) {
  OutputSplitter s(true, true, false);
  const OutputDelta d = feed(s, {"  ", "{\"name\": \"f\", \"parameters\": {\"x\": 1}}"});
  ASSERT_EQ(s.tool_calls().size(), 1u);
  EXPECT_EQ(s.tool_calls()[0].name, "f");
  EXPECT_EQ(d.content.find('{'), std::string::npos);
}

TEST(OutputSplitter, WithoutToolsMarkupIsText) {
  OutputSplitter s(false, true, false);
  EXPECT_EQ(feed(s, {"<tool_call>{}</tool_call>"}, false).content, "<tool_call>{}</tool_call>");
}

Tokenizer default_tokenizer() { return Tokenizer::from_model_dir(std::string(KVLM_MODELS_DIR) + "/default"); }

TokenEvent token_event(int32_t token, std::string text, float logprob = -0.5f) {
  TokenEvent ev;
  ev.token = token;
  ev.text = std::move(text);
  ev.logprob = logprob;
  ev.prompt_tokens = 7;
  ev.cached_tokens = 3;
  return ev;
}

TEST(OutputCollector, FinishReasonsUsageAndLogprobs) {
  const Tokenizer tok = default_tokenizer();
  OutputCollector c(tok, OutputOptions{false, true, false, true, {}});
  const std::vector<int32_t> ids = tok.encode("Hi there", false);
  ASSERT_GE(ids.size(), 2u);
  TokenEvent first = token_event(ids[0], tok.decode(std::vector<int32_t>{ids[0]}, true));
  first.top_logprobs = {{ids[0], -0.5f}, {ids[1], -1.5f}};
  first.completion_tokens = 1;
  c.on_event(first);
  ASSERT_NE(c.last_logprobs(), nullptr);
  EXPECT_EQ(c.last_logprobs()->top.size(), 2u);
  EXPECT_EQ(c.last_logprobs()->sampled.piece, tok.id_to_token(ids[0]));
  TokenEvent last = token_event(ids[1], tok.decode(std::vector<int32_t>{ids[1]}, true));
  last.finished = true;
  last.reason = FinishReason::kLength;
  last.completion_tokens = 2;
  c.on_event(last);
  ASSERT_TRUE(c.finished());
  const FinalOutput& out = c.result();
  EXPECT_EQ(out.openai_finish_reason(), "length");
  EXPECT_EQ(out.anthropic_stop_reason(), "max_tokens");
  EXPECT_EQ(out.usage.prompt_tokens, 7);
  EXPECT_EQ(out.usage.cached_tokens, 3);
  EXPECT_EQ(out.usage.completion_tokens, 2);
  EXPECT_EQ(out.logprobs.size(), 2u);
  EXPECT_EQ(out.content, tok.decode(std::vector<int32_t>{ids[0]}, true) + tok.decode(std::vector<int32_t>{ids[1]}, true));
}

TEST(OutputCollector, TellsWhichStopStringEndedGeneration) {
  const Tokenizer tok = default_tokenizer();
  const std::vector<int32_t> ids = tok.encode("one two three", false);
  OutputCollector c(tok, OutputOptions{false, true, false, false, {"zzz", "two"}});
  for (size_t i = 0; i < ids.size(); ++i) {
    TokenEvent ev = token_event(ids[i], "");
    if (i + 1 == ids.size()) {
      ev.finished = true;
      ev.reason = FinishReason::kStop;
    }
    c.on_event(ev);
  }
  EXPECT_EQ(c.result().stop_sequence, "two");
  EXPECT_EQ(c.result().anthropic_stop_reason(), "stop_sequence");
  EXPECT_EQ(c.result().openai_finish_reason(), "stop");
  EXPECT_EQ(c.last_logprobs(), nullptr);  // not asked for
}

TEST(OutputCollector, EosStopIsEndTurn) {
  const Tokenizer tok = default_tokenizer();
  OutputCollector c(tok, OutputOptions{false, true, false, false, {"never"}});
  TokenEvent ev = token_event(tok.encode("a", false)[0], "a");
  ev.finished = true;
  ev.reason = FinishReason::kStop;
  c.on_event(ev);
  EXPECT_FALSE(c.result().stop_sequence.has_value());
  EXPECT_EQ(c.result().anthropic_stop_reason(), "end_turn");
}

TEST(OutputCollector, ToolCallsWinTheFinishReason) {
  const Tokenizer tok = default_tokenizer();
  OutputCollector c(tok, OutputOptions{true, true, false, false, {}});
  TokenEvent ev = token_event(5, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  ev.finished = true;
  ev.reason = FinishReason::kStop;
  c.on_event(ev);
  EXPECT_EQ(c.result().openai_finish_reason(), "tool_calls");
  EXPECT_EQ(c.result().anthropic_stop_reason(), "tool_use");
  EXPECT_EQ(c.result().tool_calls.size(), 1u);
}

}  // namespace
}  // namespace kvlm::server
