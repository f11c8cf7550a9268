#pragma once
// Model: a loaded checkpoint of the llama family (LlamaForCausalLM incl. MiniCPM-style scaling,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM) and its forward pass over a flattened
// varlen batch (DESIGN.md §3): the new tokens of several sequences concatenated, each sequence
// attending only to its own paged KV. Weights are borrowed from the mmapped checkpoint.
//
// Usage, one sequence:
//   auto model = Model::load(dir);
//   KVSequence seq(model->kv_pool());
//   Batch b;  b.tokens = prompt;  b.seqs = {{&seq, 0, int32_t(prompt.size())}};
//   Tensor logits = model->forward(b);          // [1, vocab]: the last prompt token's logits
//   b.tokens = {next};  b.seqs = {{&seq, seq.length(), 1}};  model->forward(b);  ...
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvlm/backend/ops.h"
#include "kvlm/kv/kv_cache.h"
#include "kvlm/kv/kv_quant.h"
#include "kvlm/model/config.h"
#include "kvlm/tensor/tensor.h"

namespace kvlm {

struct ModelLoadOptions {
  // KV pool size in bytes; 0 = room for one sequence of max_position_embeddings tokens, at least
  // 4096 (RoPE scaling runs past the trained length) and at most 32768. The pool's pages are only
  // touched when tokens are written.
  int64_t kv_budget_bytes = 0;
  // The KV codec of every layer (--kv-quant ...). The default "off" is the exact f32 cache;
  // affine scales take the model dtype (that of the embedding table or its scales). A codec
  // that does not support the model's head_dim makes load fail with the codec's message.
  KVQuantOptions kv_quant;
  int kv_block_size = 16;
  // How linear layers multiply by MLX affine 4- and 8-bit weights (--matmul): int8 activations
  // with integer dot products (cpu/linear_int8.h; the default since its mean KL against the exact
  // path is ~3e-4 on the default model and fixtures, docs/decisions.md) or exact dequantization.
  // Dense weights and other code widths are always exact. The same choice applies to attention's
  // scores against compressed keys (AttentionParams::kv_path: int8 queries against MLX affine
  // 4/8-bit and TurboQuant k4/k8 codes, cpu/attention_codes.h).
  ops::MatmulPath matmul = ops::MatmulPath::kInt8;
  // Copy dense weights into the panel order of cpu/panels.h at load (ops::panel_weight,
  // --weight-layout panels): the order the kernels read. The checkpoint's pages of each copied
  // weight are released, so the weights stay resident once. false keeps them as views of the
  // mmapped checkpoint, and every linear call packs the panels it reads (the same results).
  bool panel_weights = true;
};

// One sequence's slice of a Batch.
struct SequenceBatchView {
  KVSequence* kv = nullptr;  // the sequence's block table; must hold exactly n_past tokens
  int32_t n_past = 0;        // tokens already in the KV cache
  int32_t n_new = 0;         // new tokens of this sequence in Batch::tokens, at positions n_past+i
};

struct Batch {
  std::vector<int32_t> tokens;          // all new tokens, sequences concatenated in `seqs` order
  std::vector<SequenceBatchView> seqs;  // sum of n_new == tokens.size()
  std::vector<int32_t> logit_rows;      // rows of `tokens` whose logits are wanted;
                                        // empty = the last row of each sequence
  bool want_logits = true;              // false: only fill the KV cache (a prefill chunk whose
                                        // logits nobody reads); forward returns [0, vocab]
};

class Model {
 public:
  // Errors: unsupported architecture, missing config fields, missing tensors or shape mismatches,
  // each naming the file and the problem.
  static std::unique_ptr<Model> load(const std::string& model_dir,
                                     const ModelLoadOptions& opts = {});
  ~Model();

  const ModelConfig& config() const;
  KVPool& kv_pool();

  // Runs the batch: writes the new tokens' K/V into each sequence's blocks (and advances its
  // length) and returns f32 logits [rows, vocab] for the requested rows, in the order of
  // logit_rows (or of seqs when logit_rows is empty). Blocks for every sequence are reserved before
  // any computation, so an out-of-blocks Error leaves every sequence's stored tokens unchanged.
  // One caller at a time, as the backend's thread pool takes one job at a time.
  Tensor forward(const Batch& batch);

  struct Impl;

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvlm
