#pragma once
// The op interface: every computation a model forward pass performs, as free functions over
// Tensors. Model code calls only these and never reads tensor memory itself, so a CUDA backend
// can implement the same functions for device tensors later (each op dispatches on the device of
// its inputs; today only the CPU reference implementation in cpu/ exists).
//
// Conventions:
// - Activations are f32, row-major, one row per token: [T, features].
// - Weights stay in their stored dtype (f32/f16/bf16 or MLX affine packed) and are widened inside
//   the kernel; no op converts a whole weight up front.
// - Batch invariance (DESIGN.md §1): every output element is computed with a reduction order that
//   depends only on the model's shapes, never on T, on which rows share the batch, or on the thread
//   count. Work is split over output rows/columns only.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kvlm/quant/affine.h"
#include "kvlm/quant/kv_codec.h"
#include "kvlm/tensor/tensor.h"

namespace kvlm {
class ThreadPool;
}
namespace kvlm::cpu {
struct Int8Acts;
}

namespace kvlm::ops {

// The pool the CPU kernels split their output ranges over: ThreadPool::global() unless a caller
// installed another one (tests compare thread counts this way). nullptr restores the global pool.
ThreadPool& thread_pool();
void set_thread_pool(ThreadPool* pool);

// How linear() multiplies by an MLX affine weight: kExact dequantizes the weights exactly in
// registers (f32 FMAs); kInt8 quantizes the activations per group to int8 and takes integer dot
// products (cpu/linear_int8.h), for 4- and 8-bit codes only (other widths stay exact).
enum class MatmulPath { kExact, kInt8 };

// A linear layer's (or an embedding table's) weight [out, in], as stored in the checkpoint. Made
// by dense_weight or affine_weight, which check its tensors once; linear() trusts them.
struct Weight {
  Tensor weight;                   // dense f32/f16/bf16 [out, in], or packed u32 [out, in*bits/32]
  Tensor scales, biases;           // MLX affine only: [out, in/group_size], model dtype
  std::optional<AffineSpec> quant; // set for MLX affine weights
  Tensor bias;                     // optional additive bias [out] (any float dtype); undefined = none
  int64_t out_features = 0, in_features = 0;
  MatmulPath matmul = MatmulPath::kExact;  // ignored by dense weights and embedding()
  bool panels = false;             // dense `weight` in the panel layout of cpu/panels.h
  Tensor affine_panels;            // the exact path's copy of an affine weight (panel_weight)
  Tensor int8_tiles;               // the int8 path's copy of an affine weight (int8_weight)

  bool has_bias() const { return bias.defined(); }
};

// Builds a dense Weight from a contiguous 2-D float tensor, checking its dtype.
Weight dense_weight(const Tensor& w, const Tensor& bias = Tensor());
// Builds an MLX affine Weight; the unpacked input width comes from the packed shape and `spec`.
Weight affine_weight(const Tensor& packed, const Tensor& scales, const Tensor& biases,
                     const AffineSpec& spec, const Tensor& bias = Tensor());

// The same weight in the layout the kernels read fastest (cpu/panels.h; same values, same results,
// rows padded to whole panels): a dense weight is copied once into panel order; an MLX affine
// weight without int8 tiles (the exact path, or codes of widths the int8 path does not take) gets
// a copy in affine panels (its `weight`, `scales` and `biases` stay for embedding()); any other
// weight is returned unchanged. Model loading applies it after int8_weight to every multiplied
// affine weight, and to dense ones with ModelLoadOptions::panel_weights; without it, every linear
// call packs or dequantizes the panels it reads.
Weight panel_weight(const Weight& w);

// The same weight with the copy the int8 path reads (cpu/linear_int8.h's tiles of 16 rows), for an
// MLX affine weight with 4- or 8-bit codes that asks for MatmulPath::kInt8; any other weight is
// returned unchanged. Model loading applies it to every weight; the exact path and embedding()
// still read `weight`, `scales` and `biases`.
Weight int8_weight(const Weight& w);

// ---- Elementwise and row ops -----------------------------------------------------------------

// Rows `ids` of an embedding table: f32 [ids.size(), in_features]. Error for an id out of range.
Tensor embedding(const Weight& table, std::span<const int32_t> ids);

// A linear layer's input already quantized for its int8 path (cpu/linear_int8.h) by the op that
// computed it, group by group on the threads that wrote each part, so the layer needs no
// quantization round of its own. Null when the producer did not (or the layer takes another path).
using QuantizedInput = std::shared_ptr<const cpu::Int8Acts>;

// y = x · Wᵀ (+ bias): x f32 [T, in] -> f32 [T, out]. `quantized` (from the op that produced x,
// for this weight) is used when it fits w's int8 path.
Tensor linear(const Tensor& x, const Weight& w, const QuantizedInput& quantized = nullptr);
// linear(x, *ws[i]) for every weight, computed in one pool round (q/k/v and gate/up read the
// same input; in decode a round per projection would wait for the slowest thread each time).
std::vector<Tensor> linear_many(const Tensor& x, std::span<const Weight* const> ws,
                                const QuantizedInput& quantized = nullptr);

// The ranges ReadAheadPlan gives the threads 0 .. size()-1 of `pool` (index i for thread i, the
// caller at 0): where the rows parallel_for assigns thread i first lie in the bytes the kernels
// stream (the int8 path's tiles, else the weight), at most kReadAheadBytes of them; empty past
// the rows.
struct ReadAheadRange {
  const void* p = nullptr;
  size_t bytes = 0;
};
inline constexpr size_t kReadAheadBytes = 256 * 1024;  // stays in a 1 MB L2 through the ops between
std::vector<ReadAheadRange> read_ahead_ranges(std::span<const Weight* const> ws, const ThreadPool& pool);

// post() has every pool thread fetch, while it waits, the start of the rows it will own when `ws`
// (rows concatenated, as linear_many splits them) is computed next: decode posts the next weight
// before the current op, so the memory keeps streaming while the caller works alone (norms, RoPE,
// KV writes) and while the caller waits at the end of a round for the workers. Only a hint:
// results never change. The ranges are found once per pool size (pools of one size split rows
// alike): finding them reads the weights' descriptions, which a step's stream of weights has
// pushed out of the caches, a few hundred nanoseconds per call. The weights must outlive the
// plan. Not thread-safe: one caller at a time (the model's forward pass).
class ReadAheadPlan {
 public:
  ReadAheadPlan() = default;
  explicit ReadAheadPlan(std::vector<const Weight*> ws) : ws_(std::move(ws)) {}
  void post() const;
  // read_ahead_ranges(ws, pool), found again only when the pool's size differs from the last call's.
  const std::vector<ReadAheadRange>& ranges(const ThreadPool& pool) const;

