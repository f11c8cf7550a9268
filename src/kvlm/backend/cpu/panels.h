#pragma once
// The decode layout of dense weights (ops::panel_weight, the default at model load). A linear
// layer in decode reads each weight once per token, several rows at a time, 16 elements of each
// row per step. In the checkpoint's row-major order those are that many short streams (a row of
// 896 bf16 is 1.8 KB) that the hardware prefetchers pick up late; panels turn them into one
// sequential stream per thread: rows are grouped in panels of kPanelRows, and a panel stores block
// 0 (elements 0-15) of each of its rows, then block 1 of each, and so on. A last panel of fewer
// rows keeps the same order over its rows. Only the addresses change: every kernel reads the same values in the same order, so
// results are bit-identical to the row-major weight. 16 rows: one AVX-512 decode tile reads a
// whole panel (512 bytes of bf16 per step). Batched decode and prefill read spans of panels, their
// 3-row tiles running on across panels.
#include <algorithm>
#include <cstdint>

namespace kvlm::cpu {

inline constexpr int64_t kPanelRows = 16, kPanelBlock = 16;

// Only rows this short take panel order. Longer rows are long streams already (decode of a
// 2048-wide bf16 weight measured the same in either order), and a panel wider than the L1 cache
// (16 rows x 2 KB = 32 KB) makes batched tiles re-read it from L2 in strided passes: 8-token
// batches ran 40-45% slower on 2048- to 8192-wide panels than on their row-major rows.
inline constexpr int64_t kPanelMaxRowBytes = 2048;

// Where row r of a panel-ordered [rows, in] matrix lies: element i is at
// start + (i / kPanelBlock) * step + i % kPanelBlock.
struct PanelRow {
  int64_t start, step;
};

inline PanelRow panel_row(int64_t r, int64_t rows, int64_t in) {
  const int64_t first = r / kPanelRows * kPanelRows;
  const int64_t n = std::min(kPanelRows, rows - first);
  return {first * in + (r - first) * kPanelBlock, n * kPanelBlock};
}

}  // namespace kvlm::cpu
