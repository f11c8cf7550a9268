// A table of malformed and hostile requests against the real loopback server. Each must get its
// exact 4xx status and message (naming the field at fault), and the server must go on serving:
// a normal request succeeds after every row.
#include <string>
#include <vector>

#include "server_fixture.h"

namespace kvlm::server {
namespace {

using namespace e2e;

struct Case {
  std::string name;
  std::string path;
  std::string body;
  int status;
  std::string message;
  std::string param;  // OpenAI endpoints: the error's param ("" = null)
};

std::string chat_with(Json extra) { return chat("Hi", std::move(extra)).dump(); }
std::string chat_without(const char* key) {
  Json body = chat("Hi");
  body.erase(key);
  return body.dump();
}
std::string with_message(Json message) {
  Json body = chat("Hi");
  body["messages"] = Json::array({std::move(message)});
  return body.dump();
}
std::string nested_arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::vector<Case> cases() {
  const std::string positive = "max_tokens must be a positive integer";
  const std::string roles = "must be one of system, user, assistant, tool, developer";
  return {
      {"bad JSON", "/v1/chat/completions", "{not json", 400,
       "Invalid JSON in request body: parse error at line 1, column 3: syntax error while parsing object key - "
       "invalid literal; last read: '{no'; expected string literal",
       ""},
      {"truncated JSON", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"})", 400,
       "Invalid JSON in request body: parse error at line 1, column 48: syntax error while parsing array - "
       "unexpected end of input; expected ']'",
       ""},
      {"empty body", "/v1/chat/completions", "", 400,
       "Invalid JSON in request body: parse error at line 1, column 1: syntax error while parsing value - "
       "unexpected end of input; expected '[', '{', or a literal",
       ""},
      {"body is an array", "/v1/chat/completions", "[1, 2]", 400, "Request body must be a JSON object", ""},
      {"body is a string", "/v1/completions", R"("Once upon a time")", 400, "Request body must be a JSON object",
       ""},
      {"number too large for a double", "/v1/chat/completions", R"({"max_tokens": 1e400})", 400,
       "Invalid JSON in request body: number overflow parsing '1e400'", ""},
      {"integer beyond 64 bits", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 99999999999999999999})", 400, positive,
       "max_tokens"},
      {"negative max_tokens", "/v1/chat/completions", chat_with({{"max_tokens", -5}}), 400, positive,
       "max_tokens"},
      {"zero max_tokens", "/v1/chat/completions", chat_with({{"max_tokens", 0}}), 400, positive, "max_tokens"},
      {"fractional max_tokens", "/v1/chat/completions", chat_with({{"max_tokens", 1.5}}), 400, positive,
       "max_tokens"},
      {"max_tokens as a string", "/v1/chat/completions", chat_with({{"max_tokens", "16"}}), 400, positive,
       "max_tokens"},
      {"max_completion_tokens negative", "/v1/chat/completions", chat_with({{"max_completion_tokens", -1}}), 400,
       "max_completion_tokens must be a positive integer", "max_completion_tokens"},
      {"temperature as a string", "/v1/chat/completions", chat_with({{"temperature", "hot"}}), 400,
       "temperature must be a non-negative float", "temperature"},
      {"negative temperature", "/v1/chat/completions", chat_with({{"temperature", -1}}), 400,
       "temperature must be a non-negative float", "temperature"},
      {"top_p above 1", "/v1/chat/completions", chat_with({{"top_p", 1.5}}), 400,
       "top_p must be a float between 0 and 1", "top_p"},
      {"negative top_k", "/v1/chat/completions", chat_with({{"top_k", -1}}), 400,
       "top_k must be a non-negative integer", "top_k"},
      {"min_p as an array", "/v1/chat/completions", chat_with({{"min_p", {0.1}}}), 400,
       "min_p must be a float between 0 and 1", "min_p"},
      {"presence_penalty out of range", "/v1/chat/completions", chat_with({{"presence_penalty", 3}}), 400,
       "presence_penalty must be a float between -2 and 2", "presence_penalty"},
      {"seed as a string", "/v1/chat/completions", chat_with({{"seed", "abc"}}), 400, "seed must be an integer",
       "seed"},
      {"stream as a string", "/v1/chat/completions", chat_with({{"stream", "yes"}}), 400,
       "stream must be a boolean", "stream"},
      {"stream_options not an object", "/v1/chat/completions", chat_with({{"stream_options", 1}}), 400,
       "stream_options must be an object", "stream_options"},
      {"model as a number", "/v1/chat/completions", chat_with({{"model", 7}}), 400, "model must be a string",
       "model"},
      {"messages missing", "/v1/chat/completions", chat_without("messages"), 400,
       "messages must be a non-empty array", "messages"},
      {"empty messages", "/v1/chat/completions", chat_with({{"messages", Json::array()}}), 400,
       "messages must be a non-empty array", "messages"},
      {"messages as a string", "/v1/chat/completions", chat_with({{"messages", "Hi"}}), 400,
       "messages must be a non-empty array", "messages"},
      {"message not an object", "/v1/chat/completions", with_message(42), 400, "messages[0] must be an object",
       "messages"},
      {"unknown role", "/v1/chat/completions", with_message({{"role", "wizard"}, {"content", "Hi"}}), 400,
       "messages[0].role " + roles + " (got 'wizard')", "messages"},
      {"role missing", "/v1/chat/completions", with_message({{"content", "Hi"}}), 400,
       "messages[0].role must be a string", "messages"},
      {"content as a number", "/v1/chat/completions", with_message({{"role", "user"}, {"content", 42}}), 400,
       "messages[0].content must be a string or an array of text parts", "messages"},
      {"image content part", "/v1/chat/completions",
       with_message({{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}),
       400, "messages[0].content[0]: only 'text' content parts are supported (got 'image_url')", "messages"},
      {"invalid UTF-8 in content", "/v1/chat/completions",
       "{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xc3\x28\"}]}", 400,
       // The echoed bytes are not UTF-8 either; the error body carries U+FFFD in their place.
       "Invalid JSON in request body: parse error at line 1, column 48: syntax error while parsing value - "
       "invalid string: ill-formed UTF-8 byte; last read: '\"caf\xef\xbf\xbd('",
       ""},
      {"10 MB body", "/v1/chat/completions",
       chat_with({{"messages", {{{"role", "user"}, {"content", std::string(10 << 20, 'a')}}}}}), 413,
       "request body larger than 8388608 bytes", ""},
      {"10000-deep nesting", "/v1/chat/completions", R"({"messages": )" + nested_arrays(10000) + "}", 400,
       "messages[0] must be an object", "messages"},
      {"prompt over the context", "/v1/chat/completions",
       with_message({{"role", "user"}, {"content", std::string(3000, 'x') + " " + std::string(3000, 'y')}}), 400,
       "This model's maximum context length is 2048 tokens. However, you requested 6035 tokens (6011 in the "
       "messages, 24 in the completion). Please reduce the length of the messages or completion.",
       "messages"},
      {"max_tokens over the context", "/v1/chat/completions", chat_with({{"max_tokens", 100000}}), 400,
       "This model's maximum context length is 2048 tokens. However, you requested 100012 tokens (12 in the "
       "messages, 100000 in the completion). Please reduce the length of the messages or completion.",
       "messages"},
      {"top_logprobs above 11", "/v1/chat/completions", chat_with({{"top_logprobs", 12}}), 400,
       "top_logprobs must be at most 11", "top_logprobs"},
      {"top_logprobs below -1", "/v1/chat/completions", chat_with({{"top_logprobs", -2}}), 400,
       "top_logprobs must be at least 0", "top_logprobs"},
      {"top_logprobs as a string", "/v1/chat/completions", chat_with({{"top_logprobs", "3"}}), 400,
       "top_logprobs must be of type int", "top_logprobs"},
      {"logprobs as a string", "/v1/chat/completions", chat_with({{"logprobs", "yes"}}), 400,
       "logprobs must be of type bool", "logprobs"},
      {"n of 2", "/v1/chat/completions", chat_with({{"n", 2}}), 400,
       "n must be 1: one choice per request is supported", "n"},
      {"stop as a number", "/v1/chat/completions", chat_with({{"stop", 5}}), 400,
       "stop must be a string or a list of strings", "stop"},
      {"stop list with a number", "/v1/chat/completions", chat_with({{"stop", {"a", 3}}}), 400,
       "stop must be a string or a list of strings", "stop"},
      {"logit_bias key not a number", "/v1/chat/completions", chat_with({{"logit_bias", {{"abc", 1}}}}), 400,
       "logit_bias must be a dict of int to float", "logit_bias"},
      {"logit_bias negative key", "/v1/chat/completions", chat_with({{"logit_bias", {{"-5", 1}}}}), 400,
       "logit_bias must be a dict of int to float", "logit_bias"},
      {"logit_bias value a string", "/v1/chat/completions", chat_with({{"logit_bias", {{"5", "high"}}}}), 400,
       "logit_bias must be a dict of int to float", "logit_bias"},
      {"logit_bias as a list", "/v1/chat/completions", chat_with({{"logit_bias", {1, 2}}}), 400,
       "logit_bias must be a dict of int to float", "logit_bias"},
      {"logit_bias id past the vocabulary", "/v1/chat/completions", chat_with({{"logit_bias", {{"999999", 1}}}}),
       400, "logit_bias: token id 999999 is outside the vocabulary [0, 8192)", "logit_bias"},
      {"tools not an array", "/v1/chat/completions", chat_with({{"tools", "x"}}), 400, "tools must be an array",
       "tools"},
      {"tool without a function", "/v1/chat/completions", chat_with({{"tools", {{{"type", "function"}}}}}), 400,
       "tools[0].function must be an object", "tools"},
      {"unknown tool_choice", "/v1/chat/completions",
       chat_with({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}, {"tool_choice", "sometimes"}}),
       400, "tool_choice must be 'none', 'auto', 'required' or a function", "tool_choice"},
      {"chat_template_kwargs not an object", "/v1/chat/completions", chat_with({{"chat_template_kwargs", 1}}), 400,
       "chat_template_kwargs must be an object", "chat_template_kwargs"},
      {"completion without a prompt", "/v1/completions", R"({"max_tokens": 4})", 400,
       "prompt must be a non-empty string", "prompt"},
      {"completion with token ids", "/v1/completions", R"({"prompt": [1, 2, 3]})", 400,
       "prompt must be a non-empty string", "prompt"},
      {"anthropic without max_tokens", "/v1/messages", R"({"messages": [{"role": "user", "content": "Hi"}]})",
       400, "max_tokens: Field required", ""},
      {"anthropic system role in messages", "/v1/messages",
       R"({"max_tokens": 4, "messages": [{"role": "system", "content": "Hi"}]})", 400,
       "messages[0].role must be 'user' or 'assistant'", ""},
  };
}

