#include "kvlm/model/model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "kvlm/base/error.h"
#include "kvlm/io/checkpoint.h"

namespace kvlm {

namespace {

struct LayerWeights {
  Tensor input_norm, post_attention_norm, q_norm, k_norm;
  ops::Weight q, k, v, o, gate, up, down;
  ops::AttentionParams attention;
  // Read ahead before the op ahead of each linear: o, gate and down within the layer, q/k/v from
  // the layer before. Made once the layers stop moving (they point at the weights above).
  ops::ReadAheadPlan qkv_ahead, o_ahead, gate_ahead, down_ahead;
};

// How the model reads a weight: multiplied (linear layers, a tied vocabulary projection), or only
// gathered from (an untied embedding table), for which embedding() reads the checkpoint's rows and
// a copy in kernel order would only take memory.
enum class WeightUse { kMatmul, kGather };

// A linear module `name` ([out, in]) in whichever format the checkpoint stores it, with its
// optional additive bias; when multiplied, affine weights with the copy of their matmul path
// (ops::int8_weight, or on the exact path ops::panel_weight's affine panels) and, with `panels`,
// dense weights in the kernels' panel layout (ops::panel_weight).
ops::Weight load_linear(const Checkpoint& ck, const std::string& name, int64_t out, int64_t in,
                        ops::MatmulPath matmul, bool panels, WeightUse use = WeightUse::kMatmul) {
  const Tensor bias = ck.has(name + ".bias") ? ck.tensor_checked(name + ".bias", {out}) : Tensor();
  if (const std::optional<AffineSpec> q = ck.quantization_for(name)) {
    check_affine_spec(*q, name);
    check(in % q->group_size == 0, name + ": input width " + std::to_string(in) +
                                       " is not a multiple of the group size " +
                                       std::to_string(q->group_size));
    const Tensor packed = ck.tensor_checked(name + ".weight", {out, affine_packed_words(in, q->bits)});
    const Tensor scales = ck.tensor_checked(name + ".scales", {out, in / q->group_size});
    const Tensor biases = ck.tensor_checked(name + ".biases", {out, in / q->group_size});
    ops::Weight w = ops::affine_weight(packed, scales, biases, *q, bias);
    if (use == WeightUse::kGather) return w;
    w.matmul = matmul;
    w = ops::panel_weight(ops::int8_weight(w));
    // As for panels below: the int8 path and the exact one read only their copies, and the reads
    // that remain (embedding rows of a tied table) page their rows back in from the page cache.
    if (w.int8_tiles.defined() || w.affine_panels.defined())
      for (const char* part : {".weight", ".scales", ".biases"}) ck.release(name + part);
    return w;
  }
  const ops::Weight w = ops::dense_weight(ck.tensor_checked(name + ".weight", {out, in}), bias);
  if (!panels || use == WeightUse::kGather) return w;
  const ops::Weight copy = ops::panel_weight(w);
  // The checkpoint's pages of a copied weight are not read again: keeping them resident would
  // hold the dense weights twice.
  if (copy.panels) ck.release(name + ".weight");
  return copy;
}

// A norm's weight [n], widened to f32 once here rather than by every call of the norm (bit-exact:
// every float dtype widens exactly).
Tensor norm_weight(const Checkpoint& ck, const std::string& name, int64_t n) {
  return Tensor::from_f32(ck.tensor_checked(name, {n}).to_f32_vector(), {n});
}

// MLX conversions of multimodal checkpoints nest the text model under "language_model.".
std::string weight_prefix(const Checkpoint& ck) {
  for (const char* prefix : {"", "language_model."})
    if (ck.has(std::string(prefix) + "model.embed_tokens.weight")) return prefix;
  return "";  // the load below then names the missing tensor
}

int64_t default_kv_budget(const ModelConfig& c, const KVPoolConfig& pool) {
  const int64_t tokens = std::clamp<int64_t>(c.max_position_embeddings, 4096, 32768);
  const int64_t blocks = (tokens + pool.block_size - 1) / pool.block_size;
  return blocks * KVPool::bytes_per_block(pool);
}

}  // namespace

struct Model::Impl {
  Checkpoint ckpt;
  ModelConfig cfg;
  ops::Weight embed, head;
  ops::ReadAheadPlan head_ahead;
  Tensor final_norm;
  std::vector<LayerWeights> layers;
  std::unique_ptr<KVPool> pool;

