// ChatTemplate loading (tokenizer_config.json forms, chat_template.jinja, special tokens) and
// the render variables transformers passes.
#include <gtest/gtest.h>

#include <filesystem>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"
#include "kvlm/text/chat_template.h"

namespace kvlm {
namespace {

namespace fs = std::filesystem;

class ModelDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvlm_chat_template_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void put(const std::string& name, const std::string& text) { write_file((dir_ / name).string(), text); }
  std::string dir() const { return dir_.string(); }

  fs::path dir_;
};

const Json kUser = Json::parse(R"([{"role": "user", "content": "hi"}])");

TEST_F(ModelDir, StringTemplateAndObjectTokens) {
  put("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}",
      "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})");
  auto t = ChatTemplate::from_model_dir(dir());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->render(kUser), "<s>hi</s>");
}

TEST_F(ModelDir, NamedTemplatesPickDefaultOrName) {
  put("tokenizer_config.json", R"({"chat_template": [{"name": "default", "template": "D"},
      {"name": "tool_use", "template": "T"}]})");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir())->render(kUser), "D");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir(), "tool_use")->render(kUser), "T");
  try {
    ChatTemplate::from_model_dir(dir(), "rag");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              dir() + "/tokenizer_config.json: chat_template 'rag' not found (available: default, tool_use)");
  }
}

TEST_F(ModelDir, JinjaFileAndSpecialTokensMap) {
  put("tokenizer_config.json", R"({"eos_token": null})");
  put("chat_template.jinja", "{{ bos_token }}|{{ eos_token }}\n");
  put("special_tokens_map.json", R"({"bos_token": "<bos>", "eos_token": {"content": "<eos>"}})");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir())->render(kUser), "<bos>|<eos>");
}

TEST_F(ModelDir, NoTemplateIsNullopt) {
  put("tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_FALSE(ChatTemplate::from_model_dir(dir()).has_value());
}

TEST_F(ModelDir, TemplateErrorsNameTheFile) {
  put("chat_template.jinja", "{% if %}");
  try {
    ChatTemplate::from_model_dir(dir());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir() + "/chat_template.jinja: template line 1: unexpected '%}'");
  }
}

TEST(ChatTemplateRender, VariablesAsTransformersPassesThem) {
  auto t = ChatTemplate::from_string(
      "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ bos_token is defined }} "
      "{{ enable_thinking }}",
      "", "</s>");
  ChatTemplateOptions opts;
  opts.extra = Json{{"enable_thinking", false}};
  EXPECT_EQ(t.render(kUser, opts), "True True True False False");
  opts.add_generation_prompt = false;
  opts.tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(t.render(kUser, opts), "False True False False False");
}

TEST(ChatTemplateRender, OrderedJsonKeepsKeyOrder) {
  auto t = ChatTemplate::from_string("{{ tools|tojson }}");
  auto tools = nlohmann::ordered_json::parse(R"([{"z": 1, "a": 2}])");
  EXPECT_EQ(t.render(nlohmann::ordered_json::array(), true, tools, nullptr), R"([{"z": 1, "a": 2}])");
  // kvlm::Json is a sorted map: the same input prints with sorted keys.
  ChatTemplateOptions opts;
  opts.tools = Json::parse(R"([{"z": 1, "a": 2}])");
  EXPECT_EQ(t.render(Json::array(), opts), R"([{"a": 2, "z": 1}])");
}

TEST(ChatTemplateRender, RaiseExceptionMessageIsTheError) {
  auto t = ChatTemplate::from_string("{{ raise_exception('Only user and assistant roles are supported!') }}");
  try {
    t.render(kUser);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "Only user and assistant roles are supported!");
  }
}

TEST(ChatTemplateRender, BadArgumentsAreErrors) {
  auto t = ChatTemplate::from_string("x");
  EXPECT_THROW(t.render(Json::object()), Error);
  ChatTemplateOptions opts;
  opts.tools = Json::object();
  EXPECT_THROW(t.render(kUser, opts), Error);
}

}  // namespace
}  // namespace kvlm
