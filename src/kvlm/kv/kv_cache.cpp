#include "kvlm/kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "kvlm/base/error.h"

namespace kvlm {

namespace {

// Each layer's codec, validated for head_dim (the codec's message names the spec on failure).
std::vector<KVCodec> layer_codecs(const KVPoolConfig& c) {
  check(c.n_layers > 0 && c.n_kv_heads > 0 && c.head_dim > 0 && c.block_size > 0,
        "KV pool: layers, kv heads, head_dim and block_size must be positive");
  check(c.codecs.size() == 1 || c.codecs.size() == size_t(c.n_layers),
        "KV pool: " + std::to_string(c.codecs.size()) + " codecs for " +
            std::to_string(c.n_layers) + " layers (give one, or one per layer)");
  std::vector<KVCodec> codecs;
  for (int l = 0; l < c.n_layers; ++l)
    codecs.emplace_back(c.codecs[c.codecs.size() == 1 ? 0 : size_t(l)], c.head_dim);
  return codecs;
}

int64_t token_bytes(const std::vector<KVCodec>& codecs, int n_kv_heads) {
  int64_t bytes = 0;
  for (const KVCodec& c : codecs) bytes += int64_t(n_kv_heads) * int64_t(c.token_head_bytes());
  return bytes;
}

}  // namespace

int64_t KVPool::bytes_per_block(const KVPoolConfig& c) {
  return int64_t(c.block_size) * token_bytes(layer_codecs(c), c.n_kv_heads);
}

int64_t KVPool::bytes_per_token() const { return token_bytes(codecs_, config_.n_kv_heads); }

KVPool::KVPool(const KVPoolConfig& config) : config_(config), codecs_(layer_codecs(config)) {
  const int64_t per_block = int64_t(config.block_size) * bytes_per_token();
  const int64_t n_blocks = config.budget_bytes / per_block;
  check(n_blocks >= 1, "KV pool: a budget of " + std::to_string(config.budget_bytes) +
                           " bytes holds no block of " + std::to_string(per_block) + " bytes");
  check(n_blocks <= INT32_MAX, "KV pool: budget too large");
  for (const KVCodec& c : codecs_) {
    const auto shape = [&](size_t row_bytes) {
      return Shape{config.n_kv_heads, n_blocks, config.block_size, int64_t(row_bytes)};
    };
    // Uninitialised: pages become resident as tokens are written, 2 MB at a time. On this VM a
    // first write to a 4 KB page costs ~10 us (a 512-token prefill of the 0.5B shape spent 36 ms
    // of its 540 in kv_write); a 2 MB page costs ~0.5 us per 4 KB (5.6 ms).
    keys_.push_back(Tensor::empty_streamed(shape(c.key_row_bytes()), DType::kU8));
    values_.push_back(Tensor::empty_streamed(shape(c.value_row_bytes()), DType::kU8));
  }
  ref_counts_.assign(size_t(n_blocks), 0);
  free_.reserve(size_t(n_blocks));
  for (int64_t b = n_blocks; b-- > 0;) free_.push_back(int32_t(b));
}

void KVPool::make_resident() {
  for (std::vector<Tensor>* layers : {&keys_, &values_})
    for (Tensor& t : *layers) std::memset(t.raw(), 0, t.nbytes());
}

void KVPool::check_block(int32_t block, const char* what) const {
  check(block >= 0 && block < num_blocks(),
        std::string("KV pool: ") + what + " of block " + std::to_string(block) + " outside [0, " +
            std::to_string(num_blocks()) + ")");
}

int32_t KVPool::allocate() {
  check(!free_.empty(), "KV cache out of blocks: all " + std::to_string(num_blocks()) +
                            " blocks of " + std::to_string(block_size()) +
                            " tokens are in use (raise the KV budget)");
  const int32_t b = free_.back();
  free_.pop_back();
  ref_counts_[size_t(b)] = 1;
  return b;
}

void KVPool::retain(int32_t block) {
  check_block(block, "retain");
  check(ref_counts_[size_t(block)] > 0, "KV pool: retain of free block " + std::to_string(block));
  ++ref_counts_[size_t(block)];
}

void KVPool::release(int32_t block) {
  check_block(block, "release");
  check(ref_counts_[size_t(block)] > 0, "KV pool: release of free block " + std::to_string(block));
  if (--ref_counts_[size_t(block)] == 0) free_.push_back(block);
}

int32_t KVPool::ref_count(int32_t block) const {
  check_block(block, "ref_count");
  return ref_counts_[size_t(block)];
}

void KVPool::copy_block(int32_t src, int32_t dst) {
  check_block(src, "copy");
  check_block(dst, "copy");
  for (int l = 0; l < config_.n_layers; ++l) {
    for (Tensor* t : {&keys_[size_t(l)], &values_[size_t(l)]}) {
      const size_t bytes = size_t(t->dim(2) * t->dim(3));  // one block of one kv head
      auto* base = static_cast<uint8_t*>(t->raw());
      for (int64_t h = 0; h < t->dim(0); ++h) {
        uint8_t* head = base + size_t(h * t->dim(1)) * bytes;
        std::memcpy(head + size_t(dst) * bytes, head + size_t(src) * bytes, bytes);
      }
    }
  }
}

void KVSequence::reserve_append(int32_t n) {
  check(n >= 0, "KV sequence: negative append");
  const int32_t bs = pool_->block_size();
  const int32_t needed_blocks = (length_ + n + bs - 1) / bs;
  // The block the next token lands in is written to; if it is shared, this sequence needs its own
  // copy (copy on write). Only a partially filled last block can be both shared and written.
  const bool cow = n > 0 && length_ % bs != 0 && pool_->ref_count(blocks_.back()) > 1;
  const int32_t fresh = std::max(0, needed_blocks - int32_t(blocks_.size())) + (cow ? 1 : 0);
  check(fresh <= pool_->num_free_blocks(),
        "KV cache out of blocks: " + std::to_string(fresh) + " more blocks needed, " +
            std::to_string(pool_->num_free_blocks()) + " free of " +
            std::to_string(pool_->num_blocks()) + " (raise the KV budget)");
  if (cow) {
    const int32_t copy = pool_->allocate();
    pool_->copy_block(blocks_.back(), copy);
    pool_->release(blocks_.back());
    blocks_.back() = copy;
  }
  while (int32_t(blocks_.size()) < needed_blocks) blocks_.push_back(pool_->allocate());
}

void KVSequence::commit_append(int32_t n) {
  check(n >= 0 && length_ + n <= capacity(),
        "KV sequence: commit of " + std::to_string(n) + " tokens beyond the reserved capacity");
  length_ += n;
}

void KVSequence::clear() {
  for (int32_t b : blocks_) pool_->release(b);
  blocks_.clear();
  length_ = 0;
}

void KVSequence::append_shared_block(int32_t block, int32_t tokens) {
  const int32_t bs = pool_->block_size();
  check(length_ == capacity() && length_ % bs == 0,
        "KV sequence: a shared block can only follow full blocks");
  check(tokens > 0 && tokens <= bs, "KV sequence: shared block token count out of range");
  pool_->retain(block);
  blocks_.push_back(block);
  length_ += tokens;
}

ops::PagedKV KVSequence::layer_view(int layer) const {
  check(layer >= 0 && layer < pool_->config().n_layers,
        [&] { return "KV sequence: layer " + std::to_string(layer) + " out of range"; });
  return {pool_->keys(layer), pool_->values(layer), &pool_->codec(layer),
          std::span<const int32_t>(blocks_)};
}

}  // namespace kvlm