  explicit Impl(Checkpoint c) : ckpt(std::move(c)) {}
  void load_weights(ops::MatmulPath matmul, bool panels);
  void check_batch(const Batch& b) const;
  // x is the normed input; xq, when the norm quantized it, its int8 activations for q/k/v (gate/up).
  Tensor attention_block(const LayerWeights& lw, int layer, const Tensor& x, const ops::QuantizedInput& xq,
                         const Batch& b, const Tensor& rotations) const;
  Tensor mlp_block(const LayerWeights& lw, int layer, const Tensor& x, const ops::QuantizedInput& xq) const;
};

void Model::Impl::load_weights(ops::MatmulPath matmul, bool panels) {
  const ModelConfig& c = cfg;
  const std::string p = weight_prefix(ckpt);
  const int64_t H = c.hidden_size, q_out = int64_t(c.num_heads) * c.head_dim,
                kv_out = int64_t(c.num_kv_heads) * c.head_dim, I = c.intermediate_size;
  const bool tied = c.tie_word_embeddings || !ckpt.has(p + "lm_head.weight");
  embed = load_linear(ckpt, p + "model.embed_tokens", c.vocab_size, H, matmul, panels,
                      tied ? WeightUse::kMatmul : WeightUse::kGather);
  head = tied ? embed : load_linear(ckpt, p + "lm_head", c.vocab_size, H, matmul, panels);
  final_norm = norm_weight(ckpt, p + "model.norm.weight", H);
  const float scale = float(std::pow(double(c.head_dim), -0.5));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string l = p + "model.layers." + std::to_string(i) + ".";
    LayerWeights w;
    w.input_norm = norm_weight(ckpt, l + "input_layernorm.weight", H);
    w.post_attention_norm = norm_weight(ckpt, l + "post_attention_layernorm.weight", H);
    w.q = load_linear(ckpt, l + "self_attn.q_proj", q_out, H, matmul, panels);
    w.k = load_linear(ckpt, l + "self_attn.k_proj", kv_out, H, matmul, panels);
    w.v = load_linear(ckpt, l + "self_attn.v_proj", kv_out, H, matmul, panels);
    w.o = load_linear(ckpt, l + "self_attn.o_proj", H, q_out, matmul, panels);
    if (c.qk_norm) {
      w.q_norm = norm_weight(ckpt, l + "self_attn.q_norm.weight", c.head_dim);
      w.k_norm = norm_weight(ckpt, l + "self_attn.k_norm.weight", c.head_dim);
    }
    w.gate = load_linear(ckpt, l + "mlp.gate_proj", I, H, matmul, panels);
    w.up = load_linear(ckpt, l + "mlp.up_proj", I, H, matmul, panels);
    w.down = load_linear(ckpt, l + "mlp.down_proj", H, I, matmul, panels);
    w.attention = {scale, c.layer_window[size_t(i)], matmul};
    layers.push_back(std::move(w));
  }
  for (LayerWeights& w : layers) {
    w.qkv_ahead = ops::ReadAheadPlan({&w.q, &w.k, &w.v});
    w.o_ahead = ops::ReadAheadPlan({&w.o});
    w.gate_ahead = ops::ReadAheadPlan({&w.gate});
    w.down_ahead = ops::ReadAheadPlan({&w.down});
  }
  head_ahead = ops::ReadAheadPlan({&head});
}

