#pragma once
// Loading of the tokenizer golden files under tests/data/tokenizers, shared by the tokenizer and
// detokenizer tests.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kvlm/base/file.h"
#include "kvlm/base/json.h"

namespace kvlm::test {

inline std::string tokenizer_data(const std::string& rel) {
  return std::string(KVLM_TEST_DATA) + "/tokenizers/" + rel;
}

// One case of tools/tokenizer_goldens.py output.
struct GoldenCase {
  std::string text;
  std::vector<int32_t> ids, ids_with_special;
  std::string decoded, decoded_skip_special;
};

struct GoldenFile {
  std::string name;            // e.g. "gpt2"
  std::string tokenizer_path;  // absolute path of the tokenizer.json it was made from
  std::vector<GoldenCase> cases;
};

// Every goldens/<name>.json of a tokenizer (the HF `tokenizers` oracle output), sorted by name.
inline std::vector<GoldenFile> load_hf_goldens() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(tokenizer_data("goldens")))
    if (e.path().extension() == ".json" && e.path().stem() != "components")
      names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  std::vector<GoldenFile> files;
  for (const std::string& name : names) {
    std::string path = tokenizer_data("goldens/" + name + ".json");
    Json j = read_json_file(path);
    GoldenFile f;
    f.name = name;
    std::string rel = j.at("tokenizer").get<std::string>();
    f.tokenizer_path = rel.rfind("models/", 0) == 0
                           ? std::string(KVLM_MODELS_DIR) + rel.substr(6)
                           : std::string(KVLM_TEST_DATA) + rel.substr(std::string("tests/data").size());
    for (const Json& c : j.at("cases"))
      f.cases.push_back({c.at("text").get<std::string>(), c.at("ids").get<std::vector<int32_t>>(),
                         c.at("ids_with_special").get<std::vector<int32_t>>(),
                         c.at("decoded").get<std::string>(),
                         c.at("decoded_skip_special").get<std::string>()});
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace kvlm::test
