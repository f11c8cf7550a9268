// The paged KV pool: capacity from the budget, allocation, reference counts, copy on write and the
// out-of-blocks error.
#include "kvlm/kv/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "kvlm/base/error.h"

namespace kvlm {
namespace {

KVPoolConfig small_config(int64_t blocks, std::vector<KVCodecSpec> codecs = {kv_passthrough_spec(DType::kF32)},
                          int head_dim = 4) {
  KVPoolConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = head_dim;
  c.block_size = 4;
  c.codecs = std::move(codecs);
  c.budget_bytes = blocks * KVPool::bytes_per_block(c);
  return c;
}

// Kv head `head`'s rows of `block` in a layer's storage, u8 [kv_heads, blocks, block_size, row bytes].
const uint8_t* head_block(const Tensor& storage, int64_t head, int32_t block) {
  return storage.data<uint8_t>() + size_t((head * storage.dim(1) + block) * storage.dim(2) * storage.dim(3));
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(KVPool, CapacityComesFromTheBudget) {
  KVPoolConfig c = small_config(3);
  // 2 layers * (K + V) * 4 tokens * 2 heads * 4 dims * 4 bytes
  EXPECT_EQ(KVPool::bytes_per_block(c), 2 * 2 * 4 * 2 * 4 * 4);
  c.budget_bytes += KVPool::bytes_per_block(c) - 1;  // a partial block does not count
  KVPool pool(c);
  EXPECT_EQ(pool.num_blocks(), 3);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_EQ(pool.keys(1).shape(), (Shape{2, 3, 4, 16}));  // rows of 4 f32 values
  EXPECT_EQ(pool.keys(1).dtype(), DType::kU8);
  EXPECT_EQ(pool.bytes_per_token(), 2 * 2 * 2 * 4 * 4);
  KVPool half(small_config(6, {kv_passthrough_spec(DType::kBF16)}));
  EXPECT_EQ(half.num_blocks(), 6);
  EXPECT_EQ(half.values(0).shape(), (Shape{2, 6, 4, 8}));
}

TEST(KVPool, EachLayerHasItsCodecAndTheBudgetCountsCodecBytes) {
  // Layer 0 TurboQuant k8v3, layer 1 MLX affine 4-bit group 64 (bf16 scales), head_dim 64:
  // k8v3 = (64 + 2*2*2) + (24 + 2*2) = 100 bytes per token and head, affine4g64 = 2 * (32 + 4).
  const KVPoolConfig c =
      small_config(5, {kv_turbo_spec(8, 3), kv_affine_spec(4, 64, DType::kBF16)}, 64);
  EXPECT_EQ(KVPool::bytes_per_block(c), 4 * 2 * (100 + 72));
  KVPool pool(c);
  EXPECT_EQ(pool.num_blocks(), 5);
  EXPECT_EQ(pool.bytes_per_token(), 2 * (100 + 72));
  EXPECT_EQ(pool.codec(0).name(), "turbo:k8v3");
  EXPECT_EQ(pool.codec(1).name(), "affine4g64");
  EXPECT_EQ(pool.keys(0).shape(), (Shape{2, 5, 4, 72}));
  EXPECT_EQ(pool.values(0).shape(), (Shape{2, 5, 4, 28}));
  EXPECT_EQ(pool.keys(1).shape(), (Shape{2, 5, 4, 36}));
  KVSequence seq(pool);
  EXPECT_EQ(seq.layer_view(1).codec, &pool.codec(1));
}

TEST(KVPool, BadConfigsAreErrors) {
  EXPECT_EQ(error_of([] { KVPool p(small_config(0)); }),
            "KV pool: a budget of 0 bytes holds no block of 512 bytes");
  EXPECT_EQ(error_of([] { KVPool p(small_config(1, {kv_turbo_spec(8, 3)}, 96)); }),
            "KV codec turbo:k8v3: TurboQuant does not support head_dim=96 (supported: 64, 128, "
            "256, 512)");
  EXPECT_EQ(error_of([] { KVPool p(small_config(1, {kv_affine_spec(4, 64, DType::kBF16)}, 96)); }),
            "KV codec affine4g64: head_dim=96 is not a multiple of group_size 64");
  const std::vector<KVCodecSpec> three(3, kv_passthrough_spec(DType::kF32));
  EXPECT_EQ(error_of([&] { KVPool p(small_config(1, three)); }),
            "KV pool: 3 codecs for 2 layers (give one, or one per layer)");
}

TEST(KVPool, AllocateReleaseAndRefCounts) {
  KVPool pool(small_config(2));
  const int32_t a = pool.allocate(), b = pool.allocate();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_EQ(error_of([&] { pool.allocate(); }),
            "KV cache out of blocks: all 2 blocks of 4 tokens are in use (raise the KV budget)");
  pool.retain(a);
  EXPECT_EQ(pool.ref_count(a), 2);
  pool.release(a);
  EXPECT_EQ(pool.num_free_blocks(), 0);
  pool.release(a);
  EXPECT_EQ(pool.ref_count(a), 0);
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_EQ(error_of([&] { pool.release(7); }), "KV pool: release of block 7 outside [0, 2)");
  pool.release(b);
  EXPECT_EQ(error_of([&] { pool.release(b); }), "KV pool: release of free block 1");
}

TEST(KVPool, MakeResidentZeroesEveryLayersKeysAndValues) {
  KVPool pool(small_config(3));
  for (int l = 0; l < 2; ++l)
    for (const Tensor* t : {&pool.keys(l), &pool.values(l)}) std::memset(t->raw(), 0x5a, t->nbytes());
  pool.make_resident();
  for (int l = 0; l < 2; ++l)
    for (const Tensor* t : {&pool.keys(l), &pool.values(l)}) {
      const auto* p = static_cast<const uint8_t*>(t->raw());
      EXPECT_TRUE(std::all_of(p, p + t->nbytes(), [](uint8_t b) { return b == 0; })) << "layer " << l;
    }
  EXPECT_EQ(pool.num_free_blocks(), 3);
}

TEST(KVSequence, ReservesBlocksAsTokensArriveAndFreesThemOnClear) {
  KVPool pool(small_config(4));
  {
    KVSequence seq(pool);
    seq.reserve_append(5);
    EXPECT_EQ(seq.blocks().size(), 2u);
    EXPECT_EQ(seq.length(), 0);
    seq.commit_append(5);
    EXPECT_EQ(seq.length(), 5);
    seq.reserve_append(3);  // fits in the second block
    EXPECT_EQ(seq.blocks().size(), 2u);
    seq.commit_append(3);
    seq.reserve_append(1);
    EXPECT_EQ(seq.blocks().size(), 3u);
    EXPECT_EQ(error_of([&] { seq.commit_append(5); }),
              "KV sequence: commit of 5 tokens beyond the reserved capacity");
    EXPECT_EQ(pool.num_free_blocks(), 1);
  }
  EXPECT_EQ(pool.num_free_blocks(), 4);  // the destructor released every block
}

TEST(KVSequence, OutOfBlocksLeavesTheSequenceUnchanged) {
  KVPool pool(small_config(2));
  KVSequence seq(pool);
  seq.reserve_append(3);
  seq.commit_append(3);
  EXPECT_EQ(error_of([&] { seq.reserve_append(10); }),
            "KV cache out of blocks: 3 more blocks needed, 1 free of 2 (raise the KV budget)");
  EXPECT_EQ(seq.blocks().size(), 1u);
  EXPECT_EQ(seq.length(), 3);
  EXPECT_EQ(pool.num_free_blocks(), 1);
}

TEST(KVSequence, WritingIntoASharedBlockCopiesItFirst) {
  KVPool pool(small_config(4));
  KVSequence owner(pool);
  owner.reserve_append(2);
  // Tokens 0 and 1 of layer 0 get recognisable keys.
  const ops::PagedKV view = owner.layer_view(0);
  const Tensor k = Tensor::from_f32(std::vector<float>(2 * 2 * 4, 1.5f), {2, 2, 4});
  ops::kv_write(k, k, view, 0);
  owner.commit_append(2);
  // Both kv heads' rows of tokens 0 and 1 (16 bytes each).
  const auto first_rows = [&](int32_t block) {
    std::vector<uint8_t> rows;
    for (int64_t h = 0; h < 2; ++h) rows.insert(rows.end(), head_block(pool.keys(0), h, block), head_block(pool.keys(0), h, block) + 2 * 16);
    return rows;
  };
  const std::vector<uint8_t> written = first_rows(owner.blocks()[0]);

  KVSequence sharer(pool);
  sharer.append_shared_block(owner.blocks()[0], 2);
  EXPECT_EQ(pool.ref_count(owner.blocks()[0]), 2);
  EXPECT_EQ(sharer.length(), 2);
  sharer.reserve_append(1);  // token 2 would land in the shared block
  EXPECT_NE(sharer.blocks()[0], owner.blocks()[0]);
  EXPECT_EQ(pool.ref_count(owner.blocks()[0]), 1);
  EXPECT_EQ(pool.ref_count(sharer.blocks()[0]), 1);
  EXPECT_EQ(first_rows(sharer.blocks()[0]), written);
  float first;
  std::memcpy(&first, head_block(pool.keys(0), 1, sharer.blocks()[0]), 4);
  EXPECT_EQ(first, 1.5f);
}

TEST(KVSequence, CopyOnWriteCopiesEveryLayersCodecBytes) {
  KVPool pool(small_config(4, {kv_turbo_spec(4, 2), kv_affine_spec(8, 32, DType::kBF16)}, 64));
  KVSequence owner(pool);
  owner.reserve_append(3);
  std::vector<float> x(3 * 2 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) * 0.25f - 2.0f;
  const Tensor t = Tensor::from_f32(x, {3, 2, 64});
  for (int l = 0; l < 2; ++l) ops::kv_write(t, t, owner.layer_view(l), 0);
  owner.commit_append(3);
  KVSequence sharer(pool);
  sharer.append_shared_block(owner.blocks()[0], 3);
  sharer.reserve_append(1);
  ASSERT_NE(sharer.blocks()[0], owner.blocks()[0]);
  for (int l = 0; l < 2; ++l)
    for (const Tensor* s : {&pool.keys(l), &pool.values(l)})
      for (int64_t h = 0; h < 2; ++h)
        EXPECT_EQ(std::memcmp(head_block(*s, h, owner.blocks()[0]), head_block(*s, h, sharer.blocks()[0]),
                              size_t(s->dim(2) * s->dim(3))),
                  0)
            << "layer " << l << " head " << h;
}

TEST(KVSequence, SharedBlocksOnlyFollowFullBlocks) {
  KVPool pool(small_config(4));
  KVSequence a(pool), b(pool);
  a.reserve_append(4);
  a.commit_append(4);
  b.reserve_append(1);
  b.commit_append(1);
  EXPECT_EQ(error_of([&] { b.append_shared_block(a.blocks()[0], 4); }),
            "KV sequence: a shared block can only follow full blocks");
}

}  // namespace
}  // namespace kvlm
