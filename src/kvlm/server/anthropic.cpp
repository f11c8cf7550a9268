#include "kvlm/server/anthropic.h"

#include "kvlm/server/api_error.h"

namespace kvlm::server {

namespace {

std::string at(size_t i) { return "messages[" + std::to_string(i) + "]"; }

// A tool_result's content: a string or an array of text blocks.
std::string tool_result_text(const RequestJson& block, const std::string& where) {
  auto it = block.find("content");
  if (it == block.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) throw invalid_request(where + ".content must be a string or an array of text blocks", "messages");
  std::string text;
  for (const RequestJson& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      throw invalid_request(where + ".content must be a string or an array of text blocks", "messages");
    text += part["text"].get_ref<const std::string&>();
  }
  return text;
}

// Appends the OpenAI-form messages of one Anthropic message to `out`.
void convert_message(const RequestJson& m, size_t i, RequestJson& out) {
  const std::string where = at(i);
  if (!m.is_object()) throw invalid_request(where + " must be an object", "messages");
  const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
  if (role != "user" && role != "assistant")
    throw invalid_request(where + ".role must be 'user' or 'assistant'", "messages");
  auto content = m.find("content");
  if (content == m.end() || content->is_string()) {
    out.push_back({{"role", role}, {"content", content == m.end() ? RequestJson("") : *content}});
    return;
  }
  if (!content->is_array())
    throw invalid_request(where + ".content must be a string or an array of content blocks", "messages");
  std::string text;
  RequestJson tool_calls = RequestJson::array();
  for (size_t j = 0; j < content->size(); ++j) {
    const RequestJson& block = (*content)[j];
    const std::string here = where + ".content[" + std::to_string(j) + "]";
    const std::string type = block.is_object() && block.contains("type") && block["type"].is_string()
                                 ? block["type"].get<std::string>()
                                 : "";
    if (type == "text") {
      if (!block.contains("text") || !block["text"].is_string())
        throw invalid_request(here + ".text must be a string", "messages");
      text += block["text"].get_ref<const std::string&>();
    } else if (type == "tool_use" && role == "assistant") {
      if (!block.contains("name") || !block["name"].is_string())
        throw invalid_request(here + ".name must be a string", "messages");
      tool_calls.push_back({{"id", block.value("id", "")},
                            {"type", "function"},
                            {"function", {{"name", block["name"]}, {"arguments", block.value("input", RequestJson::object())}}}});
    } else if (type == "tool_result" && role == "user") {
      out.push_back({{"role", "tool"},
                     {"tool_call_id", block.value("tool_use_id", "")},
                     {"content", tool_result_text(block, here)}});
    } else if (type == "thinking" || type == "redacted_thinking") {
      // Earlier reasoning is not fed back to the model (as Anthropic's own API does).
    } else {
      throw invalid_request(here + ": unsupported content block type '" + type + "'", "messages");
    }
  }
  if (text.empty() && tool_calls.empty()) return;
  RequestJson msg = {{"role", role}, {"content", text}};
  if (!tool_calls.empty()) msg["tool_calls"] = std::move(tool_calls);
  out.push_back(std::move(msg));
}

std::string system_text(const RequestJson& system) {
  if (system.is_string()) return system.get<std::string>();
  const char* message = "system must be a string or an array of text blocks";
  if (!system.is_array()) throw invalid_request(message, "system");
  std::string text;
  for (const RequestJson& block : system) {
    if (!block.is_object() || !block.contains("text") || !block["text"].is_string())
      throw invalid_request(message, "system");
    if (!text.empty()) text += "\n";
    text += block["text"].get_ref<const std::string&>();
  }
  return text;
}

RequestJson convert_tools(const RequestJson& body) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return nullptr;
  if (!it->is_array()) throw invalid_request("tools must be an array", "tools");
  auto choice = body.find("tool_choice");
  if (choice != body.end() && choice->is_object() && choice->value("type", "") == "none") return nullptr;
  RequestJson tools = RequestJson::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const RequestJson& t = (*it)[i];
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      throw invalid_request("tools[" + std::to_string(i) + "].name must be a string", "tools");
    RequestJson fn = {{"name", t["name"]}, {"parameters", t.value("input_schema", RequestJson::object())}};
    if (t.contains("description")) fn["description"] = t["description"];
    tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return tools.empty() ? RequestJson(nullptr) : tools;
}

}  // namespace