TEST_F(ServerTest, HostileRequestsGetExactErrorsAndTheServerKeepsServing) {
  const auto table = cases();
  ASSERT_GE(table.size(), 30u);
  for (const Case& c : table) {
    SCOPED_TRACE(c.name);
    auto res = client_->Post(c.path.c_str(), c.body, "application/json");
    ASSERT_TRUE(res) << "no response";
    EXPECT_EQ(res->status, c.status) << res->body;
    const Json body = Json::parse(res->body, nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << res->body;
    EXPECT_EQ(body["error"]["message"], c.message);
    if (c.path == "/v1/messages") {
      EXPECT_EQ(body["type"], "error");
    } else {
      EXPECT_EQ(body["error"]["param"], c.param.empty() ? Json(nullptr) : Json(c.param));
    }
    auto ok = post("/v1/chat/completions", chat("Hi", {{"max_tokens", 2}}));
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
  }
  const EngineStats s = wait_idle();
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

// Unknown fields are ignored, as mlx_lm.server does (OpenAI's own API refuses them; kvlm follows
// the server it replaces, so clients that send vendor extensions keep working): the answer is
// the one the same request gets without them.
TEST_F(ServerTest, UnknownFieldsAreIgnored) {
  auto plain = post("/v1/chat/completions", chat("Hi", {{"max_tokens", 6}}));
  auto extra = post("/v1/chat/completions",
                    chat("Hi", {{"max_tokens", 6}, {"frobnicate", true}, {"user", "someone"}, {"metadata", {{"a", 1}}}}));
  ASSERT_EQ(plain->status, 200);
  ASSERT_EQ(extra->status, 200) << extra->body;
  EXPECT_EQ(Json::parse(extra->body)["choices"], Json::parse(plain->body)["choices"]);
}

}  // namespace
}  // namespace kvlm::server
