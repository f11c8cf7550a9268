#include "kvlm/backend/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kvlm/backend/cpu/panels.h"
#include "kvlm/quant/affine.h"

namespace kvlm::cpu {

void check_cpu_contiguous(const Tensor& t, const char* op, const char* what) {
  check(t.defined(), [&] { return std::string(op) + ": " + what + " is undefined"; });
  check(t.device() == Device::kCPU,
        [&] { return std::string(op) + ": " + what + " is on " + device_name(t.device()) +
            "; this build implements the op for the CPU only"; });
  check(t.is_contiguous(), [&] { return std::string(op) + ": " + what + " " + t.describe() + " is not contiguous"; });
}

void check_f32(const Tensor& t, int rank, const char* op, const char* what) {
  check_cpu_contiguous(t, op, what);
  check(t.dtype() == DType::kF32 && t.ndim() == rank,
        [&] { return std::string(op) + ": " + what + " must be a rank-" + std::to_string(rank) +
            " f32 tensor, got " + t.describe(); });
}

void widen(const Tensor& t, int64_t offset, int64_t n, float* out) {
  switch (t.dtype()) {
    case DType::kF32:
      std::memcpy(out, t.data<float>() + offset, size_t(n) * sizeof(float));
      return;
    case DType::kBF16: {
      const uint16_t* p = t.data<uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      return;
    }
    case DType::kF16: {
      const uint16_t* p = t.data<uint16_t>() + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(p[i]);
      return;
    }
    default:
      throw Error(std::string("cannot read ") + t.describe() + " as floats");
  }
}

void narrow(const float* src, int64_t n, DType dt, void* dst) {
  switch (dt) {
    case DType::kF32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::kBF16: {
      auto* p = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF16: {
      auto* p = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      throw Error(std::string("cannot store floats as ") + dtype_name(dt));
  }
}

const float* weight_row(const ops::Weight& w, int64_t row, float* buf) {
  const int64_t in = w.in_features;
  if (w.panels) {  // the row's inputs lie kPanelRows elements apart
    const int64_t at = panel_index(row, 0, in);
    const auto gather = [&](const auto* p, auto to_f32) {
      for (int64_t k = 0; k < in; ++k) buf[k] = to_f32(p[at + k * kPanelRows]);
    };
    switch (w.weight.dtype()) {
      case DType::kF32: gather(w.weight.data<float>(), [](float v) { return v; }); break;
      case DType::kBF16: gather(w.weight.data<uint16_t>(), bf16_to_f32); break;
      default: gather(w.weight.data<uint16_t>(), f16_to_f32); break;
    }
    return buf;
  }
  if (!w.quant) {
    if (w.weight.dtype() == DType::kF32) return w.weight.data<float>() + row * in;
    widen(w.weight, row * in, in, buf);
    return buf;
  }
  // MLX affine: widen this row's scales and biases (model dtype), then dequantize.
  const int64_t groups = in / w.quant->group_size;
  // Per-thread scratch for the row's widened scales and biases: no allocation per weight row.
  thread_local std::vector<float> sb;
  sb.resize(size_t(2 * groups));
  widen(w.scales, row * groups, groups, sb.data());
  widen(w.biases, row * groups, groups, sb.data() + groups);
  const int64_t words = affine_packed_words(in, w.quant->bits);
  affine_dequantize_row(w.weight.data<uint32_t>() + row * words, sb.data(), sb.data() + groups, in,
                        *w.quant, buf);
  return buf;
}

namespace {

// The codes of one group of an MLX affine row (a whole number of 32-bit words), in order.
template <class Fn>
void for_each_code(const uint32_t* words, int group_size, int bits, Fn fn) {
  const uint64_t mask = (uint64_t(1) << bits) - 1;
  uint64_t window = 0;
  int have = 0;
  for (int k = 0; k < group_size; ++k) {
    if (have < bits) window |= uint64_t(*words++) << have, have += 32;
    fn(k, uint32_t(window & mask));
    window >>= bits, have -= bits;
  }
}

}  // namespace

void dequantize_panel(const ops::Weight& w, int64_t p, float* dst) {
  const int bits = w.quant->bits, G = w.quant->group_size;
  const int64_t in = w.in_features, groups = in / G, first = p * kPanelRows;
  const int64_t n = std::min(kPanelRows, w.out_features - first);
  const int64_t words = affine_packed_words(in, bits), group_words = int64_t(G) * bits / 32;
  if (n < kPanelRows) std::memset(dst, 0, size_t(in * kPanelRows) * sizeof(float));
  // A group of the panel (G inputs x 32 rows) at a time, which stays in the L1 cache.
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < n; ++r) {
      const int64_t row = first + r;
      float scale, bias;
      widen(w.scales, row * groups + g, 1, &scale);
      widen(w.biases, row * groups + g, 1, &bias);
      float* out = dst + g * G * kPanelRows + r;
      // affine_dequantize_row's values.
      for_each_code(w.weight.data<uint32_t>() + row * words + g * group_words, G, bits,
                    [&](int k, uint32_t code) { out[k * kPanelRows] = scale * float(code) + bias; });
    }
}

namespace {

// Row r (of 32) of an affine panel: its scales and biases (f32) and its codes in the container.
template <bool kNibbles>
void pack_affine_row(const ops::Weight& w, int64_t row, int64_t r, uint8_t* dst, std::vector<float>& params) {
  const int bits = w.quant->bits, G = w.quant->group_size;
  const int64_t groups = w.in_features / G, group_words = int64_t(G) * bits / 32;
  const int64_t group_bytes = affine_group_bytes(G, bits);
  params.resize(size_t(2 * groups));
  widen(w.scales, row * groups, groups, params.data());
  widen(w.biases, row * groups, groups, params.data() + groups);
  const uint32_t* packed = w.weight.data<uint32_t>() + row * affine_packed_words(w.in_features, bits);
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* block = dst + g * group_bytes;
    std::memcpy(block + r * 4, &params[size_t(g)], 4);
    std::memcpy(block + (kPanelRows + r) * 4, &params[size_t(groups + g)], 4);
    uint8_t* codes = block + 2 * kPanelRows * int64_t(sizeof(float));
    const int shift = kNibbles && r >= 16 ? 4 : 0;
    for_each_code(packed + g * group_words, G, bits, [&](int k, uint32_t code) {
      if constexpr (kNibbles) codes[k * kPanelRows / 2 + r % 16] |= uint8_t(code << shift);
      else codes[k * kPanelRows + r] = uint8_t(code);
    });
  }
}

}  // namespace

void pack_affine_panel(const ops::Weight& w, int64_t p, uint8_t* dst) {
  const int bits = w.quant->bits;
  const int64_t first = p * kPanelRows, n = std::min(kPanelRows, w.out_features - first);
  std::memset(dst, 0, size_t(affine_panel_bytes(w.in_features, w.quant->group_size, bits)));
  std::vector<float> params;
  for (int64_t r = 0; r < n; ++r) {
    if (affine_container_bits(bits) == 4) pack_affine_row<true>(w, first + r, r, dst, params);
    else pack_affine_row<false>(w, first + r, r, dst, params);
  }
}

}  // namespace kvlm::cpu
