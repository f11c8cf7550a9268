// Chat prompts built from request bodies: the body's key order survives into the template, so a
// tool schema printed with tojson reads as the client wrote it (as transformers renders it), not
// key-sorted.
#include <gtest/gtest.h>

#include "kvlm/server/openai_request.h"
#include "kvlm/server/prompt.h"

namespace kvlm::server {
namespace {

const std::string kModelDir = std::string(KVLM_MODELS_DIR) + "/default";

TEST(ChatPrompt, ToolSchemaKeepsTheRequestKeyOrder) {
  const auto tmpl = ChatTemplate::from_string(
      "{% for t in tools %}{{ t.function | tojson }}\n{% endfor %}"
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
  const Tokenizer tokenizer = Tokenizer::from_model_dir(kModelDir);
  const std::string body = R"({
    "messages": [{"role": "user", "content": "Weather?"}],
    "tools": [{"type": "function", "function": {
      "name": "get_weather",
      "parameters": {"type": "object",
                     "properties": {"zip": {"type": "string"}, "city": {"type": "string"}},
                     "required": ["zip"]},
      "description": "Current weather"}}]})";
  const ChatRequest r = parse_chat_request(parse_request_body(body), builtin_defaults());
  const ChatPrompt p = build_chat_prompt(tmpl, tokenizer, r, nullptr);
  EXPECT_EQ(p.rendered,
            R"({"name": "get_weather", "parameters": {"type": "object", "properties": {"zip": {"type": "string"}, )"
            R"("city": {"type": "string"}}, "required": ["zip"]}, "description": "Current weather"})"
            "\nuser: Weather?\n");
}

}  // namespace
}  // namespace kvlm::server
