#pragma once
// The prefix cache (DESIGN.md §4, issue 5): full KV blocks of finished (or fully prefilled)
// sequences, kept so that a later request with the same leading tokens reuses them instead of
// recomputing them. Blocks are shared by reference count, never copied: the cache holds one
// reference to each block it keeps, and a sequence that reuses a block takes its own.
//
// Each cached block is a node in a tree: its key is a hash chain over (the previous block's key,
// this block's tokens), so one key stands for the whole prefix up to the block's end. A lookup
// follows the chain from the first block and compares the stored tokens and parent at every step,
// so a hash collision can never hand out the wrong KV.
//
// Eviction is least-recently-used over leaves: every touch stamps the whole path from the root,
// so a parent is never older than its children and the oldest node is always a leaf (ties go to
// the deeper node). Interior nodes are therefore evicted only after all their descendants.
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvlm/kv/kv_cache.h"

namespace kvlm {

class PrefixCache {
 public:
  // `max_bytes` bounds the bytes of the blocks the cache references (counted whole, also while
  // running sequences share them); 0 disables the cache.
  PrefixCache(KVPool& pool, int64_t max_bytes);
  ~PrefixCache();  // releases every block it holds
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return max_bytes_ > 0; }
  int64_t max_bytes() const { return max_bytes_; }
  int64_t bytes() const { return int64_t(nodes_.size()) * block_bytes_; }
  int32_t num_blocks() const { return int32_t(nodes_.size()); }

  // The blocks of the longest cached prefix of `tokens` that has at most `max_tokens` tokens, in
  // order, each holding block_size tokens. Marks them most recently used. Takes no references:
  // the caller retains (e.g. KVSequence::append_shared_block) before anything can evict them.
  std::vector<int32_t> lookup(std::span<const int32_t> tokens, int32_t max_tokens);

  // Offers the full blocks of a sequence whose first tokens.size() tokens are stored in `blocks`
  // (blocks[i] holds tokens [i*block_size, (i+1)*block_size)). Blocks already cached under the
  // same prefix are only refreshed; new ones are retained. Then evicts down to the byte budget.
  void insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks);

  // Drops the least recently used leaf; false when the cache is empty.
  bool evict_one();
  // Drops everything.
  void clear();

 private:
  struct Node {
    uint64_t key = 0;
    Node* parent = nullptr;
    std::vector<int32_t> tokens;  // block_size tokens
    int32_t block = -1;
    int32_t depth = 0;  // 0 for the first block of a prefix
    int32_t children = 0;
    uint64_t last_used = 0;
  };
  // Oldest first; among equal stamps the deepest first, so the first entry is always a leaf.
  struct LruOrder {
    bool operator()(const Node* a, const Node* b) const;
  };

  static uint64_t chain_key(uint64_t parent_key, std::span<const int32_t> tokens);
  // The node for `tokens` under `parent` with this key, if its stored tokens and parent match.
  Node* find(uint64_t key, const Node* parent, std::span<const int32_t> tokens) const;
  void touch(Node* leaf);
  void evict_to_budget();

  KVPool& pool_;
  int64_t max_bytes_;
  int64_t block_bytes_;
  int block_size_;
  uint64_t clock_ = 0;
  std::unordered_map<uint64_t, std::unique_ptr<Node>> nodes_;
  std::set<Node*, LruOrder> lru_;
};

}  // namespace kvlm
