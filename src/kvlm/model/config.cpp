#include "kvlm/model/config.h"

#include <algorithm>
#include <cmath>

#include "kvlm/base/error.h"

namespace kvlm {

namespace {

struct ArchName {
  const char* name;
  Architecture arch;
};
constexpr ArchName kArchitectures[] = {
    {"LlamaForCausalLM", Architecture::kLlama},
    {"MistralForCausalLM", Architecture::kMistral},
    {"Qwen2ForCausalLM", Architecture::kQwen2},
    {"Qwen3ForCausalLM", Architecture::kQwen3},
};

std::string supported_list() {
  std::string s;
  for (const ArchName& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

Architecture parse_architecture(const Json& config, const std::string& origin, std::string* name) {
  if (!config.contains("architectures") || !config["architectures"].is_array() ||
      config["architectures"].empty() || !config["architectures"][0].is_string())
    throw Error(origin + ": missing required field 'architectures'");
  *name = config["architectures"][0].get<std::string>();
  for (const ArchName& a : kArchitectures)
    if (*name == a.name) return a.arch;
  throw Error(origin + ": unsupported architecture '" + *name + "' (supported: " +
              supported_list() + ")");
}

int positive_int(const Json& config, const char* key, const std::string& origin) {
  const int v = json_get<int>(config, key, origin);
  check(v > 0, origin + ": field '" + key + "' must be positive, got " + std::to_string(v));
  return v;
}

// An int or a list of ints (eos_token_id may be either); appended without duplicates.
void collect_ids(const Json& obj, const char* key, std::vector<int32_t>& ids) {
  if (!obj.is_object() || !obj.contains(key)) return;
  const Json& v = obj[key];
  auto add = [&](const Json& x) {
    if (!x.is_number_integer()) return;
    const int32_t id = x.get<int32_t>();
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (v.is_array()) {
    for (const Json& x : v) add(x);
  } else {
    add(v);
  }
}

// Per-layer sliding windows. transformers' rules: an explicit "layer_types" list wins; Mistral
// slides every layer when sliding_window is set; Qwen2/Qwen3 slide only with use_sliding_window,
// from layer max_window_layers on.
std::vector<int64_t> parse_windows(const Json& c, Architecture arch, int layers,
                                   const std::string& origin) {
  std::vector<int64_t> windows(size_t(layers), 0);
  const int64_t window = json_get_or<int64_t>(c, "sliding_window", 0, origin);
  const bool qwen = arch == Architecture::kQwen2 || arch == Architecture::kQwen3;
  if (window <= 0) return windows;
  if (qwen && !json_get_or<bool>(c, "use_sliding_window", false, origin)) return windows;
  if (c.contains("layer_types") && c["layer_types"].is_array()) {
    const Json& types = c["layer_types"];
    check(int(types.size()) == layers, origin + ": field 'layer_types' has " +
                                           std::to_string(types.size()) + " entries for " +
                                           std::to_string(layers) + " layers");
    for (int i = 0; i < layers; ++i)
      if (types[size_t(i)] == "sliding_attention") windows[size_t(i)] = window;
    return windows;
  }
  const int first = qwen ? json_get_or<int>(c, "max_window_layers", 0, origin) : 0;
  for (int i = std::max(first, 0); i < layers; ++i) windows[size_t(i)] = window;
  return windows;
}

// transformers' ACT2FN names for the two gates kvlm implements ("gelu_new" and "gelu_fast" are
// tanh approximations of GELU too).
ops::GateActivation parse_activation(const std::string& act, const std::string& origin) {
  if (act == "silu" || act == "swish") return ops::GateActivation::kSiLU;
  if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast")
    return ops::GateActivation::kGeluTanh;
  throw Error(origin + ": unsupported hidden_act '" + act + "' (supported: silu, gelu_pytorch_tanh)");
}

}  // namespace

ops::RopeParams parse_rope_params(const Json& c, int head_dim, int64_t max_position_embeddings,
                                  const std::string& origin) {
  using Type = ops::RopeParams::Type;
  // v5 spells it "rope_parameters" (theta inside); v4 "rope_scaling" (nullable) + "rope_theta".
  Json rp = Json::object();
  std::string where = origin;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (c.contains(key) && c[key].is_object()) {
      rp = c[key];
      where = origin + " (" + key + ")";
      break;
    }
  }
  ops::RopeParams p;
  p.theta = json_get_or<double>(rp, "rope_theta", json_get_or<double>(c, "rope_theta", 10000.0, origin), where);
  const double partial = json_get_or<double>(
      rp, "partial_rotary_factor", json_get_or<double>(c, "partial_rotary_factor", 1.0, origin), where);
  p.rotary_dim = int(double(head_dim) * partial);
  p.max_position_embeddings = max_position_embeddings;
  std::string type = json_get_or<std::string>(rp, "rope_type", json_get_or<std::string>(rp, "type", "default", where), where);
  if (type == "default") {
    p.type = Type::kDefault;
  } else if (type == "linear") {
    p.type = Type::kLinear;
    p.factor = json_get<double>(rp, "factor", where);
  } else if (type == "dynamic") {
    p.type = Type::kDynamic;
    p.factor = json_get<double>(rp, "factor", where);
  } else if (type == "llama3") {
    p.type = Type::kLlama3;
    p.factor = json_get<double>(rp, "factor", where);
    p.low_freq_factor = json_get<double>(rp, "low_freq_factor", where);
    p.high_freq_factor = json_get<double>(rp, "high_freq_factor", where);
    p.original_max_position_embeddings = json_get<int64_t>(rp, "original_max_position_embeddings", where);
  } else if (type == "yarn") {
    p.type = Type::kYarn;
    p.original_max_position_embeddings =
        json_get_or<int64_t>(rp, "original_max_position_embeddings", max_position_embeddings, where);
    p.factor = json_get_or<double>(rp, "factor",
                                   double(max_position_embeddings) / double(p.original_max_position_embeddings),
                                   where);
    if (rp.contains("attention_factor") && !rp["attention_factor"].is_null())
      p.attention_factor = json_get<double>(rp, "attention_factor", where);
    if (rp.contains("mscale") && !rp["mscale"].is_null()) p.mscale = json_get<double>(rp, "mscale", where);
    if (rp.contains("mscale_all_dim") && !rp["mscale_all_dim"].is_null())
      p.mscale_all_dim = json_get<double>(rp, "mscale_all_dim", where);
    // transformers reads these with `or`, so 0 means the default too.
    const double fast = json_get_or<double>(rp, "beta_fast", 0.0, where);
    const double slow = json_get_or<double>(rp, "beta_slow", 0.0, where);
    p.beta_fast = fast != 0.0 ? fast : 32.0;
    p.beta_slow = slow != 0.0 ? slow : 1.0;
    p.truncate = json_get_or<bool>(rp, "truncate", true, where);
  } else {
    throw Error(where + ": unsupported rope_type '" + type +
                "' (supported: default, linear, dynamic, llama3, yarn)");
  }
  check(p.rotary_dim > 0 && p.rotary_dim % 2 == 0 && p.rotary_dim <= head_dim,
        where + ": rotary dimension " + std::to_string(p.rotary_dim) + " is not an even number in (0, head_dim]");
  check(p.factor > 0.0, where + ": field 'factor' must be positive");
  return p;
}

ModelConfig parse_model_config(const Json& c, const Json& gen, const std::string& origin) {
  ModelConfig m;
  m.arch = parse_architecture(c, origin, &m.architecture);
  m.model_type = json_get_or<std::string>(c, "model_type", "", origin);
  m.hidden_size = positive_int(c, "hidden_size", origin);
  m.num_layers = positive_int(c, "num_hidden_layers", origin);
  m.num_heads = positive_int(c, "num_attention_heads", origin);
  m.intermediate_size = positive_int(c, "intermediate_size", origin);
  m.vocab_size = positive_int(c, "vocab_size", origin);
  m.num_kv_heads = json_get_or<int>(c, "num_key_value_heads", m.num_heads, origin);
  check(m.num_kv_heads > 0 && m.num_heads % m.num_kv_heads == 0,
        origin + ": num_attention_heads " + std::to_string(m.num_heads) +
            " is not a multiple of num_key_value_heads " + std::to_string(m.num_kv_heads));
  m.head_dim = json_get_or<int>(c, "head_dim", m.hidden_size / m.num_heads, origin);
  check(m.head_dim > 0, origin + ": field 'head_dim' must be positive");
  m.max_position_embeddings = json_get_or<int64_t>(c, "max_position_embeddings", 2048, origin);
  m.rms_norm_eps = float(json_get_or<double>(c, "rms_norm_eps", 1e-6, origin));
  m.tie_word_embeddings = json_get_or<bool>(c, "tie_word_embeddings", false, origin);
  m.rope = parse_rope_params(c, m.head_dim, m.max_position_embeddings, origin);
  m.qk_norm = m.arch == Architecture::kQwen3;
  m.mlp_activation = parse_activation(json_get_or<std::string>(c, "hidden_act", "silu", origin), origin);
  m.layer_window = parse_windows(c, m.arch, m.num_layers, origin);

  // MiniCPM: embeddings * scale_emb, residual branches * scale_depth / sqrt(layers), final hidden
  // / (hidden_size / dim_model_base). The factors are Python floats applied to f32 tensors.
  m.embedding_scale = float(json_get_or<double>(c, "scale_emb", 1.0, origin));
  if (c.contains("scale_depth") && !c["scale_depth"].is_null())
    m.residual_scale = float(json_get<double>(c, "scale_depth", origin) / std::sqrt(double(m.num_layers)));
  if (c.contains("dim_model_base") && !c["dim_model_base"].is_null())
    m.logit_divisor = float(double(m.hidden_size) / json_get<double>(c, "dim_model_base", origin));

  collect_ids(c, "eos_token_id", m.eos_token_ids);
  collect_ids(gen, "eos_token_id", m.eos_token_ids);
  std::vector<int32_t> bos;
  collect_ids(c, "bos_token_id", bos);
  collect_ids(gen, "bos_token_id", bos);
  if (!bos.empty()) m.bos_token_id = bos[0];
  return m;
}

}  // namespace kvlm
