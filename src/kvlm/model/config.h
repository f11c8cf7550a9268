#pragma once
// ModelConfig: the architecture parameters kvlm reads from a checkpoint's config.json (and
// generation_config.json), for the llama family.
#include <cstdint>
#include <string>
#include <vector>

#include "kvlm/backend/ops.h"
#include "kvlm/base/json.h"

namespace kvlm {

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3 };

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string architecture;  // as spelled in config.json, e.g. "LlamaForCausalLM"
  std::string model_type;    // config.json "model_type" (informational)

  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;  // config value; a checkpoint without lm_head is tied anyway
  ops::RopeParams rope;
  bool qk_norm = false;  // Qwen3: RMSNorm of each q and k head before RoPE
  // MLP gate activation from "hidden_act": silu (default) or tanh-approximated GELU.
  ops::GateActivation mlp_activation = ops::GateActivation::kSiLU;

  // Sliding-window attention per layer: 0 = full attention.
  std::vector<int64_t> layer_window;

  // MiniCPM-style scaling (1 when the config lacks the fields): embeddings are multiplied by
  // embedding_scale, each residual branch by residual_scale, and the final hidden state is
  // divided by logit_divisor before the head.
  float embedding_scale = 1.0f;
  float residual_scale = 1.0f;
  float logit_divisor = 1.0f;

  std::vector<int32_t> eos_token_ids;  // config.json and generation_config.json, deduplicated
  int32_t bos_token_id = -1;           // -1 = none
};

// Parses a config (text_config already merged) and generation config. `origin` names the file in
// errors ("<dir>/config.json"): "unsupported architecture 'X' (supported: ...)", "missing required
// field 'hidden_size'", ...
ModelConfig parse_model_config(const Json& config, const Json& generation_config,
                               const std::string& origin);

// The RoPE parameters of a config, accepting transformers v4 ("rope_theta" + "rope_scaling") and
// v5 ("rope_parameters") spellings.
ops::RopeParams parse_rope_params(const Json& config, int head_dim, int64_t max_position_embeddings,
                                  const std::string& origin);

}  // namespace kvlm
