#include "kvlm/text/chat_template.h"

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/text/jinja.h"

namespace kvlm {

namespace {

// A special token in tokenizer_config.json / special_tokens_map.json: a string, or an
// AddedToken object {"content": ...}; null or absent gives "".
std::string token_text(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const Json& t = config.at(key);
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t.at("content").is_string()) return t.at("content").get<std::string>();
  return "";
}

// `chat_template` as a string, or a list of {name, template}: `name` if given, else "default".
std::optional<std::string> pick_template(const Json& field, const std::string& name, const std::string& origin) {
  if (field.is_string()) {
    if (!name.empty() && name != "default")
      throw Error(origin + ": chat_template '" + name + "' not found (the model has a single template)");
    return field.get<std::string>();
  }
  if (!field.is_array()) throw Error(origin + ": chat_template must be a string or a list of {name, template}");
  std::string wanted = name.empty() ? "default" : name;
  std::string names;
  for (const Json& entry : field) {
    std::string n = json_get<std::string>(entry, "name", origin + ": chat_template entry");
    if (n == wanted) return json_get<std::string>(entry, "template", origin + ": chat_template '" + n + "'");
    names += (names.empty() ? "" : ", ") + n;
  }
  if (name.empty()) return std::nullopt;  // named templates only, none of them the default
  throw Error(origin + ": chat_template '" + name + "' not found (available: " + names + ")");
}

void add_var(std::vector<std::pair<std::string, jinja::Value>>& vars, const std::string& key, jinja::Value v) {
  for (auto& [k, existing] : vars) {
    if (k == key) {
      existing = std::move(v);
      return;
    }
  }
  vars.emplace_back(key, std::move(v));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      compiled_(std::make_shared<const jinja::Template>(source_)) {}

ChatTemplate ChatTemplate::from_string(std::string source, std::string bos_token, std::string eos_token) {
  return ChatTemplate(std::move(source), std::move(bos_token), std::move(eos_token));
}

std::optional<ChatTemplate> ChatTemplate::from_model_dir(const std::string& dir, const std::string& name) {
  const std::string config_path = dir + "/tokenizer_config.json";
  Json config = file_exists(config_path) ? read_json_file(config_path) : Json::object();
  std::string bos = token_text(config, "bos_token"), eos = token_text(config, "eos_token");
  const std::string map_path = dir + "/special_tokens_map.json";
  if ((bos.empty() || eos.empty()) && file_exists(map_path)) {
    Json map = read_json_file(map_path);
    if (bos.empty()) bos = token_text(map, "bos_token");
    if (eos.empty()) eos = token_text(map, "eos_token");
  }
  std::optional<std::string> source;
  std::string origin = config_path;
  if (config.is_object() && config.contains("chat_template") && !config.at("chat_template").is_null())
    source = pick_template(config.at("chat_template"), name, config_path);
  if (!source && file_exists(dir + "/chat_template.jinja")) {
    origin = dir + "/chat_template.jinja";
    source = read_file(origin);
  }
  if (!source) return std::nullopt;
  try {
    return ChatTemplate(std::move(*source), std::move(bos), std::move(eos));
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
}

template <typename J>
std::string ChatTemplate::render_any(const J& messages, bool add_generation_prompt, const J& tools,
                                     const J& extra) const {
  check(messages.is_array(), "chat template: messages must be an array");
  check(tools.is_null() || tools.is_array(), "chat template: tools must be an array or null");
  check(extra.is_null() || extra.is_object(), "chat template: extra kwargs must be an object or null");
  // The variables transformers' apply_chat_template passes: tools and documents are always
  // defined (None when absent), special tokens only when the tokenizer has them, then the
  // caller's kwargs, which may override any of them.
  std::vector<std::pair<std::string, jinja::Value>> vars;
  vars.emplace_back("messages", jinja::from_json(messages));
  vars.emplace_back("tools", jinja::from_json(tools));
  vars.emplace_back("documents", jinja::Value(jinja::None{}));
  vars.emplace_back("add_generation_prompt", jinja::Value(add_generation_prompt));
  if (!bos_token_.empty()) vars.emplace_back("bos_token", jinja::Value(bos_token_));
  if (!eos_token_.empty()) vars.emplace_back("eos_token", jinja::Value(eos_token_));
  if (extra.is_object())
    for (const auto& [k, v] : extra.items()) add_var(vars, k, jinja::from_json(v));
  return compiled_->render(vars);
}

std::string ChatTemplate::render(const Json& messages, const ChatTemplateOptions& opts) const {
  return render_any(messages, opts.add_generation_prompt, opts.tools, opts.extra);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& tools, const nlohmann::ordered_json& extra) const {
  return render_any(messages, add_generation_prompt, tools, extra);
}

}  // namespace kvlm
