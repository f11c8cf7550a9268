#include "kvlm/server/openai_response.h"

#include <chrono>
#include <random>

namespace kvlm::server {

std::string new_response_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  uint64_t a = rng(), b = rng();
  for (int i = 0; i < 16; ++i, a >>= 4) id += kHex[a & 15];
  for (int i = 0; i < 8; ++i, b >>= 4) id += kHex[b & 15];
  return id;
}

ResponseMeta make_meta(std::string_view id_prefix, std::string model) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return ResponseMeta{new_response_id(id_prefix),
                      std::chrono::duration_cast<std::chrono::seconds>(now).count(),
                      std::move(model)};
}

Json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

Json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments_json}}}};
    if (with_index) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

// The bytes of a token's text, as OpenAI reports them (tokens may split UTF-8 characters).
Json utf8_bytes(const std::string& s) {
  Json out = Json::array();
  for (unsigned char c : s) out.push_back(int(c));
  return out;
}

Json top_entry_json(const TopLogprob& t) {
  return {{"token", t.text}, {"logprob", t.logprob}, {"bytes", utf8_bytes(t.text)}};
}

}  // namespace

Json chat_logprob_entry_json(const LogprobEntry& e) {
  Json j = top_entry_json(e.sampled);
  Json top = Json::array();
  for (const TopLogprob& t : e.top) top.push_back(top_entry_json(t));
  j["top_logprobs"] = std::move(top);
  return j;
}

Json mlx_logprobs_json(const std::vector<LogprobEntry>& entries, int top_logprobs) {
  Json content = Json::array();
  for (const LogprobEntry& e : entries) {
    if (top_logprobs <= 0) {
      content.push_back({{"id", e.sampled.token}, {"logprob", e.sampled.logprob}});
      continue;
    }
    Json top = Json::array();
    for (const TopLogprob& t : e.top)
      top.push_back({{"id", t.token}, {"token", t.piece}, {"logprob", t.logprob}});
    content.push_back({{"id", e.sampled.token},
                       {"token", e.sampled.piece},
                       {"logprob", e.sampled.logprob},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

namespace {
Json object_header(const ResponseMeta& m, const char* object) {
  return {{"id", m.id},
          {"object", object},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "kvlm-0.1.0"}};
}
}  // namespace

Json chat_completion_json(const ResponseMeta& m, const FinalOutput& out, bool logprobs) {
  Json message = {{"role", "assistant"}};
  // OpenAI sends null content for a message that only calls tools.
  message["content"] = out.content.empty() && !out.tool_calls.empty() ? Json(nullptr) : Json(out.content);
  if (!out.reasoning.empty()) message["reasoning"] = out.reasoning;
  if (!out.tool_calls.empty()) message["tool_calls"] = tool_calls_json(out.tool_calls, false);
  Json choice = {{"index", 0},
                 {"message", std::move(message)},
                 {"finish_reason", out.openai_finish_reason()},
                 {"logprobs", nullptr}};
  if (logprobs) {
    Json content = Json::array();
    for (const LogprobEntry& e : out.logprobs) content.push_back(chat_logprob_entry_json(e));
    choice["logprobs"] = {{"content", std::move(content)}};
  }
  Json j = object_header(m, "chat.completion");
  j["choices"] = Json::array({std::move(choice)});
  j["usage"] = usage_json(out.usage);
  return j;
}

Json chat_chunk_json(const ResponseMeta& m, Json delta, Json finish_reason, Json logprobs) {
  Json j = object_header(m, "chat.completion.chunk");
  j["choices"] = Json::array({{{"index", 0},
                               {"delta", std::move(delta)},
                               {"finish_reason", std::move(finish_reason)},
                               {"logprobs", std::move(logprobs)}}});
  return j;
}

Json chat_text_delta_json(const OutputDelta& d) {
  Json delta = Json::object();
  if (!d.reasoning.empty()) delta["reasoning"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  return delta;
}

Json usage_chunk_json(const ResponseMeta& m, std::string_view object, const Usage& u) {
  Json j = object_header(m, std::string(object).c_str());
  j["choices"] = Json::array();
  j["usage"] = usage_json(u);
  return j;
}

Json completion_json(const ResponseMeta& m, const FinalOutput& out, int logprobs_top,
                     bool logprobs) {
  Json choice = {{"index", 0},
                 {"text", out.content},
                 {"finish_reason", out.openai_finish_reason()},
                 {"logprobs", nullptr}};
  if (logprobs) choice["logprobs"] = mlx_logprobs_json(out.logprobs, logprobs_top);
  Json j = object_header(m, "text_completion");
  j["choices"] = Json::array({std::move(choice)});
  j["usage"] = usage_json(out.usage);
  return j;
}

Json completion_chunk_json(const ResponseMeta& m, const std::string& text, Json finish_reason) {
  Json j = object_header(m, "text_completion");
  j["choices"] = Json::array(
      {{{"index", 0}, {"text", text}, {"finish_reason", std::move(finish_reason)}, {"logprobs", nullptr}}});
  return j;
}

std::string dump_json(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string sse_data(const Json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_event(std::string_view event, const Json& payload) {
  return "event: " + std::string(event) + "\ndata: " + dump_json(payload) + "\n\n";
}

}  // namespace kvlm::server
