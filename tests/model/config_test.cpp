// Config parsing and load errors: each bad checkpoint gives one exact message naming the file and
// the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>

#include "kvlm/model/config.h"
#include "model_test_util.h"

namespace kvlm::test {
namespace {

namespace fs = std::filesystem;

// A checkpoint directory sharing a fixture's weights with an edited config.json.
class EditedFixture {
 public:
  EditedFixture(const std::string& fixture, const std::function<void(Json&)>& edit) {
    static std::atomic<int> counter{0};
    dir_ = (fs::temp_directory_path() /
            ("kvlm_model_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++)))
               .string();
    fs::create_directories(dir_);
    const std::string src = fixture_dir(fixture);
    fs::create_symlink(src + "/model.safetensors", dir_ + "/model.safetensors");
    fs::copy_file(src + "/generation_config.json", dir_ + "/generation_config.json");
    Json config = read_json_file(src + "/config.json");
    edit(config);
    write_file(dir_ + "/config.json", config.dump(2));
  }
  ~EditedFixture() { fs::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

std::string load_error(const std::string& dir) {
  try {
    Model::load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelLoad, UnknownArchitectureNamesItAndTheSupportedList) {
  EditedFixture f("llama_tied", [](Json& c) { c["architectures"] = {"GPT2LMHeadModel"}; });
  EXPECT_EQ(load_error(f.dir()),
            f.dir() + "/config.json: unsupported architecture 'GPT2LMHeadModel' (supported: "
                      "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");
}

TEST(ModelLoad, MissingRequiredFieldsAreNamed) {
  for (const char* field : {"hidden_size", "num_hidden_layers", "num_attention_heads",
                            "intermediate_size", "vocab_size", "architectures"}) {
    EditedFixture f("qwen2_tied", [&](Json& c) { c.erase(field); });
    EXPECT_EQ(load_error(f.dir()),
              f.dir() + "/config.json: missing required field '" + field + "'");
  }
}

TEST(ModelLoad, WeightShapeMismatchNamesTensorAndBothShapes) {
  EditedFixture f("llama_tied", [](Json& c) { c["intermediate_size"] = 96; });
  EXPECT_EQ(load_error(f.dir()),
            f.dir() + "/model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape "
                      "[128, 64], expected [96, 64]");
}

TEST(ModelLoad, MissingTensorIsNamed) {
  // A llama checkpoint read as Qwen3 lacks the per-head q/k norms.
  EditedFixture f("llama_tied", [](Json& c) { c["architectures"] = {"Qwen3ForCausalLM"}; });
  EXPECT_EQ(load_error(f.dir()),
            f.dir() + ": missing tensor 'model.layers.0.self_attn.q_norm.weight'");
}

TEST(ModelLoad, UnsupportedRopeTypeIsNamed) {
  EditedFixture f("llama_tied", [](Json& c) { c["rope_parameters"]["rope_type"] = "longrope"; });
  EXPECT_EQ(load_error(f.dir()),
            f.dir() + "/config.json (rope_parameters): unsupported rope_type 'longrope' "
                      "(supported: default, linear, dynamic, llama3, yarn)");
}

TEST(ModelLoad, MissingRopeFactorIsNamed) {
  EditedFixture f("llama3_rope", [](Json& c) { c["rope_parameters"].erase("low_freq_factor"); });
  EXPECT_EQ(load_error(f.dir()),
            f.dir() + "/config.json (rope_parameters): missing required field 'low_freq_factor'");
}

// transformers v4 spelled RoPE as top-level rope_theta plus rope_scaling; both must give the same
// model.
TEST(ModelLoad, TransformersV4RopeSpellingGivesTheSameLogits) {
  const Golden g = load_golden("llama3_rope");
  EditedFixture f("llama3_rope", [](Json& c) {
    Json rope = c["rope_parameters"];
    c["rope_theta"] = rope["rope_theta"];
    rope.erase("rope_theta");
    c["rope_scaling"] = rope;
    c.erase("rope_parameters");
  });
  auto v4 = Model::load(f.dir());
  auto v5 = Model::load(fixture_dir("llama3_rope"));
  EXPECT_TRUE(same_bits(run_chunked(*v4, g.prompt, 0), run_chunked(*v5, g.prompt, 0)));
}

// Relative max difference between the goldens of fixture `name` (prompt logits and teacher-forced
// decode) and a model loaded with an edited config.
double edited_rel_diff(const std::string& name, const std::function<void(Json&)>& edit) {
  const Golden g = load_golden(name);
  EditedFixture f(name, edit);
  auto model = Model::load(f.dir());
  KVSequence seq(model->kv_pool());
  std::vector<float> got = run_chunk(*model, seq, g.prompt);
  for (int32_t tok : g.decode_tokens) {
    const std::vector<float> l = run_chunk(*model, seq, {tok});
    got.insert(got.end(), l.begin(), l.end());
  }
  std::vector<float> ref = g.prefill;
  ref.insert(ref.end(), g.decode.begin(), g.decode.end());
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(got[i]) - double(ref[i])));
    max_ref = std::max(max_ref, std::fabs(double(ref[i])));
  }
  return max_diff / max_ref;
}

// The RoPE-scaling and sliding-window fixtures would pass vacuously if their feature changed
// nothing at their lengths: without it their logits must leave the parity tolerance.
TEST(ModelLoad, RopeScalingFixturesDependOnTheirScaling) {
  for (const char* name : {"llama3_rope", "yarn_rope", "dynamic_rope", "linear_rope_mistral_swa"}) {
    EXPECT_GT(edited_rel_diff(name, [](Json& c) {
                c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
              }),
              1e-3)
        << name;
  }
}

TEST(ModelLoad, SlidingWindowFixtureDependsOnItsWindow) {
  EXPECT_GT(edited_rel_diff("linear_rope_mistral_swa", [](Json& c) { c["sliding_window"] = nullptr; }),
            1e-3);
}

TEST(ModelConfig, ReadsFieldsDefaultsAndEosIds) {
  const Json c = {{"architectures", {"Qwen2ForCausalLM"}},
                  {"hidden_size", 64},
                  {"num_hidden_layers", 3},
                  {"num_attention_heads", 4},
                  {"intermediate_size", 128},
                  {"vocab_size", 100},
                  {"eos_token_id", 5},
                  {"bos_token_id", 1},
                  {"sliding_window", 32},
                  {"use_sliding_window", true},
                  {"max_window_layers", 1},
                  {"rope_theta", 500000.0}};
  const Json gen = {{"eos_token_id", {7, 5}}};
  const ModelConfig m = parse_model_config(c, gen, "x/config.json");
  EXPECT_EQ(m.arch, Architecture::kQwen2);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.head_dim, 16);
  EXPECT_EQ(m.max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(m.rms_norm_eps, 1e-6f);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_EQ(m.eos_token_ids, (std::vector<int32_t>{5, 7}));
  EXPECT_EQ(m.bos_token_id, 1);
  EXPECT_EQ(m.layer_window, (std::vector<int64_t>{0, 32, 32}));
  EXPECT_EQ(m.rope.type, ops::RopeParams::Type::kDefault);
  EXPECT_EQ(m.rope.theta, 500000.0);
  EXPECT_EQ(m.rope.rotary_dim, 16);
  EXPECT_EQ(m.embedding_scale, 1.0f);
  EXPECT_EQ(m.residual_scale, 1.0f);
  EXPECT_EQ(m.logit_divisor, 1.0f);
}

TEST(ModelConfig, SlidingWindowRulesPerArchitecture) {
  Json c = {{"architectures", {"MistralForCausalLM"}}, {"hidden_size", 64},
            {"num_hidden_layers", 2}, {"num_attention_heads", 4},
            {"intermediate_size", 128}, {"vocab_size", 100}, {"sliding_window", nullptr}};
  EXPECT_EQ(parse_model_config(c, {}, "c").layer_window, (std::vector<int64_t>{0, 0}));
  c["sliding_window"] = 8;
  EXPECT_EQ(parse_model_config(c, {}, "c").layer_window, (std::vector<int64_t>{8, 8}));
  c["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_EQ(parse_model_config(c, {}, "c").layer_window, (std::vector<int64_t>{0, 8}));
  c["architectures"] = {"Qwen3ForCausalLM"};  // qwen slides only with use_sliding_window
  EXPECT_EQ(parse_model_config(c, {}, "c").layer_window, (std::vector<int64_t>{0, 0}));
}

TEST(ModelConfig, MiniCpmScalingFactors) {
  const Json c = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64},
                  {"num_hidden_layers", 4}, {"num_attention_heads", 4},
                  {"intermediate_size", 128}, {"vocab_size", 100}, {"scale_emb", 12},
                  {"scale_depth", 1.4}, {"dim_model_base", 16}};
  const ModelConfig m = parse_model_config(c, {}, "c");
  EXPECT_EQ(m.embedding_scale, 12.0f);
  EXPECT_EQ(m.residual_scale, float(1.4 / 2.0));
  EXPECT_EQ(m.logit_divisor, 4.0f);
}

TEST(ModelConfig, HiddenActivation) {
  Json c = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64},
            {"num_hidden_layers", 4}, {"num_attention_heads", 4},
            {"intermediate_size", 128}, {"vocab_size", 100}};
  EXPECT_EQ(parse_model_config(c, {}, "c").mlp_activation, ops::GateActivation::kSiLU);
  c["hidden_act"] = "gelu_pytorch_tanh";
  EXPECT_EQ(parse_model_config(c, {}, "c").mlp_activation, ops::GateActivation::kGeluTanh);
  c["hidden_act"] = "relu";
  try {
    parse_model_config(c, {}, "m/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "m/config.json: unsupported hidden_act 'relu' (supported: silu, gelu_pytorch_tanh)");
  }
}

TEST(ModelConfig, HeadsMustDivide) {
  const Json c = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64},
                  {"num_hidden_layers", 4}, {"num_attention_heads", 4},
                  {"num_key_value_heads", 3}, {"intermediate_size", 128}, {"vocab_size", 100}};
  try {
    parse_model_config(c, {}, "m/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "m/config.json: num_attention_heads 4 is not a multiple of num_key_value_heads 3");
  }
}

}  // namespace
}  // namespace kvlm::test
