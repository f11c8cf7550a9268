#include "kvlm/backend/cpu/cpu_kernels.h"

#include <cstring>
#include <vector>

#include "kvlm/backend/cpu/panels.h"

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

}  // namespace kvlm::cpu
