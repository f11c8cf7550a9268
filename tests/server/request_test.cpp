// Request parsing and validation: every refusal, with its exact message and field.
#include <gtest/gtest.h>

#include "kvlm/server/api_error.h"
#include "kvlm/server/openai_request.h"
#include "kvlm/server/request_fields.h"

namespace kvlm::server {
namespace {

Json chat_body(Json extra = Json::object()) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// The ApiError a chat body raises (status must be 400).
ApiError chat_error(const Json& body) {
  try {
    parse_chat_request(body, builtin_defaults());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return ApiError(0, "", "");
}

struct Case {
  const char* json;  // extra fields merged into a valid chat body
  const char* message;
  const char* param;
};

TEST(ChatValidation, EveryFieldErrorNamesTheFieldWithMlxLmWording) {
  const Case cases[] = {
      {R"({"stream": "yes"})", "stream must be a boolean", "stream"},
      {R"({"stream_options": 3})", "stream_options must be an object", "stream_options"},
      {R"({"stream_options": {"include_usage": 1}})", "stream_options.include_usage must be a boolean",
       "stream_options"},
      {R"({"model": 5})", "model must be a string", "model"},
      {R"({"max_tokens": -1})", "max_tokens must be a positive integer", "max_tokens"},
      {R"({"max_tokens": 0})", "max_tokens must be a positive integer", "max_tokens"},
      {R"({"max_tokens": 1.5})", "max_tokens must be a positive integer", "max_tokens"},
      {R"({"max_tokens": "10"})", "max_tokens must be a positive integer", "max_tokens"},
      {R"({"max_tokens": 1e300})", "max_tokens must be a positive integer", "max_tokens"},
      {R"({"max_tokens": 99999999999})", "max_tokens must be a positive integer", "max_tokens"},
      {R"({"max_completion_tokens": -3})", "max_completion_tokens must be a positive integer",
       "max_completion_tokens"},
      {R"({"temperature": -0.1})", "temperature must be a non-negative float", "temperature"},
      {R"({"temperature": "hot"})", "temperature must be a non-negative float", "temperature"},
      {R"({"top_p": 1.5})", "top_p must be a float between 0 and 1", "top_p"},
      {R"({"top_k": -1})", "top_k must be a non-negative integer", "top_k"},
      {R"({"top_k": 2.5})", "top_k must be a non-negative integer", "top_k"},
      {R"({"min_p": 2})", "min_p must be a float between 0 and 1", "min_p"},
      {R"({"repetition_penalty": -1})", "repetition_penalty must be a non-negative float",
       "repetition_penalty"},
      {R"({"repetition_context_size": -1})", "repetition_context_size must be a non-negative integer",
       "repetition_context_size"},
      {R"({"presence_penalty": 3})", "presence_penalty must be a float between -2 and 2",
       "presence_penalty"},
      {R"({"frequency_penalty": -2.5})", "frequency_penalty must be a float between -2 and 2",
       "frequency_penalty"},
      {R"({"xtc_probability": 1.5})", "xtc_probability must be a float between 0.00 and 1.00",
       "xtc_probability"},
      {R"({"xtc_threshold": 0.6})", "xtc_threshold must be a float between 0.00 and 0.5",
       "xtc_threshold"},
      {R"({"seed": 1.5})", "seed must be an integer", "seed"},
      {R"({"logprobs": 1})", "logprobs must be of type bool", "logprobs"},
      {R"({"top_logprobs": "3"})", "top_logprobs must be of type int", "top_logprobs"},
      {R"({"top_logprobs": -2})", "top_logprobs must be at least 0", "top_logprobs"},
      {R"({"top_logprobs": 12})", "top_logprobs must be at most 11", "top_logprobs"},
      {R"({"logit_bias": [1]})", "logit_bias must be a dict of int to float", "logit_bias"},
      {R"({"logit_bias": {"a": 1}})", "logit_bias must be a dict of int to float", "logit_bias"},
      {R"({"logit_bias": {"12x": 1}})", "logit_bias must be a dict of int to float", "logit_bias"},
      {R"({"logit_bias": {"-1": 1}})", "logit_bias must be a dict of int to float", "logit_bias"},
      {R"({"logit_bias": {"5": "up"}})", "logit_bias must be a dict of int to float", "logit_bias"},
      {R"({"stop": 3})", "stop must be a string or a list of strings", "stop"},
      {R"({"stop": ["a", 1]})", "stop must be a string or a list of strings", "stop"},
      {R"({"ignore_eos": 1})", "ignore_eos must be a boolean", "ignore_eos"},
      {R"({"n": 2})", "n must be 1: one choice per request is supported", "n"},
      {R"({"tools": {}})", "tools must be an array", "tools"},
      {R"({"tools": [{"type": "function"}]})", "tools[0].function must be an object", "tools"},
      {R"({"tools": [{"type": "function", "function": {}}]})", "tools[0].function.name must be a string",
       "tools"},
      {R"({"tools": [], "tool_choice": "maybe"})",
       "tool_choice must be 'none', 'auto', 'required' or a function", "tool_choice"},
      {R"({"chat_template_kwargs": []})", "chat_template_kwargs must be an object",
       "chat_template_kwargs"},
      {R"({"messages": []})", "messages must be a non-empty array", "messages"},
      {R"({"messages": "hi"})", "messages must be a non-empty array", "messages"},
      {R"({"messages": [3]})", "messages[0] must be an object", "messages"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role must be a string", "messages"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})",
       "messages[0].role must be one of system, user, assistant, tool, developer (got 'wizard')",
       "messages"},
      {R"({"messages": [{"role": "user", "content": 7}]})",
       "messages[0].content must be a string or an array of text parts", "messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]: only 'text' content parts are supported (got 'image_url')", "messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "messages[0].content[0].text must be a string", "messages"},
      {R"({"messages": [{"role": "user", "content": [5]}]})",
       "messages[0].content[0] must be an object with a type", "messages"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    const ApiError e = chat_error(chat_body(Json::parse(c.json)));
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(std::string(e.what()), c.message);
    EXPECT_EQ(e.param(), c.param);
    EXPECT_EQ(e.type(), "invalid_request_error");
  }
}

TEST(ChatValidation, MissingMessages) {
  const ApiError e = chat_error(Json{{"model", "x"}});
  EXPECT_STREQ(e.what(), "messages must be a non-empty array");
}

TEST(ChatValidation, NullMeansUnset) {
  const ChatRequest r = parse_chat_request(
      chat_body({{"temperature", nullptr}, {"stop", nullptr}, {"max_tokens", nullptr}}), builtin_defaults());
  EXPECT_EQ(r.settings.sampling.temperature, 0.0f);
  EXPECT_TRUE(r.settings.stop.empty());
  EXPECT_FALSE(r.settings.max_tokens.has_value());
}

TEST(ChatParsing, ReadsEverySamplingField) {
  const ChatRequest r = parse_chat_request(chat_body(Json::parse(R"({
      "model": "m", "stream": true, "stream_options": {"include_usage": true},
      "max_tokens": 9, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7,
      "repetition_penalty": 1.1, "repetition_context_size": 30,
      "presence_penalty": 0.5, "presence_context_size": 10,
      "frequency_penalty": -0.5, "frequency_context_size": 0,
      "xtc_probability": 0.5, "xtc_threshold": 0.1, "logit_bias": {"17": -100, "3": 2.5},
      "logprobs": true, "top_logprobs": 3, "stop": ["x", "", "yz"], "n": 1})")),
                                           builtin_defaults());
  const GenerationSettings& s = r.settings;
  EXPECT_EQ(s.model, "m");
  EXPECT_TRUE(s.stream);
  EXPECT_TRUE(s.include_usage);
  EXPECT_EQ(s.max_tokens, 9);
  const SamplerParams& p = s.sampling;
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.repetition_context_size, 30);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_EQ(p.presence_context_size, 10);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_EQ(p.frequency_context_size, 0);
  EXPECT_FLOAT_EQ(p.xtc_probability, 0.5f);
  EXPECT_FLOAT_EQ(p.xtc_threshold, 0.1f);
  EXPECT_EQ(p.logit_bias, (std::map<int32_t, float>{{3, 2.5f}, {17, -100.0f}}));
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 3);
  EXPECT_EQ(p.top_logprobs, 3);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"x", "yz"}));
}

