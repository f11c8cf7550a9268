#pragma once
// Chat templates: renders a model's own Jinja `chat_template` the way transformers'
// apply_chat_template does (sandboxed jinja2, trim_blocks and lstrip_blocks on), so that the
// prompt kvlm builds is byte-for-byte the prompt the model was trained on.
#include <memory>
#include <optional>
#include <string>

#include "kvlm/base/json.h"

namespace kvlm {

namespace jinja {
class Template;
}

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  Json tools;  // null or array of OpenAI tool definitions
  Json extra;  // extra kwargs object (enable_thinking, ...), may be null
};

class ChatTemplate {
 public:
  // Template from dir/tokenizer_config.json `chat_template` (a string, or a list of
  // {name, template} where "default" is chosen unless `name` is given), else
  // dir/chat_template.jinja; nullopt if the model has none. bos_token/eos_token come from
  // tokenizer_config.json (a string or {content: ...}), else special_tokens_map.json.
  static std::optional<ChatTemplate> from_model_dir(const std::string& dir,
                                                    const std::string& name = "");
  static ChatTemplate from_string(std::string source, std::string bos_token = "",
                                  std::string eos_token = "");

  // Renders `messages` (an array of message objects). Throws kvlm::Error for template errors,
  // including the template's own raise_exception(...) message.
  std::string render(const Json& messages, const ChatTemplateOptions& opts = {}) const;
  // The same for key-ordered JSON. Templates print tool schemas and arguments with tojson, which
  // keeps the caller's key order in transformers; an ordered document reproduces that exactly,
  // while kvlm::Json (a sorted map) yields keys sorted.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& tools, const nlohmann::ordered_json& extra) const;

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token);
  template <typename J>
  std::string render_any(const J& messages, bool add_generation_prompt, const J& tools, const J& extra) const;

  std::string source_, bos_token_, eos_token_;
  std::shared_ptr<const jinja::Template> compiled_;
};

}  // namespace kvlm
