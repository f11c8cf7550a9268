#include "kvlm/kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvlm {
namespace {

constexpr int kBlock = 4;

KVPoolConfig pool_config(int blocks) {
  KVPoolConfig c;
  c.n_layers = 1;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  c.block_size = kBlock;
  c.budget_bytes = KVPool::bytes_per_block(c) * blocks;
  return c;
}

// A sequence holding `tokens.size()` tokens in fresh blocks (contents are irrelevant here).
std::vector<int32_t> fill(KVSequence& seq, const std::vector<int32_t>& tokens) {
  seq.reserve_append(int32_t(tokens.size()));
  seq.commit_append(int32_t(tokens.size()));
  return seq.blocks();
}

std::vector<int32_t> iota_tokens(int n, int start) {
  std::vector<int32_t> t(size_t(n), 0);
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(PrefixCache, ReturnsLongestWholeBlockPrefixUpToTheLimit) {
  KVPool pool(pool_config(16));
  const int64_t block_bytes = KVPool::bytes_per_block(pool.config());
  PrefixCache cache(pool, 16 * block_bytes);
  const std::vector<int32_t> tokens = iota_tokens(10, 100);  // 2 full blocks + 2 tokens
  KVSequence seq(pool);
  const std::vector<int32_t> blocks = fill(seq, tokens);
  cache.insert(tokens, blocks);
  EXPECT_EQ(cache.num_blocks(), 2);
  EXPECT_EQ(cache.bytes(), 2 * block_bytes);
  EXPECT_EQ(pool.ref_count(blocks[0]), 2);
  EXPECT_EQ(pool.ref_count(blocks[2]), 1);  // the partial block is never cached

  std::vector<int32_t> query = tokens;
  query.push_back(7);
  EXPECT_EQ(cache.lookup(query, int32_t(query.size()) - 1), (std::vector<int32_t>{blocks[0], blocks[1]}));
  // At most 7 tokens may come from the cache: one whole block.
  EXPECT_EQ(cache.lookup(query, 7), (std::vector<int32_t>{blocks[0]}));
  EXPECT_TRUE(cache.lookup(query, 3).empty());
  // A difference inside the second block stops the match after the first.
  query[5] = 9999;
  EXPECT_EQ(cache.lookup(query, 10), (std::vector<int32_t>{blocks[0]}));
  // A different first block matches nothing, even if later blocks agree.
  query = tokens;
  query[0] = 1;
  EXPECT_TRUE(cache.lookup(query, 10).empty());
}

TEST(PrefixCache, SameBlockTokensUnderDifferentPrefixesAreDistinct) {
  KVPool pool(pool_config(16));
  PrefixCache cache(pool, 16 * KVPool::bytes_per_block(pool.config()));
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> b = {9, 9, 9, 9, 5, 6, 7, 8};
  KVSequence sa(pool), sb(pool);
  const auto blocks_a = fill(sa, a);
  const auto blocks_b = fill(sb, b);
  cache.insert(a, blocks_a);
  cache.insert(b, blocks_b);
  EXPECT_EQ(cache.num_blocks(), 4);
  EXPECT_EQ(cache.lookup(b, 8), blocks_b);
  EXPECT_EQ(cache.lookup(a, 8), blocks_a);
}

TEST(PrefixCache, ReinsertingKeepsTheCachedBlocksAndTakesNoNewReference) {
  KVPool pool(pool_config(16));
  PrefixCache cache(pool, 16 * KVPool::bytes_per_block(pool.config()));
  const std::vector<int32_t> tokens = iota_tokens(8, 0);
  KVSequence first(pool), second(pool);
  const auto blocks1 = fill(first, tokens);
  const auto blocks2 = fill(second, tokens);
  cache.insert(tokens, blocks1);
  cache.insert(tokens, blocks2);
  EXPECT_EQ(cache.num_blocks(), 2);
  EXPECT_EQ(pool.ref_count(blocks1[0]), 2);
  EXPECT_EQ(pool.ref_count(blocks2[0]), 1);
  EXPECT_EQ(cache.lookup(tokens, 8), blocks1);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedLeavesUnderTheByteBudget) {
  KVPool pool(pool_config(16));
  const int64_t block_bytes = KVPool::bytes_per_block(pool.config());
  PrefixCache cache(pool, 3 * block_bytes);
  const std::vector<int32_t> a = iota_tokens(8, 0);    // blocks a0 a1
  const std::vector<int32_t> b = iota_tokens(4, 50);   // block b0
  const std::vector<int32_t> c = iota_tokens(4, 90);   // block c0
  {
    KVSequence sa(pool), sb(pool);
    cache.insert(a, fill(sa, a));
    cache.insert(b, fill(sb, b));
  }
  EXPECT_EQ(pool.num_free_blocks(), 16 - 3);
  // Touch a, so b is the oldest; adding c must evict b.
  EXPECT_EQ(cache.lookup(a, 8).size(), 2u);
  {
    KVSequence sc(pool);
    cache.insert(c, fill(sc, c));
  }
  EXPECT_EQ(cache.num_blocks(), 3);
  EXPECT_LE(cache.bytes(), 3 * block_bytes);
  EXPECT_TRUE(cache.lookup(b, 4).empty());
  EXPECT_EQ(cache.lookup(a, 8).size(), 2u);
  EXPECT_EQ(pool.num_free_blocks(), 16 - 3);
  // Evicting takes the deepest block of a chain before its parent.
  EXPECT_TRUE(cache.evict_one());  // c0 is now the oldest leaf
  EXPECT_EQ(cache.lookup(c, 4).size(), 0u);
  EXPECT_TRUE(cache.evict_one());
  EXPECT_EQ(cache.lookup(a, 8).size(), 1u);
  cache.clear();
  EXPECT_FALSE(cache.evict_one());
  EXPECT_EQ(pool.num_free_blocks(), 16);
}

TEST(PrefixCache, BlocksInUseSurviveEviction) {
  KVPool pool(pool_config(8));
  PrefixCache cache(pool, 8 * KVPool::bytes_per_block(pool.config()));
  const std::vector<int32_t> tokens = iota_tokens(8, 3);
  KVSequence donor(pool);
  cache.insert(tokens, fill(donor, tokens));
  donor.clear();
  KVSequence user(pool);
  for (int32_t block : cache.lookup(tokens, 8)) user.append_shared_block(block, kBlock);
  cache.clear();
  EXPECT_EQ(pool.num_free_blocks(), 8 - 2);
  user.clear();
  EXPECT_EQ(pool.num_free_blocks(), 8);
}

TEST(PrefixCache, DisabledCacheKeepsNothing) {
  KVPool pool(pool_config(8));
  PrefixCache cache(pool, 0);
  const std::vector<int32_t> tokens = iota_tokens(8, 0);
  KVSequence seq(pool);
  cache.insert(tokens, fill(seq, tokens));
  EXPECT_FALSE(cache.enabled());
  EXPECT_EQ(cache.num_blocks(), 0);
  EXPECT_TRUE(cache.lookup(tokens, 8).empty());
  seq.clear();
  EXPECT_EQ(pool.num_free_blocks(), 8);
}

}  // namespace
}  // namespace kvlm