 private:
  std::vector<const Weight*> ws_;
  mutable std::vector<ReadAheadRange> ranges_;  // for a pool of ranges_.size() threads
};

enum class GateActivation { kSiLU, kGeluTanh };
// act(x · gateᵀ) * (x · upᵀ), with exactly the bits of gated_activation(linear(x, gate),
// linear(x, up), act), in one pool round: each thread applies the activation to the rows it has
// just computed, while they are in its cache, instead of writing both projections out and reading
// them back in a separate pass (at 512 tokens of the 0.5B shape, 2 x 10 MB per layer). `quantized`
// is x's, as for linear. With `next` (the layer that reads the result) on the int8 path, each
// thread also quantizes the groups it computed, into *next_input, for
// linear(result, *next, *next_input).
Tensor gated_linear(const Tensor& x, const Weight& gate, const Weight& up, GateActivation act,
                    const QuantizedInput& quantized = nullptr, const Weight* next = nullptr,
                    QuantizedInput* next_input = nullptr);

enum class NormWeight { kPlain, kOnePlus };  // w·x̂ (llama) or (1+w)·x̂ (gemma)

// RMSNorm over the last dimension of x [rows, n]: x / sqrt(mean(x²) + eps) · w. Returns a new
// tensor; `weight` is [n] in any float dtype. With `next` (a layer that reads the result) on the
// int8 path, each row is also quantized for it, into *next_input, as gated_linear does.
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps, NormWeight kind = NormWeight::kPlain,
                const Weight* next = nullptr, QuantizedInput* next_input = nullptr);

// act(gate) * up, elementwise over [T, n] f32.
Tensor gated_activation(const Tensor& gate, const Tensor& up, GateActivation act);

// x += y * scale (in place), both f32 of the same shape.
void add_scaled_inplace(Tensor& x, const Tensor& y, float scale = 1.0f);
// x *= scale and x /= divisor (in place), f32. Both exist because x*(1/d) and x/d round
// differently and the oracle divides where its formula divides.
void scale_inplace(Tensor& x, float scale);
void divide_inplace(Tensor& x, float divisor);
// Softmax over the last dimension of f32 [rows, n]; returns a new tensor.
Tensor softmax(const Tensor& x);
// Rows `rows` of x [T, n]: f32 [rows.size(), n].
Tensor gather_rows(const Tensor& x, std::span<const int32_t> rows);
// The rows of every part (f32 [n_i, n], same n) stacked in order: f32 [sum n_i, n].
Tensor concat_rows(const std::vector<Tensor>& parts);

// ---- Rotary position embedding -----------------------------------------------------------------

// The RoPE variants of transformers' ROPE_INIT_FUNCTIONS ("default", "linear", "dynamic",
// "llama3", "yarn"). Fields unused by a type are ignored.
struct RopeParams {
  enum class Type { kDefault, kLinear, kDynamic, kLlama3, kYarn };
  Type type = Type::kDefault;
  double theta = 10000.0;
  int rotary_dim = 0;                    // head_dim * partial_rotary_factor
  double factor = 1.0;                   // linear, dynamic, llama3, yarn
  int64_t max_position_embeddings = 0;   // dynamic: the trained length; yarn: for default factor
  int64_t original_max_position_embeddings = 0;  // llama3, yarn
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  std::optional<double> attention_factor;                // yarn
  std::optional<double> mscale, mscale_all_dim;           // yarn
  double beta_fast = 32.0, beta_slow = 1.0;               // yarn
  bool truncate = true;                                   // yarn
};