TEST(ChatParsing, MaxCompletionTokensWinsAndStopMayBeAString) {
  const ChatRequest r = parse_chat_request(
      chat_body({{"max_tokens", 5}, {"max_completion_tokens", 8}, {"stop", "END"}}), builtin_defaults());
  EXPECT_EQ(r.settings.max_tokens, 8);
  EXPECT_EQ(r.settings.stop, std::vector<std::string>{"END"});
}

TEST(ChatParsing, TopLogprobsImpliesLogprobsAndMinusOneMeansOff) {
  auto r = parse_chat_request(chat_body({{"top_logprobs", 2}}), builtin_defaults());
  EXPECT_TRUE(r.settings.logprobs);
  r = parse_chat_request(chat_body({{"top_logprobs", -1}}), builtin_defaults());
  EXPECT_FALSE(r.settings.logprobs);
  EXPECT_EQ(r.settings.top_logprobs, 0);
}

TEST(Messages, NormalizedForTheTemplate) {
  const Json in = Json::parse(R"([
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null,
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}])");
  const Json out = normalize_messages(in);
  EXPECT_EQ(out[0]["role"], "system");
  EXPECT_EQ(out[1]["content"], "ab");
  EXPECT_EQ(out[2]["content"], "");
  EXPECT_EQ(out[2]["tool_calls"][0]["function"]["arguments"], Json({{"x", 1}}));
  EXPECT_EQ(out[3]["tool_call_id"], "c1");
}

