#pragma once
// Helpers shared by the model tests: fixture paths, goldens, and running token lists through a
// Model.
#include <cstring>
#include <string>
#include <vector>

#include "kvlm/base/file.h"
#include "kvlm/base/json.h"
#include "kvlm/model/model.h"

namespace kvlm::test {

inline std::string fixture_dir(const std::string& name) {
  return std::string(KVLM_TEST_DATA) + "/models/" + name;
}

// Every fixture made by tools/model_fixtures.py.
inline const std::vector<std::string>& fixture_names() {
  static const std::vector<std::string> names = {
      "llama_tied",   "llama_untied_bias", "llama3_rope", "yarn_rope",
      "dynamic_rope", "linear_rope_mistral_swa", "qwen2_tied", "qwen2_untied",
      "qwen3_tied",   "qwen3_untied",      "minicpm_llama"};
  return names;
}

struct Golden {
  Json meta;
  std::vector<int32_t> prompt, decode_tokens, greedy_tokens;
  std::vector<float> prefill, decode;  // [rows, vocab] row-major
  int vocab = 0;
};

inline std::vector<float> read_f32_file(const std::string& path) {
  const std::string bytes = read_file(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

inline Golden load_golden(const std::string& name) {
  const std::string dir = fixture_dir(name);
  Golden g;
  g.meta = read_json_file(dir + "/golden.json");
  g.prompt = g.meta.at("prompt").get<std::vector<int32_t>>();
  g.decode_tokens = g.meta.at("decode_tokens").get<std::vector<int32_t>>();
  g.greedy_tokens = g.meta.at("greedy_tokens").get<std::vector<int32_t>>();
  g.vocab = g.meta.at("vocab_size").get<int>();
  g.prefill = read_f32_file(dir + "/golden_prefill.f32");
  g.decode = read_f32_file(dir + "/golden_decode.f32");
  return g;
}

// Runs `tokens` as the next chunk of one sequence and returns the logits of every row, flattened.
inline std::vector<float> run_chunk(Model& m, KVSequence& seq, const std::vector<int32_t>& tokens) {
  Batch b;
  b.tokens = tokens;
  b.seqs = {{&seq, seq.length(), int32_t(tokens.size())}};
  for (int32_t i = 0; i < int32_t(tokens.size()); ++i) b.logit_rows.push_back(i);
  const Tensor logits = m.forward(b);
  return logits.to_f32_vector();
}

// Runs `tokens` through a fresh sequence in chunks of `chunk` tokens (0 = one shot); all rows.
inline std::vector<float> run_chunked(Model& m, const std::vector<int32_t>& tokens, size_t chunk) {
  KVSequence seq(m.kv_pool());
  if (chunk == 0) chunk = tokens.size();
  std::vector<float> out;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const std::vector<int32_t> part(tokens.begin() + long(i),
                                    tokens.begin() + long(std::min(tokens.size(), i + chunk)));
    const std::vector<float> l = run_chunk(m, seq, part);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace kvlm::test
