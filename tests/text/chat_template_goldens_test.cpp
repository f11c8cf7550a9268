// Byte-for-byte parity with transformers' apply_chat_template: every template under
// tests/data/templates (and the bundled default model) against the goldens that
// tools/template_goldens.py recorded from the oracle.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kvlm/base/file.h"
#include "kvlm/base/json.h"
#include "kvlm/text/chat_template.h"

namespace kvlm {
namespace {

namespace fs = std::filesystem;

const std::string kTemplates = std::string(KVLM_TEST_DATA) + "/templates";

std::vector<std::string> golden_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kTemplates + "/goldens"))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string template_dir(const std::string& id) {
  if (id == "default-model") return std::string(KVLM_MODELS_DIR) + "/default";
  return kTemplates + "/" + id;
}

// Where two strings first differ, with some context, for readable failures.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  want: " + Json(want.substr(from, 120)).dump() +
         "\n  got:  " + Json(got.substr(from, 120)).dump();
}

class TemplateGoldens : public ::testing::TestWithParam<std::string> {};

TEST_P(TemplateGoldens, MatchesOracle) {
  const std::string id = GetParam();
  // Key order matters (tojson keeps it), so the goldens are read as ordered JSON.
  using OJson = nlohmann::ordered_json;
  OJson golden = OJson::parse(read_file(kTemplates + "/goldens/" + id + ".json"));
  setenv("SOURCE_DATE_EPOCH", std::to_string(golden.at("source_date_epoch").get<int64_t>()).c_str(), 1);
  auto tmpl = ChatTemplate::from_model_dir(template_dir(id));
  ASSERT_TRUE(tmpl.has_value()) << id << ": no template found";
  EXPECT_EQ(tmpl->bos_token(), golden.at("bos_token").is_null() ? "" : golden.at("bos_token").get<std::string>());
  EXPECT_EQ(tmpl->eos_token(), golden.at("eos_token").is_null() ? "" : golden.at("eos_token").get<std::string>());
  int matched = 0;
  for (const OJson& c : golden.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    std::string got, error;
    try {
      got = tmpl->render(c.at("messages"), c.at("add_generation_prompt").get<bool>(), c.at("tools"), c.at("kwargs"));
    } catch (const Error& e) {
      error = e.what();
    }
    if (c.contains("output")) {
      const std::string want = c.at("output").get<std::string>();
      EXPECT_TRUE(error.empty()) << id << "/" << name << ": raised " << error;
      if (error.empty()) {
        EXPECT_EQ(got, want) << id << "/" << name << ": " << first_difference(want, got);
        matched += got == want;
      }
    } else {
      EXPECT_FALSE(error.empty()) << id << "/" << name << ": oracle raised "
                                            << c.at("error").get<std::string>() << ", kvlm rendered " << Json(got).dump();
      // raise_exception(...) messages pass through unchanged.
      if (c.at("error_type") == "TemplateError" && !error.empty()) {
        EXPECT_EQ(error, c.at("error").get<std::string>()) << id << "/" << name;
      }
      matched += !error.empty();
    }
  }
  unsetenv("SOURCE_DATE_EPOCH");
  RecordProperty("cases_matched", matched);
}

INSTANTIATE_TEST_SUITE_P(AllTemplates, TemplateGoldens, ::testing::ValuesIn(golden_files()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum((unsigned char)ch)) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace kvlm
