// kvlm template [MODEL_DIR] MESSAGES.json: prints the prompt the model's chat template builds.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/base/json.h"
#include "kvlm/cli/command.h"
#include "kvlm/text/chat_template.h"

namespace kvlm::cli {
namespace {

constexpr const char* kHelp =
    "Render the model's chat template (tokenizer_config.json `chat_template` or chat_template.jinja) "
    "for the messages in MESSAGES.json and print the prompt exactly, with no newline added. "
    "MESSAGES.json is an array of messages or an OpenAI-style request object with `messages` (and "
    "optionally `tools`); \"-\" reads it from stdin. With one positional argument the bundled "
    "default model is used. JSON key order is kept, so tool schemas print as given.";

using OJson = nlohmann::ordered_json;

struct Options {
  std::vector<std::string> positional;
  bool no_generation_prompt = false;
  std::string tools_path, kwargs, name;
};

OJson parse_ordered(const std::string& text, const std::string& origin) {
  OJson j = OJson::parse(text, nullptr, /*allow_exceptions=*/false);
  check(!j.is_discarded(), origin + ": not valid JSON");
  return j;
}

std::string read_input(const std::string& path) {
  if (path != "-") return read_file(path);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

int run(const Options& o) {
  check(!o.positional.empty() && o.positional.size() <= 2,
        "template: expected [MODEL_DIR] MESSAGES.json, got " + std::to_string(o.positional.size()) + " arguments");
  std::string dir = o.positional.size() == 2 ? o.positional[0] : default_model_dir();
  const std::string& path = o.positional.back();
  OJson doc = parse_ordered(read_input(path), path);
  OJson messages = doc, tools;
  if (doc.is_object()) {
    check(doc.contains("messages"), path + ": expected an array of messages or an object with 'messages'");
    messages = doc["messages"];
    if (doc.contains("tools")) tools = doc["tools"];
  }
  if (!o.tools_path.empty()) tools = parse_ordered(read_file(o.tools_path), o.tools_path);
  OJson extra = o.kwargs.empty() ? OJson() : parse_ordered(o.kwargs, "--kwargs");
  check(extra.is_null() || extra.is_object(), "--kwargs must be a JSON object");
  auto tmpl = ChatTemplate::from_model_dir(dir, o.name);
  check(tmpl.has_value(), dir + ": the model has no chat template (no chat_template in tokenizer_config.json, "
                               "no chat_template.jinja)");
  std::string prompt = tmpl->render(messages, !o.no_generation_prompt, tools, extra);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

Runner setup(CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.description(kHelp);
  sub.add_option("args", o->positional, "[MODEL_DIR] MESSAGES.json")->required()->expected(1, 2);
  sub.add_flag("--no-generation-prompt", o->no_generation_prompt,
               "render without the assistant prompt (add_generation_prompt=false)");
  sub.add_option("--tools", o->tools_path, "JSON file with an array of OpenAI tool definitions");
  sub.add_option("--kwargs", o->kwargs, "extra template variables as a JSON object, e.g. '{\"enable_thinking\":false}'");
  sub.add_option("--name", o->name, "which named template to use when the model has several (default: \"default\")");
  return [o] { return run(*o); };
}

const Registration reg{"template", "Print the prompt a model's chat template builds for messages", setup};

}  // namespace
}  // namespace kvlm::cli
