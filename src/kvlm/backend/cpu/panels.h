#pragma once
// The decode layout of dense weights (ops::panel_weight, the default at model load). A linear
// layer in decode reads each weight once per token, several rows at a time, 16 elements of each
// row per step. In the checkpoint's row-major order those are that many short streams (a row of
// 896 bf16 is 1.8 KB) that the hardware prefetchers pick up late; panels turn them into one
// sequential stream per thread: rows are grouped in panels of kPanelRows, and a panel stores block
// 0 (elements 0-31) of each of its rows, then block 1 of each, and so on. A last panel of fewer
// rows keeps the same order over its rows. Only the addresses change: every kernel reads the same
// values in the same order, so results are bit-identical to the row-major weight. 16 rows: one
// AVX-512 decode tile reads a whole panel (1 KB of bf16 every two steps). Batched decode and
// prefill read spans of panels, their 3-row tiles running on across panels.
//
// Blocks of 32 elements put each bf16 row's block in a cache line of its own, so a 3-row tile
// never shares a line with the next tile, which would read it again later. Against blocks of 16
// (two rows per line), single-core from cache (4864 x 896 bf16, panels against rows): 8 tokens
// 0.87 -> 0.94-1.01 of rows' speed; and ops::linear from memory, one token, 2 threads, 80 such
// weights in turn: 45-56 -> 62-66 GB/s (the read probe 63-75). With blocks of 16, panels of
// rows longer than 2 KB had made 8-token batches 40-45% slower (each tile re-read the panel from
// L2 in strided passes) and were left row-major; with blocks of 32 every width gains (1B bf16,
// rows -> panels: decode 18 -> 29 tok/s, 8 sequences 78 -> 83-88, prefill 106-119 -> 135-139).
#include <algorithm>
#include <cstdint>

namespace kvlm::cpu {

inline constexpr int64_t kPanelRows = 16, kPanelBlock = 32;

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
