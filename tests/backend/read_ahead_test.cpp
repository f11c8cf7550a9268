// ops::read_ahead_ranges: each pool thread (the caller at index 0) is pointed at the first bytes
// of the rows that parallel_for gives it first, in the layout the kernels stream (rows, panels, the int8 path's
// tiles), across the weights of one linear_many call, at most kReadAheadBytes of them; a
// ReadAheadPlan keeps them for the size of pool they were found for.
#include <gtest/gtest.h>

#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/backend/ops.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/quant/affine.h"

namespace kvlm::ops {
namespace {

const char* base(const Tensor& t) { return static_cast<const char*>(t.raw()); }

// Ranges for a pool of `threads` (pools of the same size split rows alike).
std::vector<ReadAheadRange> ranges(std::span<const Weight* const> ws, int threads) {
  const ThreadPool pool(threads);
  return read_ahead_ranges(ws, pool);
}

Weight bf16_weight(int64_t rows, int64_t in) { return dense_weight(Tensor::zeros({rows, in}, DType::kBF16)); }

TEST(ReadAhead, PointsAThreadAtItsFirstRowInRowsAndPanels) {
  const Weight rows = bf16_weight(100, 64);
  const Weight panels = panel_weight(rows);
  ASSERT_TRUE(panels.panels);
  for (const Weight* w : {&rows, &panels}) {
    const Weight* one[] = {w};
    const std::vector<ReadAheadRange> r = ranges(one, 2);  // the caller: rows 0..63, worker 1: 64..99
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].p, base(w->weight)) << (w->panels ? "panels" : "rows");
    EXPECT_EQ(r[0].bytes, size_t(64 * 64 * 2));
    // Row 64 starts panel 2 (panels of 32 rows): in both layouts 64 rows of 64 inputs come first.
    EXPECT_EQ(r[1].p, base(w->weight) + 64 * 64 * 2) << (w->panels ? "panels" : "rows");
    EXPECT_EQ(r[1].bytes, size_t(36 * 64 * 2));
  }
}

TEST(ReadAhead, PointsAWorkerAtItsFirstTileOnTheInt8Path) {
  const AffineWeight a = affine_quantize(Tensor::zeros({100, 64}, DType::kF32), AffineSpec{4, 64}, DType::kBF16);
  Weight w = affine_weight(a.packed, a.scales, a.biases, AffineSpec{4, 64});
  w.matmul = MatmulPath::kInt8;
  w = int8_weight(w);
  const int64_t tile_bytes = cpu::int8_group_bytes(64, 4, DType::kBF16);  // one group per row
  ASSERT_EQ(w.int8_tiles.nbytes(), size_t(7 * tile_bytes));                 // 100 rows in 7 tiles
  const Weight* one[] = {&w};
  const std::vector<ReadAheadRange> r = ranges(one, 2);
  EXPECT_EQ(r[0].p, base(w.int8_tiles));
  EXPECT_EQ(r[0].bytes, size_t(4 * tile_bytes));
  EXPECT_EQ(r[1].p, base(w.int8_tiles) + 4 * tile_bytes);
  EXPECT_EQ(r[1].bytes, size_t(36 * tile_bytes / 16));
}

TEST(ReadAhead, FollowsTheRowsOfSeveralWeightsAndStopsAtTheirEnd) {
  const Weight q = bf16_weight(64, 32), k = bf16_weight(16, 32), v = bf16_weight(16, 32);
  const Weight* qkv[] = {&q, &k, &v};
  const std::vector<ReadAheadRange> r = ranges(qkv, 3);  // shares of 32 of 96 rows
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].p, base(q.weight));
  EXPECT_EQ(r[1].p, base(q.weight) + 32 * 32 * 2);
  EXPECT_EQ(r[1].bytes, size_t(32 * 32 * 2));
  EXPECT_EQ(r[2].p, base(k.weight));  // worker 2 starts at row 64: k's first
  EXPECT_EQ(r[2].bytes, size_t(16 * 32 * 2));
  const Weight* small[] = {&k};
  const std::vector<ReadAheadRange> one_share = ranges(small, 4);  // one share of 16 holds all
  EXPECT_EQ(one_share[0].p, base(k.weight));
  for (size_t i = 1; i < one_share.size(); ++i) {
    EXPECT_EQ(one_share[i].p, nullptr);
    EXPECT_EQ(one_share[i].bytes, 0u);
  }
}

TEST(ReadAhead, ReadsAtMostItsBudget) {
  const Weight w = bf16_weight(2048, 256);  // each share: 1024 rows, 512 KB
  const Weight* one[] = {&w};
  for (const ReadAheadRange& r : ranges(one, 2)) EXPECT_EQ(r.bytes, kReadAheadBytes);
}

TEST(ReadAhead, APlanFindsItsRangesAgainForAPoolOfAnotherSize) {
  const Weight q = bf16_weight(64, 32), k = bf16_weight(16, 32), v = bf16_weight(16, 32);
  const ReadAheadPlan plan({&q, &k, &v});
  const Weight* qkv[] = {&q, &k, &v};
  const auto same = [](const std::vector<ReadAheadRange>& a, const std::vector<ReadAheadRange>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].p != b[i].p || a[i].bytes != b[i].bytes) return false;
    return true;
  };
  for (int threads : {2, 3, 2, 1}) {
    const ThreadPool pool(threads);
    EXPECT_TRUE(same(plan.ranges(pool), read_ahead_ranges(qkv, pool))) << threads << " threads";
  }
}

}  // namespace
}  // namespace kvlm::ops
