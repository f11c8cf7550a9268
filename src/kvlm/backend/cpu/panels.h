#pragma once
// The panel layout of weights (ops::panel_weight, the default at model load) and the order in
// which every linear layer on the exact path reduces (docs/decisions.md, "Linear layers reduce
// along the input").
//
// Rows go in panels of kPanelRows; a panel stores input 0 of each of its rows, then input 1 of
// each, and so on, and a last panel of fewer rows is padded with zero rows. A register holds 16
// consecutive rows at one input, so every kernel keeps rows across its lanes and each output is a
// plain sequence of fused multiply-adds along the input:
//   y[t][r] = fma(w[r][in-1], x[t][in-1], ... fma(w[r][1], x[t][1], fma(w[r][0], x[t][0], 0))).
// The order depends only on `in`. Decode reads a few panels side by side, each one sequential
// stream; a batch or a prefill tile reads one panel front to back and uses each weight it loads
// for every token of the tile (a 32 x 8 register tile: 16 fmas per 64-byte line of bf16). Rows
// across lanes replaced a 16-lane dot product per row, whose batch tiles read 3-6-row stripes of
// 16-row panels: 8-token bf16 batches from memory (bench_kernels BatchFromMemory, 2 threads) went
// from 163-230 to 243-308 GFLOP/s (docs/performance.md, twenty-fifth session).
//
// MLX affine weights reduce in the same order over their dequantized values (scale * code + bias,
// cpu::weight_row's values), so a quantized checkpoint gives exactly the outputs of its
// dequantized float twin. On the exact path panel_weight copies them into affine panels that the
// kernels dequantize in registers: panel p, group g (group_size inputs) holds the group's 32
// scales, then its 32 biases (f32), then its codes input by input in a container of 4 bits (codes
// of 2 to 4 bits) or 8 (5 to 8 bits); at one input, row r's 8-bit code is byte r, row r's 4-bit
// code (r < 16) the low nibble of byte r and row r+16's the high nibble. A weight without affine
// panels is dequantized a panel at a time per call.
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kvlm::cpu {

inline constexpr int64_t kPanelRows = 32;

// Rows stored for `rows` rows: whole panels.
inline int64_t panel_stored_rows(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows * kPanelRows; }

// Where element (r, k) of a panel-ordered weight with `in` inputs lies.
inline int64_t panel_index(int64_t r, int64_t k, int64_t in) {
  return (r / kPanelRows * in + k) * kPanelRows + r % kPanelRows;
}

// Writes panel p of a row-major [rows, in] matrix of T at `src` into dst (in * kPanelRows
// elements), rows past the matrix as zeros. Inputs go 64 at a time so that the rows' reads and the
// panel's writes both stay within a few KB.
template <class T>
void pack_panel(const T* src, int64_t rows, int64_t in, int64_t p, T* dst) {
  constexpr int64_t kStep = 64;
  const int64_t first = p * kPanelRows, n = std::min(kPanelRows, rows - first);
  if (n < kPanelRows) std::memset(static_cast<void*>(dst), 0, size_t(in * kPanelRows) * sizeof(T));
  for (int64_t k0 = 0; k0 < in; k0 += kStep) {
    const int64_t k1 = std::min(in, k0 + kStep);
    for (int64_t r = 0; r < n; ++r) {
      const T* row = src + (first + r) * in;
      for (int64_t k = k0; k < k1; ++k) dst[k * kPanelRows + r] = row[k];
    }
  }
}

// The container of `bits`-bit codes in affine panels: 4 or 8 bits.
inline int affine_container_bits(int bits) { return bits <= 4 ? 4 : 8; }

// Bytes of one group of an affine panel of `bits`-bit codes, and of a whole panel of `in` inputs.
inline int64_t affine_group_bytes(int group_size, int bits) {
  return 2 * kPanelRows * int64_t(sizeof(float)) + group_size * kPanelRows * affine_container_bits(bits) / 8;
}
inline int64_t affine_panel_bytes(int64_t in, int group_size, int bits) {
  return in / group_size * affine_group_bytes(group_size, bits);
}

}  // namespace kvlm::cpu
