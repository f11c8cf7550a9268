// Choosing per-layer KV codecs: --kv-quant spellings and kv_config.json, with errors that name
// the file, the entry and the field.
#include "kvlm/kv/kv_quant.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "kvlm/base/error.h"

namespace kvlm {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<KVCodecSpec> config(const std::string& text, int group_size = 0) {
  return parse_kv_config(parse_json(text, "kv_config.json"), "kv_config.json", 4, group_size,
                         DType::kBF16);
}

TEST(KVQuant, OneSpellingGivesEveryLayerTheSameCodec) {
  KVQuantOptions o;
  EXPECT_EQ(resolve_kv_codecs(o, 3, DType::kBF16, "."),
            std::vector<KVCodecSpec>(3, kv_passthrough_spec(DType::kF32)));
  o.quant = "turbo:k4v3";
  EXPECT_EQ(resolve_kv_codecs(o, 2, DType::kBF16, "."),
            std::vector<KVCodecSpec>(2, kv_turbo_spec(4, 3)));
  o.quant = "4";
  o.group_size = 32;
  EXPECT_EQ(resolve_kv_codecs(o, 1, DType::kF16, "."),
            std::vector<KVCodecSpec>(1, kv_affine_spec(4, 32, DType::kF16)));
  o.config_file = "x.json";
  EXPECT_EQ(error_of([&] { resolve_kv_codecs(o, 1, DType::kF16, "."); }),
            "--kv-config x.json: needs --kv-quant config");
}

TEST(KVQuant, ConfigListsLayersAndTheRestStayExact) {
  const std::vector<KVCodecSpec> specs = config(
      R"([{"layer_idx": 1, "bits": 8, "group_size": 32}, {"layer_idx": 3, "bits": 4}])");
  const KVCodecSpec off = kv_passthrough_spec(DType::kF32);
  EXPECT_EQ(specs, (std::vector<KVCodecSpec>{off, kv_affine_spec(8, 32, DType::kBF16), off,
                                             kv_affine_spec(4, 64, DType::kBF16)}));
  // --kv-group-size is the default group of entries without one.
  EXPECT_EQ(config(R"([{"layer_idx": 0, "bits": 2}])", 128)[0], kv_affine_spec(2, 128, DType::kBF16));
}

TEST(KVQuant, ConfigErrorsNameFileEntryAndField) {
  EXPECT_EQ(error_of([] { config(R"({"layer_idx": 0})"); }),
            "kv_config.json: expected a JSON array of {\"layer_idx\", \"bits\", \"group_size\"} "
            "entries, got object");
  EXPECT_EQ(error_of([] { config(R"([{"layer_idx": 0, "bits": 4}, 5])"); }),
            "kv_config.json: entry 1: expected an object, got 5");
  EXPECT_EQ(error_of([] { config(R"([{"bits": 4}])"); }),
            "kv_config.json: entry 0: missing required field 'layer_idx'");
  EXPECT_EQ(error_of([] { config(R"([{"layer_idx": 0, "bits": "4"}])"); }),
            "kv_config.json: entry 0: field 'bits' must be an integer, got \"4\"");
  EXPECT_EQ(error_of([] { config(R"([{"layer_idx": 4, "bits": 4}])"); }),
            "kv_config.json: entry 0: field 'layer_idx': 4 is outside the model's layers 0..3");
  EXPECT_EQ(error_of([] { config(R"([{"layer_idx": 2, "bits": 4}, {"layer_idx": 2, "bits": 8}])"); }),
            "kv_config.json: entry 1: field 'layer_idx': layer 2 is listed twice");
  EXPECT_EQ(error_of([] { config(R"([{"layer_idx": 0, "bits": 7}])"); }),
            "kv_config.json: entry 0: field 'bits': 7 is not 2, 3, 4, 5, 6 or 8");
  EXPECT_EQ(error_of([] { config(R"([{"layer_idx": 0, "bits": 4, "group_size": 48}])"); }),
            "kv_config.json: entry 0: field 'group_size': 48 is not 32, 64 or 128");
}

TEST(KVQuant, ConfigFileDefaultsToTheModelFolders) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kvlm_kv_quant_test";
  std::filesystem::create_directories(dir);
  KVQuantOptions o;
  o.quant = "config";
  const std::string file = (dir / "kv_config.json").string();
  std::filesystem::remove(file);
  EXPECT_EQ(error_of([&] { resolve_kv_codecs(o, 2, DType::kBF16, dir.string()); }),
            "--kv-quant config: " + file + " does not exist (give the file with --kv-config)");
  std::ofstream(file) << R"([{"layer_idx": 0, "bits": 8}])";
  EXPECT_EQ(resolve_kv_codecs(o, 2, DType::kBF16, dir.string())[0], kv_affine_spec(8, 64, DType::kBF16));
  o.config_file = file;
  EXPECT_EQ(resolve_kv_codecs(o, 2, DType::kBF16, "/nonexistent")[0], kv_affine_spec(8, 64, DType::kBF16));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvlm
