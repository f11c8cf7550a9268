// libFuzzer target: parse and render arbitrary chat templates against a fixed conversation.
// Any kvlm::Error is an acceptable outcome; crashes, sanitizer reports, hangs and leaks are not.
// The limits are tighter than the defaults so that every input finishes quickly.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kvlm/base/error.h"
#include "kvlm/text/jinja.h"

namespace {

const std::vector<std::pair<std::string, kvlm::jinja::Value>>& conversation() {
  static const auto vars = [] {
    std::vector<std::pair<std::string, kvlm::jinja::Value>> v;
    v.emplace_back("messages", kvlm::jinja::from_json(nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "What's the weather in Paris? ünï 🙂"},
      {"role": "assistant", "content": "<think>x</think>ok", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "x": 1.5}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}])")));
    v.emplace_back("tools", kvlm::jinja::from_json(nlohmann::ordered_json::parse(R"([{"type": "function",
      "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])")));
    v.emplace_back("add_generation_prompt", kvlm::jinja::Value(true));
    v.emplace_back("bos_token", kvlm::jinja::Value("<s>"));
    v.emplace_back("eos_token", kvlm::jinja::Value("</s>"));
    return v;
  }();
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvlm::jinja::Limits limits;
  limits.max_output = 1 << 20;
  limits.max_steps = 200000;
  limits.max_depth = 200;
  limits.max_range = 10000;
  try {
    kvlm::jinja::Template t(std::string_view(reinterpret_cast<const char*>(data), size));
    t.render(conversation(), limits);
  } catch (const kvlm::Error&) {
  }
  return 0;
}
