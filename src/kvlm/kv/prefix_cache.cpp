#include "kvlm/kv/prefix_cache.h"

#include <algorithm>

namespace kvlm {
namespace {

// splitmix64's finaliser: a cheap, well-mixed step for the hash chain.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

bool PrefixCache::LruOrder::operator()(const Node* a, const Node* b) const {
  if (a->last_used != b->last_used) return a->last_used < b->last_used;
  if (a->depth != b->depth) return a->depth > b->depth;
  return a->key < b->key;
}

PrefixCache::PrefixCache(KVPool& pool, int64_t max_bytes)
    : pool_(pool),
      max_bytes_(std::max<int64_t>(max_bytes, 0)),
      block_bytes_(KVPool::bytes_per_block(pool.config())),
      block_size_(pool.block_size()) {}

PrefixCache::~PrefixCache() { clear(); }

uint64_t PrefixCache::chain_key(uint64_t parent_key, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent_key ^ 0x6b766c6d70726678ull);
  for (int32_t t : tokens) h = mix(h ^ uint32_t(t));
  return h;
}

PrefixCache::Node* PrefixCache::find(uint64_t key, const Node* parent,
                                     std::span<const int32_t> tokens) const {
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return nullptr;
  Node* node = it->second.get();
  // The key alone could collide; the tokens and the (already verified) parent decide.
  if (node->parent != parent || !std::equal(tokens.begin(), tokens.end(), node->tokens.begin(),
                                            node->tokens.end()))
    return nullptr;
  return node;
}

void PrefixCache::touch(Node* leaf) {
  const uint64_t stamp = ++clock_;
  for (Node* n = leaf; n != nullptr; n = n->parent) {
    lru_.erase(n);
    n->last_used = stamp;
    lru_.insert(n);
  }
}

std::vector<int32_t> PrefixCache::lookup(std::span<const int32_t> tokens, int32_t max_tokens) {
  std::vector<int32_t> blocks;
  if (!enabled()) return blocks;
  const size_t usable = size_t(std::clamp<int64_t>(max_tokens, 0, int64_t(tokens.size())));
  const size_t n_blocks = usable / size_t(block_size_);
  Node* parent = nullptr;
  uint64_t key = 0;
  for (size_t i = 0; i < n_blocks; ++i) {
    const auto block_tokens = tokens.subspan(i * size_t(block_size_), size_t(block_size_));
    key = chain_key(key, block_tokens);
    Node* node = find(key, parent, block_tokens);
    if (node == nullptr) break;
    blocks.push_back(node->block);
    parent = node;
  }
  if (parent != nullptr) touch(parent);
  return blocks;
}

void PrefixCache::insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks) {
  if (!enabled()) return;
  const size_t n_blocks = std::min(tokens.size() / size_t(block_size_), blocks.size());
  Node* parent = nullptr;
  uint64_t key = 0;
  for (size_t i = 0; i < n_blocks; ++i) {
    const auto block_tokens = tokens.subspan(i * size_t(block_size_), size_t(block_size_));
    key = chain_key(key, block_tokens);
    Node* node = find(key, parent, block_tokens);
    if (node == nullptr) {
      // A different prefix already owns this key (a collision): nothing below it can be stored.
      if (nodes_.count(key) != 0) break;
      auto owned = std::make_unique<Node>();
      node = owned.get();
      node->key = key;
      node->parent = parent;
      node->tokens.assign(block_tokens.begin(), block_tokens.end());
      node->block = blocks[i];
      node->depth = int32_t(i);
      pool_.retain(node->block);
      if (parent != nullptr) ++parent->children;
      nodes_.emplace(key, std::move(owned));
      lru_.insert(node);
    }
    parent = node;
  }
  if (parent != nullptr) touch(parent);
  evict_to_budget();
}

bool PrefixCache::evict_one() {
  if (lru_.empty()) return false;
  Node* victim = *lru_.begin();
  lru_.erase(lru_.begin());
  if (victim->parent != nullptr) --victim->parent->children;
  pool_.release(victim->block);
  nodes_.erase(victim->key);
  return true;
}

void PrefixCache::evict_to_budget() {
  while (bytes() > max_bytes_ && evict_one()) {
  }
}

void PrefixCache::clear() {
  while (evict_one()) {
  }
}

}  // namespace kvlm
