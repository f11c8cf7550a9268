#include "kvlm/server/openai_request.h"

#include <set>

#include "kvlm/server/api_error.h"

namespace kvlm::server {

RequestJson parse_request_body(std::string_view body) {
  RequestJson parsed;
  try {
    parsed = RequestJson::parse(body.begin(), body.end());
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message starts with "[json.exception.parse_error.101] "; the rest says where.
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    throw invalid_request("Invalid JSON in request body: " + what);
  }
  if (!parsed.is_object()) throw invalid_request("Request body must be a JSON object");
  return parsed;
}

namespace {

const std::set<std::string> kRoles = {"system", "user", "assistant", "tool", "developer"};

std::string at(size_t i) { return "messages[" + std::to_string(i) + "]"; }

// A content array of {"type": "text", "text": ...} parts, joined.
std::string join_text_parts(const RequestJson& parts, const std::string& where) {
  std::string text;
  for (size_t j = 0; j < parts.size(); ++j) {
    const RequestJson& part = parts[j];
    const std::string here = where + ".content[" + std::to_string(j) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw invalid_request(here + " must be an object with a type", "messages");
    const std::string type = part["type"].get<std::string>();
    if (type != "text")
      throw invalid_request(here + ": only 'text' content parts are supported (got '" + type + "')",
                            "messages");
    if (!part.contains("text") || !part["text"].is_string())
      throw invalid_request(here + ".text must be a string", "messages");
    text += part["text"].get_ref<const std::string&>();
  }
  return text;
}

void normalize_tool_calls(RequestJson& message, const std::string& where) {
  auto it = message.find("tool_calls");
  if (it == message.end() || it->is_null()) return;
  if (!it->is_array()) throw invalid_request(where + ".tool_calls must be an array", "messages");
  for (RequestJson& call : *it) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      throw invalid_request(where + ".tool_calls entries must have a function object", "messages");
    RequestJson& args = call["function"]["arguments"];
    if (!args.is_string()) continue;
    // Arguments arrive as a JSON string; templates want the object. Text that is not JSON is
    // kept as it is rather than refused: the template can still print it.
    RequestJson parsed = RequestJson::parse(args.get<std::string>(), nullptr, false);
    if (!parsed.is_discarded()) args = std::move(parsed);
  }
}

}  // namespace

RequestJson normalize_messages(const RequestJson& messages) {
  if (!messages.is_array() || messages.empty())
    throw invalid_request("messages must be a non-empty array", "messages");
  RequestJson out = RequestJson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = at(i);
    if (!messages[i].is_object()) throw invalid_request(where + " must be an object", "messages");
    RequestJson m = messages[i];
    if (!m.contains("role") || !m["role"].is_string())
      throw invalid_request(where + ".role must be a string", "messages");
    std::string role = m["role"].get<std::string>();
    if (!kRoles.count(role))
      throw invalid_request(where + ".role must be one of system, user, assistant, tool, "
                                    "developer (got '" + role + "')",
                            "messages");
    if (role == "developer") m["role"] = "system";
    RequestJson& content = m["content"];  // creates null when absent
    if (content.is_null()) {
      content = "";
    } else if (content.is_array()) {
      content = join_text_parts(content, where);
    } else if (!content.is_string()) {
      throw invalid_request(where + ".content must be a string or an array of text parts",
                            "messages");
    }
    normalize_tool_calls(m, where);
    out.push_back(std::move(m));
  }
  return out;
}

RequestJson parse_tools(const RequestJson& body) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return nullptr;
  if (!it->is_array()) throw invalid_request("tools must be an array", "tools");
  for (size_t i = 0; i < it->size(); ++i) {
    const RequestJson& tool = (*it)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object())
      throw invalid_request(where + ".function must be an object", "tools");
    const RequestJson& fn = tool["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      throw invalid_request(where + ".function.name must be a string", "tools");
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") return nullptr;
      if (c != "auto" && c != "required")
        throw invalid_request("tool_choice must be 'none', 'auto', 'required' or a function",
                              "tool_choice");
    } else if (!choice->is_object()) {
      throw invalid_request("tool_choice must be 'none', 'auto', 'required' or a function",
                            "tool_choice");
    }
  }
  return it->empty() ? RequestJson(nullptr) : *it;
}

ChatRequest parse_chat_request(const RequestJson& body, const SamplingDefaults& defaults) {
  ChatRequest r;
  if (!body.contains("messages")) throw invalid_request("messages must be a non-empty array", "messages");
  r.messages = normalize_messages(body.at("messages"));
  r.settings = parse_generation_settings(body, defaults);
  r.tools = parse_tools(body);
  auto kw = body.find("chat_template_kwargs");
  if (kw != body.end() && !kw->is_null()) {
    if (!kw->is_object())
      throw invalid_request("chat_template_kwargs must be an object", "chat_template_kwargs");
    r.chat_template_kwargs = *kw;
  }
  // reasoning_effort "none" turns thinking off; any other effort turns it on (mlx-bun's rule),
  // unless chat_template_kwargs already decided.
  auto effort = body.find("reasoning_effort");
  if (effort != body.end() && effort->is_string() &&
      !(r.chat_template_kwargs.is_object() && r.chat_template_kwargs.contains("enable_thinking")))
    r.chat_template_kwargs["enable_thinking"] = effort->get<std::string>() != "none";
  return r;
}

CompletionRequest parse_completion_request(const RequestJson& body, const SamplingDefaults& defaults) {
  CompletionRequest r;
  auto it = body.find("prompt");
  if (it == body.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
    throw invalid_request("prompt must be a non-empty string", "prompt");
  r.prompt = it->get<std::string>();
  r.settings = parse_generation_settings(body, defaults);
  return r;
}

}  // namespace kvlm::server
