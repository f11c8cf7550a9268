#pragma once
// The paged KV cache (DESIGN.md §4). A KVPool owns, for every layer, K and V storage cut into
// blocks of `block_size` tokens; a KVSequence is one sequence's block table. Blocks carry
// reference counts so that a prefix cache can share them later; a sequence that must write into a
// shared block copies it first (copy on write). Each layer has a KV codec (quant/kv_codec.h):
// blocks hold one row of codec bytes per (token, kv head), tokens are encoded when written and
// every read goes through the codec, so results never depend on chunking. Codecs are token-local,
// so every block operation here is a byte copy or a reference count, whatever the codec.
#include <cstdint>
#include <vector>

#include "kvlm/quant/kv_codec.h"

#include "kvlm/backend/ops.h"
#include "kvlm/tensor/tensor.h"

namespace kvlm {

struct KVPoolConfig {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;
  // One codec per layer, or a single one for every layer. The default f32 passthrough is exact.
  std::vector<KVCodecSpec> codecs = {kv_passthrough_spec(DType::kF32)};
  int64_t budget_bytes = 0;  // K+V storage of all layers; the block count is budget / block bytes
};

class KVPool {
 public:
  // Error if the config is invalid, a codec does not support head_dim (the codec's message, e.g.
  // "KV codec turbo:k8v3: TurboQuant does not support head_dim=96 (...)") or the budget cannot
  // hold a single block.
  explicit KVPool(const KVPoolConfig& config);
  KVPool(const KVPool&) = delete;
  KVPool& operator=(const KVPool&) = delete;

  const KVPoolConfig& config() const { return config_; }
  int block_size() const { return config_.block_size; }
  int32_t num_blocks() const { return int32_t(ref_counts_.size()); }
  int32_t num_free_blocks() const { return int32_t(free_.size()); }
  // Bytes of one block across all layers, K and V (the codecs' row sizes).
  static int64_t bytes_per_block(const KVPoolConfig& config);
  // Bytes one token takes across all layers, K and V.
  int64_t bytes_per_token() const;
  const KVCodec& codec(int layer) const { return codecs_[size_t(layer)]; }

  // Takes a free block with reference count 1. Error "KV cache out of blocks ..." when none is
  // free; the pool is unchanged then.
  int32_t allocate();
  void retain(int32_t block);   // reference count + 1
  void release(int32_t block);  // reference count - 1; the block is free again at 0
  int32_t ref_count(int32_t block) const;
  // Copies every layer's K and V of block `src` into `dst`.
  void copy_block(int32_t src, int32_t dst);
  // Zeroes all of the storage, so that every page is resident: the pool's pages otherwise become
  // resident on their first write, which then pays the page fault (what a serving engine does
  // once, while its first requests fill the pool). Blocks in use lose their contents.
  void make_resident();

  // The storage of one layer: u8 [n_kv_heads, num_blocks, block_size, codec row bytes].
  const Tensor& keys(int layer) const { return keys_[size_t(layer)]; }
  const Tensor& values(int layer) const { return values_[size_t(layer)]; }

 private:
  void check_block(int32_t block, const char* what) const;

  KVPoolConfig config_;
  std::vector<KVCodec> codecs_;
  std::vector<Tensor> keys_, values_;
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // a stack; allocate() takes the lowest-numbered free block first
};

// One sequence's block table in a pool. Owns one reference to each of its blocks and releases
// them when cleared or destroyed.
class KVSequence {
 public:
  explicit KVSequence(KVPool& pool) : pool_(&pool) {}
  ~KVSequence() { clear(); }
  KVSequence(const KVSequence&) = delete;
  KVSequence& operator=(const KVSequence&) = delete;

  KVPool& pool() const { return *pool_; }
  int32_t length() const { return length_; }   // tokens stored
  const std::vector<int32_t>& blocks() const { return blocks_; }
  int32_t capacity() const { return int32_t(blocks_.size()) * pool_->block_size(); }

  // Makes room for tokens length() .. length()+n-1: allocates blocks, and copies a shared block
  // that those tokens would write into. On Error (out of blocks) the sequence is unchanged.
  void reserve_append(int32_t n);
  // Marks n more tokens as stored (their K/V written by the model); needs reserve_append(n) first.
  void commit_append(int32_t n);
  // Drops every block reference; length becomes 0.
  void clear();
  // Appends an existing block (a shared prefix), taking a reference; the sequence must end on a
  // block boundary. `tokens` is how many of the block's slots are filled.
  void append_shared_block(int32_t block, int32_t tokens);

  // The layer's storage and this sequence's block table, as the attention op reads it.
  ops::PagedKV layer_view(int layer) const;

 private:
  KVPool* pool_;
  std::vector<int32_t> blocks_;
  int32_t length_ = 0;
};

}  // namespace kvlm
