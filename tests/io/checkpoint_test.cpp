// Checkpoint directories: single-file, sharded and glob layouts, config merging, the MLX
// quantization map, and the exact errors for bad checkpoints.
#include "kvlm/io/checkpoint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "io_test_util.h"
#include "kvlm/io/safetensors_writer.h"

namespace kvlm {
namespace {

using testing::error_of;
using testing::TempDir;

void write_config(const TempDir& d, const Json& cfg) { write_file(d.file("config.json"), cfg.dump()); }

void write_tensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& ts) {
  SafetensorsWriter w;
  for (const auto& [n, t] : ts) w.add(n, t);
  w.write(path);
}

Json llama_config() {
  return Json{{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 8}};
}

TEST(Checkpoint, SingleFile) {
  TempDir d;
  write_config(d, llama_config());
  write_tensors(d.file("model.safetensors"),
                {{"model.norm.weight", Tensor::from_f32({1, 2}, {2})},
                 {"lm_head.weight", Tensor::zeros({3, 2}, DType::kBF16)}});
  Checkpoint c = Checkpoint::open(d.path() + "/");
  EXPECT_EQ(c.dir(), d.path());
  EXPECT_EQ(c.config()["hidden_size"], 8);
  EXPECT_TRUE(c.generation_config().is_object());
  EXPECT_TRUE(c.generation_config().empty());
  EXPECT_EQ(c.names(), (std::vector<std::string>{"lm_head.weight", "model.norm.weight"}));
  EXPECT_TRUE(c.has("lm_head.weight"));
  EXPECT_FALSE(c.has("x"));
  EXPECT_EQ(c.info("lm_head.weight").dtype, DType::kBF16);
  EXPECT_EQ(c.info("lm_head.weight").shape, (Shape{3, 2}));
  EXPECT_EQ(c.info("lm_head.weight").file, d.file("model.safetensors"));
  EXPECT_EQ(c.tensor("model.norm.weight").to_f32_vector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(c.total_bytes(), 8u + 12u);
  EXPECT_FALSE(c.is_quantized());
  EXPECT_EQ(c.quantization_for("lm_head"), std::nullopt);
}

TEST(Checkpoint, TensorsOutliveTheCheckpoint) {
  TempDir d;
  write_config(d, llama_config());
  write_tensors(d.file("model.safetensors"), {{"w", Tensor::from_f32({5, 6}, {2})}});
  Tensor t = Checkpoint::open(d.path()).tensor("w");
  EXPECT_EQ(t.to_f32_vector(), (std::vector<float>{5, 6}));
}

// Resident kilobytes of the mapping that holds p (/proc/self/smaps), or -1 if none does.
int64_t resident_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      return std::stoll(line.substr(4));
    }
  }
  return -1;
}

TEST(Checkpoint, ReleasedTensorsLeaveTheResidentSetAndStayReadable) {
  TempDir d;
  write_config(d, llama_config());
  std::vector<float> values(64 * 1024);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i);
  write_tensors(d.file("model.safetensors"), {{"w", Tensor::from_f32(values, {int64_t(values.size())})}});
  const Checkpoint c = Checkpoint::open(d.path());
  const Tensor t = c.tensor("w");
  ASSERT_EQ(t.to_f32_vector(), values);  // every page of the 256 KB read
  EXPECT_GE(resident_kb(t.raw()), 248);
  c.release("w");
  EXPECT_LE(resident_kb(t.raw()), 12);  // the pages the tensor shares with the header or the end
  EXPECT_EQ(t.to_f32_vector(), values);
  EXPECT_EQ(error_of([&] { c.release("v"); }), d.path() + ": missing tensor 'v'");
}

TEST(Checkpoint, GenerationConfigIsRead) {
  TempDir d;
  write_config(d, llama_config());
  write_file(d.file("generation_config.json"), R"({"eos_token_id": [1, 2]})");
  write_tensors(d.file("model.safetensors"), {{"w", Tensor::from_f32({1}, {1})}});
  EXPECT_EQ(Checkpoint::open(d.path()).generation_config()["eos_token_id"], Json({1, 2}));
}

TEST(Checkpoint, TextConfigIsMergedOverTopLevel) {
  Json cfg = {{"architectures", {"Gemma3ForConditionalGeneration"}},
              {"model_type", "gemma3"},
              {"hidden_size", 1},
              {"vocab_size", 7},
              {"text_config", {{"hidden_size", 64}, {"model_type", "gemma3_text"}}}};
  Json m = merge_text_config(cfg);
  EXPECT_EQ(m["hidden_size"], 64);
  EXPECT_EQ(m["model_type"], "gemma3_text");
  EXPECT_EQ(m["vocab_size"], 7);
  EXPECT_EQ(m["architectures"][0], "Gemma3ForConditionalGeneration");
  cfg["text_config"].erase("model_type");
  EXPECT_EQ(merge_text_config(cfg)["model_type"], "gemma3");
  EXPECT_EQ(merge_text_config(llama_config()), llama_config());
}

TEST(Checkpoint, ShardedIndex) {
  TempDir d;
  write_config(d, llama_config());
  write_tensors(d.file("model-00001-of-00002.safetensors"),
                {{"a", Tensor::from_f32({1}, {1})}, {"stray", Tensor::from_f32({0}, {1})}});
  write_tensors(d.file("model-00002-of-00002.safetensors"), {{"b", Tensor::from_f32({2, 3}, {2})}});
  write_file(d.file("model.safetensors.index.json"),
             R"({"metadata":{"total_size":12},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
             R"("b":"model-00002-of-00002.safetensors"}})");
  Checkpoint c = Checkpoint::open(d.path());
  EXPECT_EQ(c.names(), (std::vector<std::string>{"a", "b"}));  // the index decides
  EXPECT_EQ(c.tensor("b").to_f32_vector(), (std::vector<float>{2, 3}));
  EXPECT_EQ(c.info("b").file, d.file("model-00002-of-00002.safetensors"));
}

TEST(Checkpoint, ShardsWithoutIndexAreGlobbedLikeMlxLm) {
  TempDir d;
  write_config(d, llama_config());
  write_tensors(d.file("model-00001-of-00002.safetensors"), {{"a", Tensor::from_f32({1}, {1})}});
  write_tensors(d.file("model-00002-of-00002.safetensors"), {{"b", Tensor::from_f32({2}, {1})}});
  write_tensors(d.file("adapters.safetensors"), {{"z", Tensor::from_f32({2}, {1})}});
  EXPECT_EQ(Checkpoint::open(d.path()).names(), (std::vector<std::string>{"a", "b"}));
}

TEST(CheckpointBadInput, MissingShard) {
  TempDir d;
  write_config(d, llama_config());
  write_file(d.file("model.safetensors.index.json"),
             R"({"weight_map":{"a":"model-00001-of-00002.safetensors"}})");
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("model.safetensors.index.json") +
                ": shard 'model-00001-of-00002.safetensors' not found (" +
                d.file("model-00001-of-00002.safetensors") + ")");
}

TEST(CheckpointBadInput, IndexNamesTensorTheShardLacks) {
  TempDir d;
  write_config(d, llama_config());
  write_tensors(d.file("s.safetensors"), {{"a", Tensor::from_f32({1}, {1})}});
  write_file(d.file("model.safetensors.index.json"), R"({"weight_map":{"b":"s.safetensors"}})");
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("s.safetensors") + ": tensor 'b' listed in model.safetensors.index.json is missing");
}

TEST(CheckpointBadInput, IndexWithoutWeightMapOrWithBadEntries) {
  TempDir d;
  write_config(d, llama_config());
  write_file(d.file("model.safetensors.index.json"), R"({"metadata":{}})");
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("model.safetensors.index.json") + ": missing required field 'weight_map'");
  write_file(d.file("model.safetensors.index.json"), R"({"weight_map":{"a":"../x.safetensors"}})");
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("model.safetensors.index.json") +
                ": weight_map entry 'a' names an invalid file '../x.safetensors'");
}

TEST(CheckpointBadInput, DuplicateTensorAcrossFiles) {
  TempDir d;
  write_config(d, llama_config());
  write_tensors(d.file("model-1.safetensors"), {{"a", Tensor::from_f32({1}, {1})}});
  write_tensors(d.file("model-2.safetensors"), {{"a", Tensor::from_f32({1}, {1})}});
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("model-2.safetensors") + ": tensor 'a' is also in " + d.file("model-1.safetensors"));
}

TEST(CheckpointBadInput, ConfigMissingMalformedOrNotAnObject) {
  TempDir d;
  write_tensors(d.file("model.safetensors"), {{"a", Tensor::from_f32({1}, {1})}});
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("config.json") + ": missing (a checkpoint needs config.json)");
  write_file(d.file("config.json"), "{\"hidden_size\": 8,");
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("config.json") +
                ": invalid JSON at byte 19: syntax error while parsing object key - unexpected end "
                "of input; expected string literal");
  write_file(d.file("config.json"), "{\"rope_theta\": 1e999}");
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("config.json") + ": invalid JSON: number overflow parsing '1e999'");
  write_file(d.file("config.json"), "[1]");
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("config.json") + ": expected a JSON object");
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.file("nowhere")); }),
            d.file("nowhere") + ": not a directory");
}

TEST(CheckpointBadInput, NoWeights) {
  TempDir d;
  write_config(d, llama_config());
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.path() + ": no model.safetensors or model.safetensors.index.json");
}

TEST(CheckpointBadInput, TruncatedWeightsNameTheFile) {
  TempDir d;
  write_config(d, llama_config());
  write_file(d.file("model.safetensors"), std::string("\xff\0\0\0\0\0\0\0{}", 10));
  EXPECT_EQ(error_of([&] { Checkpoint::open(d.path()); }),
            d.file("model.safetensors") + ": truncated file: header says 255 bytes but file has 10");
}

TEST(CheckpointBadInput, MissingTensorAndShapeMismatch) {
  TempDir d;
  write_config(d, llama_config());
  write_tensors(d.file("model.safetensors"), {{"w", Tensor::zeros({4, 8}, DType::kBF16)}});
  Checkpoint c = Checkpoint::open(d.path());
  EXPECT_EQ(error_of([&] { c.tensor("lm_head.weight"); }),
            d.path() + ": missing tensor 'lm_head.weight'");
  EXPECT_EQ(error_of([&] { c.info("lm_head.weight"); }),
            d.path() + ": missing tensor 'lm_head.weight'");
  EXPECT_EQ(error_of([&] { c.tensor_checked("w", {8, 4}); }),
            d.file("model.safetensors") + ": tensor 'w' has shape [4, 8], expected [8, 4]");
  EXPECT_EQ(c.tensor_checked("w", {4, 8}).shape(), (Shape{4, 8}));
}

// An MLX-quantized layout: q_proj quantized at the default, down_proj overridden to 8 bits,
// embed_tokens marked false, norms without scales.
TempDir& quantized_dir(TempDir& d, const Json& quant_block, const char* key = "quantization") {
  Json cfg = llama_config();
  cfg[key] = quant_block;
  write_config(d, cfg);
  write_tensors(d.file("model.safetensors"),
                {{"model.layers.0.self_attn.q_proj.weight", Tensor::zeros({8, 8}, DType::kU32)},
                 {"model.layers.0.self_attn.q_proj.scales", Tensor::zeros({8, 1}, DType::kBF16)},
                 {"model.layers.0.self_attn.q_proj.biases", Tensor::zeros({8, 1}, DType::kBF16)},
                 {"model.layers.0.mlp.down_proj.weight", Tensor::zeros({8, 16}, DType::kU32)},
                 {"model.layers.0.mlp.down_proj.scales", Tensor::zeros({8, 1}, DType::kBF16)},
                 {"model.layers.0.mlp.down_proj.biases", Tensor::zeros({8, 1}, DType::kBF16)},
                 {"model.embed_tokens.weight", Tensor::zeros({4, 64}, DType::kBF16)},
                 {"model.norm.weight", Tensor::zeros({64}, DType::kBF16)}});
  return d;
}

Json mlx_block() {
  return Json{{"group_size", 64},
              {"bits", 4},
              {"model.layers.0.mlp.down_proj", {{"group_size", 64}, {"bits", 8}}},
              {"model.embed_tokens", false}};
}

void expect_mlx_map(const Checkpoint& c) {
  EXPECT_TRUE(c.is_quantized());
  auto q = c.quantization_for("model.layers.0.self_attn.q_proj");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->bits, 4);
  EXPECT_EQ(q->group_size, 64);
  auto d = c.quantization_for("model.layers.0.mlp.down_proj");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->bits, 8);
  EXPECT_EQ(c.quantization_for("model.embed_tokens"), std::nullopt);
  EXPECT_EQ(c.quantization_for("model.norm"), std::nullopt);  // no .scales: float
}

TEST(CheckpointQuantization, MlxQuantizationBlockWithOverrides) {
  TempDir d;
  expect_mlx_map(Checkpoint::open(quantized_dir(d, mlx_block()).path()));
}

TEST(CheckpointQuantization, QuantizationConfigIsReadTheSameWay) {
  TempDir d;
  expect_mlx_map(Checkpoint::open(quantized_dir(d, mlx_block(), "quantization_config").path()));
  TempDir e;
  Json b = mlx_block();
  b["quant_method"] = "mlx";
  expect_mlx_map(Checkpoint::open(quantized_dir(e, b, "quantization_config").path()));
}

TEST(CheckpointQuantization, OverrideInheritsMissingFieldsFromGlobal) {
  TempDir d;
  Json b = mlx_block();
  b["model.layers.0.mlp.down_proj"] = {{"bits", 8}};
  b["model.layers.0.self_attn.q_proj"] = true;
  Checkpoint c = Checkpoint::open(quantized_dir(d, b).path());
  EXPECT_EQ(c.quantization_for("model.layers.0.mlp.down_proj")->group_size, 64);
  EXPECT_EQ(c.quantization_for("model.layers.0.self_attn.q_proj")->bits, 4);
}

TEST(CheckpointQuantization, AffineWeightChecksShapes) {
  TempDir d;
  Json b = mlx_block();
  b["model.layers.0.mlp.up_proj"] = {{"bits", 4}, {"group_size", 32}};
  Checkpoint c = Checkpoint::open(quantized_dir(d, b).path());
  AffineWeight w = c.affine_weight("model.layers.0.self_attn.q_proj", {8, 64});
  EXPECT_EQ(w.spec.bits, 4);
  EXPECT_EQ(w.packed.shape(), (Shape{8, 8}));
  EXPECT_EQ(c.affine_weight("model.layers.0.mlp.down_proj", {8, 64}).spec.bits, 8);
  const std::string file = d.file("model.safetensors");
  EXPECT_EQ(error_of([&] { c.affine_weight("model.layers.0.self_attn.q_proj", {8, 128}); }),
            file + ": tensor 'model.layers.0.self_attn.q_proj.weight' unpacks to shape [8, 64] at "
                   "bits=4, expected [8, 128]");
  EXPECT_EQ(error_of([&] { c.affine_weight("model.embed_tokens", {4, 64}); }),
            d.file("config.json") + ": module 'model.embed_tokens' is not quantized");
  EXPECT_EQ(error_of([&] { c.affine_weight("model.layers.0.mlp.up_proj", {8, 64}); }),
            d.path() + ": missing tensor 'model.layers.0.mlp.up_proj.weight'");
}

TEST(CheckpointQuantization, AffineWeightRejectsScalesOfTheWrongGroup) {
  TempDir d;
  Json b = mlx_block();
  b["model.layers.0.self_attn.q_proj"] = {{"bits", 4}, {"group_size", 32}};
  Checkpoint c = Checkpoint::open(quantized_dir(d, b).path());
  EXPECT_EQ(error_of([&] { c.affine_weight("model.layers.0.self_attn.q_proj", {8, 64}); }),
            d.file("model.safetensors") +
                ": tensor 'model.layers.0.self_attn.q_proj.weight': scales/biases shape [8, 1] "
                "does not match packed [8, 8] at bits=4 group_size=32 (expected [8, 2])");
}

TEST(CheckpointQuantization, UnsupportedBlocksAreRefusedWithTheFileNamed) {
  auto err = [](const Json& block, const char* key = "quantization") {
    TempDir d;
    quantized_dir(d, block, key);
    return error_of([&] { Checkpoint::open(d.path()); });
  };
  const std::string cfg = "/config.json: ";
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  std::string e = err({{"quant_method", "gptq"}, {"bits", 4}}, "quantization_config");
  EXPECT_TRUE(ends_with(e, cfg + "quantization method 'gptq' is not supported (kvlm reads float and "
                                 "MLX affine checkpoints)")) << e;
  e = err({{"group_size", 64}});
  EXPECT_TRUE(ends_with(e, cfg + "quantization: missing required field 'bits'")) << e;
  e = err({{"group_size", 64}, {"bits", 7}});
  EXPECT_TRUE(ends_with(e, cfg + "quantization: unsupported MLX quantization bits=7 group_size=64 "
                                 "(bits must be 2, 3, 4, 5, 6 or 8; group_size 32, 64 or 128)")) << e;
  e = err({{"group_size", 32}, {"bits", 4}, {"mode", "mxfp4"}});
  EXPECT_TRUE(ends_with(e, cfg + "quantization: quantization mode 'mxfp4' is not supported (only "
                                 "affine)")) << e;
  e = err({{"group_size", 64}, {"bits", 4}, {"m", {{"bits", "eight"}}}});
  EXPECT_TRUE(ends_with(e, cfg + "quantization 'm': field 'bits' has the wrong type (\"eight\")")) << e;
  e = err(Json::array());
  EXPECT_TRUE(ends_with(e, cfg + "'quantization' is not a JSON object")) << e;
}

}  // namespace
}  // namespace kvlm
