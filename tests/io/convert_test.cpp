// kvlm convert: which tensors are quantized, the bytes written, the config block, sharding, and
// refusals.
#include "kvlm/io/convert.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <cmath>
#include <cstring>
#include <random>

#include "io_test_util.h"
#include "kvlm/base/half.h"
#include "kvlm/io/checkpoint.h"
#include "kvlm/io/safetensors_writer.h"

namespace kvlm {
namespace {

using testing::error_of;
using testing::TempDir;

Tensor random_bf16(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  Tensor t = Tensor::empty(shape, DType::kBF16);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = f32_to_bf16(nd(rng));
  return t;
}

// A tiny llama-shaped float checkpoint: hidden 64, MLP 96 (so down_proj's input of 96 does not
// divide by a group of 64), a RoPE table mlx-lm drops, tokenizer files.
void make_float_checkpoint(const std::string& dir, bool tied = false) {
  std::filesystem::create_directories(dir);
  Json cfg = {{"model_type", "llama"},
              {"architectures", {"LlamaForCausalLM"}},
              {"hidden_size", 64},
              {"intermediate_size", 96},
              {"torch_dtype", "bfloat16"},
              {"tie_word_embeddings", tied}};
  write_file(dir + "/config.json", cfg.dump());
  write_file(dir + "/generation_config.json", R"({"eos_token_id": 2})");
  write_file(dir + "/tokenizer.json", R"({"model": {}})");
  write_file(dir + "/tokenizer_config.json", R"({})");
  write_file(dir + "/pytorch_model.bin", "not copied");
  SafetensorsWriter w;
  w.add("model.embed_tokens.weight", random_bf16({32, 64}, 1));
  w.add("model.layers.0.self_attn.q_proj.weight", random_bf16({64, 64}, 2));
  w.add("model.layers.0.self_attn.q_proj.bias", random_bf16({64}, 3));
  w.add("model.layers.0.mlp.up_proj.weight", random_bf16({96, 64}, 4));
  w.add("model.layers.0.mlp.down_proj.weight", random_bf16({64, 96}, 5));
  w.add("model.layers.0.input_layernorm.weight", random_bf16({64}, 6));
  w.add("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::from_f32(std::vector<float>(16, 1), {16}));
  w.add("model.norm.weight", random_bf16({64}, 7));
  w.add("lm_head.weight", random_bf16({32, 64}, 8));
  w.write(dir + "/model.safetensors");
}

TEST(Convert, QuantizableWeights) {
  EXPECT_TRUE(is_quantizable_weight("model.layers.0.self_attn.q_proj.weight", {64, 64}));
  EXPECT_TRUE(is_quantizable_weight("model.embed_tokens.weight", {32, 64}));
  EXPECT_TRUE(is_quantizable_weight("lm_head.weight", {32, 64}));
  EXPECT_FALSE(is_quantizable_weight("model.norm.weight", {64}));
  EXPECT_FALSE(is_quantizable_weight("model.layers.0.self_attn.q_proj.bias", {64}));
  EXPECT_FALSE(is_quantizable_weight("model.layers.0.q_norm.weight", {2, 64}));
  EXPECT_FALSE(is_quantizable_weight("model.layers.0.conv1d.weight", {64, 1, 4}));
}

TEST(Convert, WritesAnMlxCheckpoint) {
  TempDir tmp;
  const std::string src = tmp.file("src"), dst = tmp.file("dst");
  make_float_checkpoint(src);
  std::vector<std::string> log;
  ConvertOptions opt{src, dst, {4, 64}, std::nullopt};
  ConvertReport r = convert_checkpoint(opt, [&](const std::string& l) { log.push_back(l); });
  EXPECT_EQ(r.quantized, 4);  // embed, q_proj, up_proj, lm_head
  EXPECT_EQ(r.skipped, 1);    // down_proj: 96 % 64 != 0
  EXPECT_EQ(r.kept_float, 4);  // down_proj, q_proj.bias, input_layernorm, norm
  EXPECT_EQ(r.shards, 1);
  EXPECT_EQ(r.dtype, DType::kBF16);

  Checkpoint in = Checkpoint::open(src), out = Checkpoint::open(dst);
  const Json& cfg = out.config();
  const Json want = {{"group_size", 64}, {"bits", 4}, {"mode", "affine"},
                     {"model.layers.0.mlp.down_proj", false}};
  EXPECT_EQ(cfg["quantization"], want);
  EXPECT_EQ(cfg["quantization_config"], want);
  EXPECT_EQ(cfg["hidden_size"], 64);
  EXPECT_TRUE(out.is_quantized());
  EXPECT_FALSE(out.has("model.layers.0.self_attn.rotary_emb.inv_freq"));

  // Quantized modules: packed weight, scales and biases, equal to the codec's output.
  const std::string q = "model.layers.0.self_attn.q_proj";
  EXPECT_EQ(out.info(q + ".weight").dtype, DType::kU32);
  EXPECT_EQ(out.info(q + ".weight").shape, (Shape{64, 8}));
  EXPECT_EQ(out.info(q + ".scales").dtype, DType::kBF16);
  EXPECT_EQ(out.info(q + ".scales").shape, (Shape{64, 1}));
  EXPECT_EQ(out.info(q + ".biases").shape, (Shape{64, 1}));
  AffineWeight ref = affine_quantize(in.tensor(q + ".weight"), {4, 64}, DType::kBF16);
  Tensor packed = out.tensor(q + ".weight");
  EXPECT_EQ(std::memcmp(packed.raw(), ref.packed.raw(), ref.packed.nbytes()), 0);
  EXPECT_EQ(std::memcmp(out.tensor(q + ".scales").raw(), ref.scales.raw(), ref.scales.nbytes()), 0);
  EXPECT_EQ(out.quantization_for(q)->bits, 4);
  EXPECT_EQ(out.quantization_for("model.embed_tokens")->group_size, 64);
  EXPECT_EQ(out.quantization_for("lm_head")->bits, 4);

  // Dequantized weights stay within one quantization step of the originals.
  Tensor deq = affine_dequantize({out.tensor(q + ".weight"), out.tensor(q + ".scales"),
                                  out.tensor(q + ".biases"), {4, 64}});
  const std::vector<float> orig = in.tensor(q + ".weight").to_f32_vector();
  const std::vector<float> sc = out.tensor(q + ".scales").to_f32_vector();
  for (size_t i = 0; i < orig.size(); ++i)
    EXPECT_LE(std::fabs(deq.data<float>()[i] - orig[i]), std::fabs(sc[i / 64]) * 1.01f) << i;

  // Skipped and float tensors are unchanged.
  EXPECT_EQ(out.quantization_for("model.layers.0.mlp.down_proj"), std::nullopt);
  EXPECT_EQ(out.info("model.layers.0.mlp.down_proj.weight").dtype, DType::kBF16);
  EXPECT_EQ(out.tensor("model.norm.weight").to_f32_vector(), in.tensor("model.norm.weight").to_f32_vector());
  EXPECT_EQ(out.quantization_for("model.norm"), std::nullopt);

  // Side files.
  EXPECT_TRUE(file_exists(dst + "/tokenizer.json"));
  EXPECT_TRUE(file_exists(dst + "/tokenizer_config.json"));
  EXPECT_EQ(out.generation_config()["eos_token_id"], 2);
  EXPECT_FALSE(file_exists(dst + "/pytorch_model.bin"));
  // The log names the skipped module.
  bool logged = false;
  for (const auto& l : log) logged |= l.find("model.layers.0.mlp.down_proj.weight") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST(Convert, TiedHeadIsDroppedAndDtypeOverrideCasts) {
  TempDir tmp;
  const std::string src = tmp.file("src"), dst = tmp.file("dst");
  make_float_checkpoint(src, /*tied=*/true);
  ConvertOptions opt{src, dst, {8, 32}, DType::kF32};
  ConvertReport r = convert_checkpoint(opt);
  EXPECT_EQ(r.skipped, 0);  // 96 % 32 == 0
  Checkpoint out = Checkpoint::open(dst);
  EXPECT_FALSE(out.has("lm_head.weight"));
  EXPECT_EQ(out.info("model.embed_tokens.weight").shape, (Shape{32, 16}));
  EXPECT_EQ(out.info("model.embed_tokens.scales").dtype, DType::kF32);
  EXPECT_EQ(out.info("model.norm.weight").dtype, DType::kF32);
  EXPECT_EQ(out.config()["torch_dtype"], "float32");
  EXPECT_EQ(out.config()["quantization"], (Json{{"group_size", 32}, {"bits", 8}, {"mode", "affine"}}));
}

TEST(Convert, ShardsWhenOverTheLimit) {
  TempDir tmp;
  const std::string src = tmp.file("src"), dst = tmp.file("dst");
  make_float_checkpoint(src);
  ConvertOptions opt{src, dst, {4, 32}, std::nullopt, 4096};
  ConvertReport r = convert_checkpoint(opt);
  EXPECT_GT(r.shards, 1);
  EXPECT_TRUE(file_exists(dst + "/model.safetensors.index.json"));
  EXPECT_TRUE(file_exists(dst + "/model-00001-of-0000" + std::to_string(r.shards) + ".safetensors"));
  EXPECT_FALSE(file_exists(dst + "/model.safetensors"));
  Checkpoint out = Checkpoint::open(dst);
  EXPECT_EQ(out.names().size(), 5u * 3 + 3);  // group 32 quantizes down_proj too
  const Json index = read_json_file(dst + "/model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"], r.bytes_out);
}

TEST(Convert, RefusesQuantizedSourceAndOccupiedDestination) {
  TempDir tmp;
  const std::string src = tmp.file("src"), dst = tmp.file("dst");
  make_float_checkpoint(src);
  convert_checkpoint({src, dst, {4, 64}, std::nullopt});
  EXPECT_EQ(error_of([&] { convert_checkpoint({dst, tmp.file("again"), {4, 64}, std::nullopt}); }),
            dst + "/config.json: the checkpoint is already quantized; convert needs a float one");
  EXPECT_FALSE(std::filesystem::exists(tmp.file("again")));
  EXPECT_EQ(error_of([&] { convert_checkpoint({src, dst, {4, 64}, std::nullopt}); }),
            dst + ": destination exists and is not an empty directory; remove it or choose another "
                  "path");
  EXPECT_EQ(error_of([&] { convert_checkpoint({src, tmp.file("x"), {7, 64}, std::nullopt}); }),
            "convert: unsupported MLX quantization bits=7 group_size=64 (bits must be 2, 3, 4, 5, "
            "6 or 8; group_size 32, 64 or 128)");
  // Packed weights without a quantization block are refused too.
  Json cfg = read_json_file(dst + "/config.json");
  cfg.erase("quantization");
  cfg.erase("quantization_config");
  write_file(dst + "/config.json", cfg.dump());
  EXPECT_EQ(error_of([&] { convert_checkpoint({dst, tmp.file("y"), {4, 64}, std::nullopt}); }),
            dst + ": tensor 'lm_head.weight' is MLX-quantized though config.json has no "
                  "quantization block; convert needs a float checkpoint");
}

TEST(Convert, BadConfigFieldIsNamed) {
  TempDir tmp;
  const std::string src = tmp.file("src");
  make_float_checkpoint(src);
  Json cfg = read_json_file(src + "/config.json");
  cfg["tie_word_embeddings"] = "yes";
  write_file(src + "/config.json", cfg.dump());
  EXPECT_EQ(error_of([&] { convert_checkpoint({src, tmp.file("dst"), {4, 64}, std::nullopt}); }),
            src + "/config.json: field 'tie_word_embeddings' has the wrong type (\"yes\")");
}

// The bundled default model (a real trained llama) converts at every width; each quantized
// matrix dequantizes within one step per weight and within a relative error that shrinks with
// the width.
TEST(Convert, DefaultModelAtEveryWidth) {
  const std::string model = std::string(KVLM_MODELS_DIR) + "/default";
  if (!file_exists(model + "/config.json")) GTEST_SKIP() << "no bundled model at " << model;
  const Checkpoint in = Checkpoint::open(model);
  double previous = 1e9;
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    TempDir tmp;
    convert_checkpoint({model, tmp.file("q"), {bits, 64}, std::nullopt});
    const Checkpoint out = Checkpoint::open(tmp.file("q"));
    double err2 = 0, ref2 = 0;
    int modules = 0;
    for (const std::string& n : in.names()) {
      if (!is_quantizable_weight(n, in.info(n).shape)) continue;
      const std::string m = n.substr(0, n.size() - 7);
      const AffineWeight w = out.affine_weight(m, in.info(n).shape);
      ASSERT_EQ(w.spec.bits, bits);
      const Tensor deq = affine_dequantize(w);
      const std::vector<float> x = in.tensor(n).to_f32_vector();
      const std::vector<float> sc = w.scales.to_f32_vector();
      const std::vector<float> bi = w.biases.to_f32_vector();
      const double n_bins = double((1 << bits) - 1);
      for (size_t i = 0; i < x.size(); ++i) {
        const double e = double(deq.data<float>()[i]) - x[i];
        // At most one step (half a step, or a full one for a clamped code), plus what storing the
        // scale and bias in bf16 (relative error <= 2^-9 each) moves the grid point.
        const double step = std::fabs(sc[i / 64]);
        const double bound = step + (std::fabs(bi[i / 64]) + n_bins * step) / 256.0 + 1e-7;
        ASSERT_LE(std::fabs(e), bound) << n << " bits " << bits << " i " << i;
        err2 += e * e;
        ref2 += double(x[i]) * x[i];
      }
      ++modules;
    }
    EXPECT_GT(modules, 0);
    const double rel = std::sqrt(err2 / ref2);
    EXPECT_LT(rel, previous) << "bits " << bits;
    previous = rel;
    if (bits == 4) {
      EXPECT_LT(rel, 0.12);
    }
    if (bits == 8) {
      EXPECT_LT(rel, 0.01);
    }
    std::printf("default model, %d-bit g64: relative weight error %.4f\n", bits, rel);
  }
}

}  // namespace
}  // namespace kvlm