ChatRequest parse_anthropic_request(const RequestJson& body, const SamplingDefaults& defaults) {
  if (!body.contains("max_tokens") || body["max_tokens"].is_null())
    throw invalid_request("max_tokens: Field required", "max_tokens");
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty())
    throw invalid_request("messages must be a non-empty array", "messages");
  RequestJson converted = RequestJson::array();
  auto system = body.find("system");
  if (system != body.end() && !system->is_null()) {
    const std::string text = system_text(*system);
    if (!text.empty()) converted.push_back({{"role", "system"}, {"content", text}});
  }
  for (size_t i = 0; i < messages->size(); ++i) convert_message((*messages)[i], i, converted);
  ChatRequest r;
  r.messages = normalize_messages(converted);
  r.settings = parse_generation_settings(body, defaults);
  r.settings.stop = parse_stop(body, "stop_sequences");
  r.tools = convert_tools(body);
  auto thinking = body.find("thinking");
  if (thinking != body.end() && thinking->is_object() && thinking->contains("type"))
    r.chat_template_kwargs["enable_thinking"] = thinking->value("type", "") == "enabled";
  return r;
}

Json anthropic_usage_json(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"output_tokens", u.completion_tokens},
          {"cache_read_input_tokens", u.cached_tokens},
          {"cache_creation_input_tokens", 0}};
}

namespace {

Json tool_use_block(const ToolCall& call, bool with_input) {
  Json input = Json::parse(call.arguments_json, nullptr, false);
  if (input.is_discarded() || !input.is_object()) input = Json::object();
  return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", with_input ? input : Json::object()}};
}

Json stop_sequence_json(const FinalOutput& out) {
  return out.stop_sequence && out.anthropic_stop_reason() == "stop_sequence" ? Json(*out.stop_sequence) : Json(nullptr);
}

}  // namespace

Json anthropic_message_json(const ResponseMeta& m, const FinalOutput& out) {
  Json content = Json::array();
  if (!out.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", out.reasoning}, {"signature", ""}});
  if (!out.content.empty() || out.tool_calls.empty()) content.push_back({{"type", "text"}, {"text", out.content}});
  for (const ToolCall& call : out.tool_calls) content.push_back(tool_use_block(call, true));
  return {{"id", m.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", m.model},
          {"content", std::move(content)},
          {"stop_reason", out.anthropic_stop_reason()},
          {"stop_sequence", stop_sequence_json(out)},
          {"usage", anthropic_usage_json(out.usage)}};
}

std::string AnthropicStreamEncoder::start(int32_t prompt_tokens) {
  Json message = {{"id", meta_.id},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", meta_.model},
                  {"content", Json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", anthropic_usage_json(Usage{prompt_tokens, 0, 0})}};
  return sse_event("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
}

std::string AnthropicStreamEncoder::open(Block kind, Json content_block) {
  std::string out = close();
  open_ = kind;
  ++index_;
  out += sse_event("content_block_start",
                   {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(content_block)}});
  if (!pinged_) {
    out += sse_event("ping", {{"type", "ping"}});
    pinged_ = true;
  }
  return out;
}

std::string AnthropicStreamEncoder::close() {
  if (open_ == Block::kNone) return "";
  open_ = Block::kNone;
  return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string AnthropicStreamEncoder::delta(const OutputDelta& d) {
  std::string out;
  if (!d.reasoning.empty()) {
    if (open_ != Block::kThinking) out += open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}});
    out += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", index_},
                                             {"delta", {{"type", "thinking_delta"}, {"thinking", d.reasoning}}}});
  }
  if (!d.content.empty()) {
    if (open_ != Block::kText) out += open(Block::kText, {{"type", "text"}, {"text", ""}});
    out += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", index_},
                                             {"delta", {{"type", "text_delta"}, {"text", d.content}}}});
  }
  return out;
}

std::string AnthropicStreamEncoder::finish(const FinalOutput& out) {
  std::string s;
  // A message always has at least one block; an empty answer is an empty text block.
  if (index_ < 0 && out.tool_calls.empty()) s += open(Block::kText, {{"type", "text"}, {"text", ""}});
  s += close();
  for (const ToolCall& call : out.tool_calls) {
    s += open(Block::kToolUse, tool_use_block(call, false));
    s += sse_event("content_block_delta",
                   {{"type", "content_block_delta"},
                    {"index", index_},
                    {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments_json}}}});
    s += close();
  }
  s += sse_event("message_delta", {{"type", "message_delta"},
                                   {"delta", {{"stop_reason", out.anthropic_stop_reason()},
                                              {"stop_sequence", stop_sequence_json(out)}}},
                                   {"usage", anthropic_usage_json(out.usage)}});
  s += sse_event("message_stop", {{"type", "message_stop"}});
  return s;
}

std::string AnthropicStreamEncoder::error(const std::string& type, const std::string& message) {
  return sse_event("error", {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

}  // namespace kvlm::server