std::unique_ptr<Model> Model::load(const std::string& model_dir, const ModelLoadOptions& opts) {
  auto impl = std::make_unique<Impl>(Checkpoint::open(model_dir));
  impl->cfg = parse_model_config(impl->ckpt.config(), impl->ckpt.generation_config(),
                                 impl->ckpt.config_path());
  impl->load_weights(opts.matmul, opts.panel_weights);
  KVPoolConfig pc;
  pc.n_layers = impl->cfg.num_layers;
  pc.n_kv_heads = impl->cfg.num_kv_heads;
  pc.head_dim = impl->cfg.head_dim;
  pc.block_size = opts.kv_block_size;
  const ops::Weight& e = impl->embed;
  const DType model_dtype = e.quant ? e.scales.dtype() : e.weight.dtype();
  pc.codecs = resolve_kv_codecs(opts.kv_quant, pc.n_layers, model_dtype, model_dir);
  pc.budget_bytes = opts.kv_budget_bytes > 0 ? opts.kv_budget_bytes : default_kv_budget(impl->cfg, pc);
  impl->pool = std::make_unique<KVPool>(pc);
  return std::unique_ptr<Model>(new Model(std::move(impl)));
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
const ModelConfig& Model::config() const { return impl_->cfg; }
KVPool& Model::kv_pool() { return *impl_->pool; }

void Model::Impl::check_batch(const Batch& b) const {
  check(!b.seqs.empty(), "forward: the batch has no sequences");
  int64_t total = 0;
  std::set<const KVSequence*> seen;
  for (const SequenceBatchView& s : b.seqs) {
    check(s.kv != nullptr, "forward: a sequence has no KV block table");
    check(&s.kv->pool() == pool.get(), "forward: a sequence's KV lives in another model's pool");
    check(seen.insert(s.kv).second, "forward: a sequence appears twice in one batch");
    check(s.n_new > 0, "forward: a sequence has no new tokens");
    check(s.n_past == s.kv->length(),
          "forward: n_past " + std::to_string(s.n_past) + " differs from the " +
              std::to_string(s.kv->length()) + " tokens in the sequence's KV cache");
    total += s.n_new;
  }
  check(total == int64_t(b.tokens.size()),
        "forward: sequences hold " + std::to_string(total) + " new tokens but the batch has " +
            std::to_string(b.tokens.size()));
  for (int32_t r : b.logit_rows)
    check(r >= 0 && r < int64_t(b.tokens.size()),
          "forward: logit row " + std::to_string(r) + " outside the batch's " +
              std::to_string(b.tokens.size()) + " rows");
}

Tensor Model::Impl::attention_block(const LayerWeights& lw, int layer, const Tensor& x,
                                    const ops::QuantizedInput& xq, const Batch& b, const Tensor& rotations) const {
  const int64_t T = x.dim(0), Hq = cfg.num_heads, Hkv = cfg.num_kv_heads, D = cfg.head_dim;
  const ops::Weight* qkv_weights[] = {&lw.q, &lw.k, &lw.v};
  lw.o_ahead.post();
  const std::vector<Tensor> qkv = ops::linear_many(x, qkv_weights, xq);
  Tensor q = qkv[0].reshape({T, Hq, D});
  Tensor k = qkv[1].reshape({T, Hkv, D});
  const Tensor v = qkv[2].reshape({T, Hkv, D});
  if (cfg.qk_norm) {
    q = ops::rms_norm(q.reshape({T * Hq, D}), lw.q_norm, cfg.rms_norm_eps).reshape({T, Hq, D});
    k = ops::rms_norm(k.reshape({T * Hkv, D}), lw.k_norm, cfg.rms_norm_eps).reshape({T, Hkv, D});
  }
  ops::rope_inplace(q, rotations);
  ops::rope_inplace(k, rotations);
  // Every sequence's new K/V is stored first, then one attention call covers the whole batch.
  std::vector<ops::AttentionSequence> seqs;
  int64_t row = 0;
  for (const SequenceBatchView& s : b.seqs) {
    const ops::PagedKV kv = s.kv->layer_view(layer);
    const int64_t end = row + s.n_new;
    ops::kv_write(k.slice(0, row, end), v.slice(0, row, end), kv, s.n_past);
    seqs.push_back({q.slice(0, row, end), kv, s.n_past});
    row = end;
  }
  ops::QuantizedInput o_input;
  const Tensor attended = ops::attention_batch(seqs, lw.attention, &lw.o, &o_input);
  lw.gate_ahead.post();
  return ops::linear(attended, lw.o, o_input);
}

Tensor Model::Impl::mlp_block(const LayerWeights& lw, int layer, const Tensor& x,
                              const ops::QuantizedInput& xq) const {
  lw.down_ahead.post();
  ops::QuantizedInput down_input;
  const Tensor gated = ops::gated_linear(x, lw.gate, lw.up, cfg.mlp_activation, xq, &lw.down, &down_input);
  // Next come the norm and the next layer's q/k/v, or after the last layer the vocabulary.
  (layer + 1 < cfg.num_layers ? layers[size_t(layer + 1)].qkv_ahead : head_ahead).post();
  return ops::linear(gated, lw.down, down_input);
}

Tensor Model::forward(const Batch& b) {
  Impl& m = *impl_;
  const ModelConfig& c = m.cfg;
  m.check_batch(b);
  // Reserve every sequence's blocks before computing, so running out fails early and cleanly.
  for (const SequenceBatchView& s : b.seqs) s.kv->reserve_append(s.n_new);

  std::vector<int32_t> positions;
  positions.reserve(b.tokens.size());
  for (const SequenceBatchView& s : b.seqs)
    for (int32_t i = 0; i < s.n_new; ++i) positions.push_back(s.n_past + i);
  const Tensor rotations = ops::rope_table(positions, c.rope);

  Tensor x = ops::embedding(m.embed, b.tokens);
  if (c.embedding_scale != 1.0f) ops::scale_inplace(x, c.embedding_scale);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = m.layers[size_t(l)];
    constexpr auto kPlain = ops::NormWeight::kPlain;
    ops::QuantizedInput xq;
    const Tensor attention_in = ops::rms_norm(x, lw.input_norm, c.rms_norm_eps, kPlain, &lw.q, &xq);
    ops::add_scaled_inplace(x, m.attention_block(lw, l, attention_in, xq, b, rotations), c.residual_scale);
    const Tensor mlp_in = ops::rms_norm(x, lw.post_attention_norm, c.rms_norm_eps, kPlain, &lw.gate, &xq);
    ops::add_scaled_inplace(x, m.mlp_block(lw, l, mlp_in, xq), c.residual_scale);
  }
  for (const SequenceBatchView& s : b.seqs) s.kv->commit_append(s.n_new);
  if (!b.want_logits) return Tensor::empty({0, c.vocab_size}, DType::kF32);

  std::vector<int32_t> rows = b.logit_rows;
  if (rows.empty()) {
    int32_t end = 0;
    for (const SequenceBatchView& s : b.seqs) rows.push_back((end += s.n_new) - 1);
  }
  // Norms are per row, so normalising only the wanted rows gives the same values.
  Tensor h = ops::rms_norm(ops::gather_rows(x, rows), m.final_norm, c.rms_norm_eps);
  if (c.logit_divisor != 1.0f) ops::divide_inplace(h, c.logit_divisor);
  return ops::linear(h, m.head);
}

}  // namespace kvlm