TEST(Tools, ToolChoiceNoneDropsTools) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_TRUE(parse_chat_request(chat_body({{"tools", tools}, {"tool_choice", "none"}}), builtin_defaults())
                  .tools.is_null());
  EXPECT_EQ(parse_chat_request(chat_body({{"tools", tools}, {"tool_choice", "auto"}}), builtin_defaults()).tools,
            tools);
  EXPECT_EQ(parse_chat_request(chat_body({{"tools", tools}}), builtin_defaults()).tools, tools);
}

TEST(ChatParsing, ReasoningEffortSetsEnableThinkingUnlessKwargsDo) {
  auto r = parse_chat_request(chat_body({{"reasoning_effort", "none"}}), builtin_defaults());
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  r = parse_chat_request(chat_body({{"reasoning_effort", "high"}}), builtin_defaults());
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
  r = parse_chat_request(
      chat_body({{"reasoning_effort", "high"}, {"chat_template_kwargs", {{"enable_thinking", false}}}}),
      builtin_defaults());
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
}

TEST(Completions, PromptMustBeANonEmptyString) {
  for (const char* body : {R"({})", R"({"prompt": ""})", R"({"prompt": 5})", R"({"prompt": ["a"]})"}) {
    SCOPED_TRACE(body);
    try {
      parse_completion_request(Json::parse(body), builtin_defaults());
      ADD_FAILURE() << "accepted";
    } catch (const ApiError& e) {
      EXPECT_STREQ(e.what(), "prompt must be a non-empty string");
      EXPECT_EQ(e.param(), "prompt");
    }
  }
  EXPECT_EQ(parse_completion_request(Json{{"prompt", "Once"}}, builtin_defaults()).prompt, "Once");
}

TEST(Body, MalformedJsonAndNonObjects) {
  for (const char* body : {"{", "", "nul", "{\"a\":}", "\xff\xfe"}) {
    SCOPED_TRACE(body);
    try {
      parse_request_body(body);
      ADD_FAILURE();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(std::string(e.what()).rfind("Invalid JSON in request body: ", 0), 0u) << e.what();
    }
  }
  for (const char* body : {"[]", "3", "\"x\"", "null"}) {
    try {
      parse_request_body(body);
      ADD_FAILURE();
    } catch (const ApiError& e) {
      EXPECT_STREQ(e.what(), "Request body must be a JSON object");
    }
  }
}

TEST(Defaults, RequestThenFlagThenGenerationConfigThenBuiltin) {
  SamplingDefaults flags;
  flags.top_k = 5;
  flags.max_tokens = 77;
  const SamplingDefaults gen = generation_config_defaults(
      Json::parse(R"({"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95})"), "g");
  const SamplingDefaults d = merge_defaults(flags, merge_defaults(gen, builtin_defaults()));
  EXPECT_EQ(d.top_k, 5);                 // flag beats generation_config
  EXPECT_FLOAT_EQ(*d.temperature, 0.6f); // generation_config beats built-in
  EXPECT_FLOAT_EQ(*d.top_p, 0.95f);
  EXPECT_FLOAT_EQ(*d.min_p, 0.0f);       // built-in
  const ChatRequest r = parse_chat_request(chat_body({{"temperature", 0.2}}), d);
  EXPECT_FLOAT_EQ(r.settings.sampling.temperature, 0.2f);  // request beats all
  EXPECT_EQ(r.settings.sampling.top_k, 5);
  EXPECT_EQ(r.settings.max_tokens, 77);
}

TEST(Defaults, GenerationConfigWithoutSamplingPinsGreedy) {
  const SamplingDefaults none = generation_config_defaults(Json::parse(R"({"eos_token_id": 2})"), "g");
  EXPECT_FALSE(none.temperature.has_value());
  const SamplingDefaults greedy = generation_config_defaults(
      Json::parse(R"({"do_sample": false, "temperature": 0.9, "max_new_tokens": 100})"), "g");
  EXPECT_EQ(greedy.temperature, 0.0f);
  EXPECT_EQ(greedy.max_tokens, 100);
  const SamplingDefaults sampled = generation_config_defaults(Json::parse(R"({"do_sample": true})"), "g");
  EXPECT_EQ(sampled.temperature, 1.0f);
}

TEST(Defaults, SeedFromDefaultsOrFreshPerRequest) {
  SamplingDefaults d = builtin_defaults();
  d.seed = 1234;
  EXPECT_EQ(parse_chat_request(chat_body(), d).settings.sampling.seed, 1234u);
  const uint64_t a = parse_chat_request(chat_body(), builtin_defaults()).settings.sampling.seed;
  const uint64_t b = parse_chat_request(chat_body(), builtin_defaults()).settings.sampling.seed;
  EXPECT_NE(a, b);
}

TEST(ContextLength, RefusedWithOpenAiCodeAndMessage) {
  EXPECT_NO_THROW(check_context_length(10, 22, 32, "messages"));
  try {
    check_context_length(10, 23, 32, "messages");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_STREQ(e.what(),
                 "This model's maximum context length is 32 tokens. However, you requested 33 tokens "
                 "(10 in the messages, 23 in the completion). Please reduce the length of the messages "
                 "or completion.");
    EXPECT_EQ(e.code(), "context_length_exceeded");
    EXPECT_EQ(e.param(), "messages");
  }
}

TEST(ErrorBodies, OpenAiAndAnthropicShapes) {
  const ApiError e = invalid_request("top_p must be a float between 0 and 1", "top_p");
  EXPECT_EQ(openai_error_body(e), Json::parse(R"({"error": {"message": "top_p must be a float between 0 and 1",
      "type": "invalid_request_error", "param": "top_p", "code": null}})"));
  EXPECT_EQ(anthropic_error_body(e), Json::parse(R"({"type": "error", "error": {
      "type": "invalid_request_error", "message": "top_p must be a float between 0 and 1"}})"));
  EXPECT_EQ(anthropic_error_body(ApiError(404, "not found", "not_found_error"))["error"]["type"],
            "not_found_error");
}

}  // namespace
}  // namespace kvlm::server