// Inverse frequencies (rotary_dim/2 values) and the cos/sin scaling ("attention factor") for a
// sequence whose longest position is seq_len - 1. Only "dynamic" depends on seq_len: like
// transformers it rescales theta once seq_len exceeds max_position_embeddings.
struct RopeFrequencies {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
};
RopeFrequencies rope_frequencies(const RopeParams& p, int64_t seq_len);

// The rotations of tokens at `positions`: f32 [T, rotary_dim], token t's row holding
// cos(angle_i) * attention_scaling for the rotary_dim/2 pairs i, then sin(angle_i) *
// attention_scaling, with angle_i = inv_freq_i * position (float). For "dynamic" RoPE each token
// uses the frequencies of seq_len = its own position + 1, which equals transformers' per-step
// behaviour in decode and keeps a token's rotation independent of the batch it runs in. Every
// layer rotates its queries and keys by the same angles, so a forward pass builds the table once:
// in a 0.5B decode step its 64 cos/sin and the frequencies were most of each of 48 rope calls.
Tensor rope_table(std::span<const int32_t> positions, const RopeParams& p);

// Rotates x [T, heads, head_dim] in place by a rope_table of T rows, using the rotate-half
// (GPT-NeoX / transformers llama) pairing of dims i and i + rotary_dim/2.
void rope_inplace(Tensor& x, const Tensor& table);

// rope_inplace(x, rope_table(positions, p)).
void rope_inplace(Tensor& x, std::span<const int32_t> positions, const RopeParams& p);

// ---- Paged KV and attention --------------------------------------------------------------------

// One layer's K and V storage in the paged pool, read and written through the layer's codec:
// u8 [kv_heads, num_blocks, block_size, codec->key_row_bytes()] for keys and the same with
// value_row_bytes() for values, plus a sequence's block table (block ids in token order). Each kv
// head has its own region, so that a sequence's rows for one head are one run per block (and one
// stream where its blocks are consecutive): decode attention reads every row from memory, and one
// thread read rows interleaved with another head's at half the rate of a contiguous run.
struct PagedKV {
  Tensor keys, values;
  const KVCodec* codec = nullptr;
  std::span<const int32_t> block_table;
};

// Encodes k, v [n, kv_heads, head_dim] (f32) through the codec into the sequence's blocks at
// token positions start .. start+n-1.
void kv_write(const Tensor& k, const Tensor& v, const PagedKV& kv, int64_t start);

// Attention splits one query row's keys into chunks of this many positions (counted from its
// first visible key), computes them as separate tasks and merges them in chunk order, so the
// reduction order depends only on the query's position, never on threads or batch.
inline constexpr int64_t kAttentionChunk = 256;

struct AttentionParams {
  float scale = 1.0f;     // multiplies q·k
  int64_t window = 0;     // sliding window (keys p-window+1 .. p); 0 = full causal
  // kInt8: MLX affine and TurboQuant caches take the int8 path (backend/cpu/attention_codes.h):
  // keys of 4/8-bit codes scored on their codes against int8 queries, values accumulated with
  // fused multiply-adds. kExact, and passthrough codecs, keep the reference's arithmetic.
  MatmulPath kv_path = MatmulPath::kExact;
};

// Causal attention of one sequence's new queries q [n, heads, head_dim] (positions
// n_past .. n_past+n-1) over its KV positions 0 .. n_past+n-1 read through the codec.
// GQA: query head h reads kv head h / (heads / kv_heads). Returns f32 [n, heads*head_dim].
// Each query's result depends only on its own position and the stored KV, so prefill in one shot,
// in chunks, or token by token gives the same bits. Keys are decoded row by row inside the kernel
// (no dequantized copy of the cache); values are accumulated in the codec's value domain and
// mapped back once per output row (TurboQuant: one inverse rotation).
Tensor attention(const Tensor& q, const PagedKV& kv, int64_t n_past, const AttentionParams& p);

// One sequence of a batched attention call: its new queries, its paged KV, and how many of its
// tokens were stored before them.
struct AttentionSequence {
  Tensor q;
  PagedKV kv;
  int64_t n_past = 0;
};

// ops::attention for several sequences of one layer at once: one thread-pool round runs every
// sequence's chunks, one more merges them. Returns f32 [sum of n, heads*head_dim], the
// sequences' rows in order, each exactly what ops::attention gives for its sequence alone. The
// sequences must agree in heads, head_dim and kv heads (their codecs may differ). With `next`
// (the output projection) on the int8 path, the rows are also quantized for it, into *next_input,
// as gated_linear does, when a kv head's query heads span whole groups of its input.
Tensor attention_batch(std::span<const AttentionSequence> seqs, const AttentionParams& p,
                       const Weight* next = nullptr, QuantizedInput* next_input = nullptr);

}  // namespace kvlm::ops
