// MLX affine quantization.
//
// The rule, per group of `group_size` values w (MLX's Metal and CUDA `affine_quantize` kernels,
// which agree with each other; all arithmetic in f32):
//   n_bins = 2^bits - 1, eps = 1e-7
//   w_min  = min(w)            w_max = max(0, max(w))    (the GPU kernels start the running
//                                                         max at 0, but the running min at +max)
//   scale  = max((w_max - w_min) / n_bins, eps)
//   side   = |w_min| > |w_max|;  edge = side ? w_min : w_max;  scale = side ? scale : -scale
//   q0     = round(edge / scale)                (round half away from zero)
//   if q0 != 0: scale = edge / q0, bias = edge  (the larger-magnitude extreme is exact)
//   else:       bias = 0
//   code   = min(round((w - bias) / scale), n_bins)
// scale and bias are then stored in the weight dtype; the codes come from the f32 values.
//
// MLX's CPU backend differs in two ways: its running max starts at -inf (so an all-negative
// group gets a tighter scale) and it rounds half to even (rint). Checkpoints are made by
// mlx-lm's convert on Apple GPUs, so kvlm follows the GPU kernels.
#include "kvlm/quant/affine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kvlm/base/error.h"
#include "kvlm/base/half.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm {

bool affine_spec_supported(const AffineSpec& s) {
  const bool bits_ok = s.bits == 2 || s.bits == 3 || s.bits == 4 || s.bits == 5 || s.bits == 6 ||
                       s.bits == 8;
  const bool group_ok = s.group_size == 32 || s.group_size == 64 || s.group_size == 128;
  return bits_ok && group_ok;
}

void check_affine_spec(const AffineSpec& s, const std::string& what) {
  check(affine_spec_supported(s),
        what + ": unsupported MLX quantization bits=" + std::to_string(s.bits) +
            " group_size=" + std::to_string(s.group_size) +
            " (bits must be 2, 3, 4, 5, 6 or 8; group_size 32, 64 or 128)");
}

int64_t affine_packed_words(int64_t cols, int bits) {
  check(cols >= 0 && (cols * bits) % 32 == 0,
        "affine: " + std::to_string(cols) + " values of " + std::to_string(bits) +
            " bits do not fill whole uint32 words");
  return cols * bits / 32;
}

uint32_t affine_code(const uint32_t* packed, int64_t i, int bits) {
  const uint64_t bit = uint64_t(i) * uint64_t(bits);
  const uint64_t word = bit / 32;
  const unsigned shift = unsigned(bit % 32);
  uint64_t v = packed[word] >> shift;
  if (shift + unsigned(bits) > 32) v |= uint64_t(packed[word + 1]) << (32 - shift);
  return uint32_t(v) & ((1u << bits) - 1u);
}

void affine_set_code(uint32_t* packed, int64_t i, int bits, uint32_t q) {
  const uint64_t bit = uint64_t(i) * uint64_t(bits);
  const uint64_t word = bit / 32;
  const unsigned shift = unsigned(bit % 32);
  const uint64_t mask = (uint64_t(1) << bits) - 1;
  // Splice into a 64-bit window over two words; the second is touched only if the code crosses.
  const bool crosses = shift + unsigned(bits) > 32;
  uint64_t window = packed[word] | (crosses ? uint64_t(packed[word + 1]) << 32 : 0);
  window = (window & ~(mask << shift)) | ((uint64_t(q) & mask) << shift);
  packed[word] = uint32_t(window);
  if (crosses) packed[word + 1] = uint32_t(window >> 32);
}

namespace {

// Rounds an f32 to the nearest value of `dt` (f32, f16 or bf16), returned widened to f32.
float round_to_dtype(float v, DType dt) {
  switch (dt) {
    case DType::kF32: return v;
    case DType::kF16: return f16_to_f32(f32_to_f16(v));
    case DType::kBF16: return bf16_to_f32(f32_to_bf16(v));
    default: throw Error(std::string("affine: parameter dtype must be f32, f16 or bf16, not ") +
                         dtype_name(dt));
  }
}

struct GroupParams {
  float scale, bias;
};

GroupParams group_params(const float* w, int group_size, int bits) {
  const float n_bins = float((1 << bits) - 1);
  const float eps = 1e-7f;
  float w_min = std::numeric_limits<float>::max();
  float w_max = 0.0f;
  for (int j = 0; j < group_size; ++j) {
    w_min = std::min(w_min, w[j]);
    w_max = std::max(w_max, w[j]);
  }
  float scale = std::max((w_max - w_min) / n_bins, eps);
  const bool side = std::fabs(w_min) > std::fabs(w_max);
  scale = side ? scale : -scale;
  const float edge = side ? w_min : w_max;
  const float q0 = std::round(edge / scale);
  if (q0 == 0.0f) return {scale, 0.0f};
  return {edge / q0, edge};
}

uint32_t quantize_value(float w, const GroupParams& p, float n_bins) {
  const float q = std::min(std::round((w - p.bias) / p.scale), n_bins);
  // q >= 0 by construction for finite input; the test also maps NaN (from NaN weights) to 0 so
  // the conversion below is always defined.
  return q > 0.0f ? uint32_t(q) : 0u;
}

}  // namespace

void affine_quantize_row(const float* x, int64_t cols, const AffineSpec& s, DType param_dtype,
                         uint32_t* packed, float* scales, float* biases) {
  // Messages are built only on failure: KV writes call this once per (token, kv head) row.
  if (!affine_spec_supported(s)) check_affine_spec(s, "affine_quantize_row");
  if (cols % s.group_size != 0)
    throw Error("affine_quantize_row: " + std::to_string(cols) +
                " values are not a multiple of group size " + std::to_string(s.group_size));
  std::memset(packed, 0, size_t(affine_packed_words(cols, s.bits)) * sizeof(uint32_t));
  const float n_bins = float((1 << s.bits) - 1);
  for (int64_t g = 0; g < cols / s.group_size; ++g) {
    const float* w = x + g * s.group_size;
    const GroupParams p = group_params(w, s.group_size, s.bits);
    for (int j = 0; j < s.group_size; ++j)
      affine_set_code(packed, g * s.group_size + j, s.bits, quantize_value(w[j], p, n_bins));
    scales[g] = round_to_dtype(p.scale, param_dtype);
    biases[g] = round_to_dtype(p.bias, param_dtype);
  }
}

void affine_dequantize_row(const uint32_t* packed, const float* scales, const float* biases,
                           int64_t cols, const AffineSpec& s, float* out) {
  for (int64_t i = 0; i < cols; ++i) {
    const int64_t g = i / s.group_size;
    out[i] = scales[g] * float(affine_code(packed, i, s.bits)) + biases[g];
  }
}

namespace {

// Reads n values of a contiguous f32/f16/bf16 tensor starting at element `base`.
void read_f32(const Tensor& t, int64_t base, int64_t n, float* out) {
  switch (t.dtype()) {
    case DType::kF32: std::memcpy(out, t.data<float>() + base, size_t(n) * sizeof(float)); break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(t.data<uint16_t>()[base + i]);
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(t.data<uint16_t>()[base + i]);
      break;
    default: throw Error("affine: expected an f32, f16 or bf16 tensor, got " + t.describe());
  }
}

// Stores f32 values (already representable) into a contiguous tensor of dtype f32/f16/bf16.
void write_f32(const float* v, int64_t n, const Tensor& t, int64_t base) {
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::kF32: t.data<float>()[base + i] = v[i]; break;
      case DType::kF16: t.data<uint16_t>()[base + i] = f32_to_f16(v[i]); break;
      default: t.data<uint16_t>()[base + i] = f32_to_bf16(v[i]); break;
    }
  }
}

Shape with_last(Shape s, int64_t last) {
  s.back() = last;
  return s;
}

}  // namespace

AffineWeight affine_quantize(const Tensor& w, const AffineSpec& s, DType param_dtype) {
  check_affine_spec(s, "affine_quantize");
  check(w.ndim() >= 1 && w.is_contiguous() && w.device() == Device::kCPU,
        "affine_quantize: need a contiguous CPU tensor, got " + w.describe());
  check(w.dtype() == DType::kF32 || w.dtype() == DType::kF16 || w.dtype() == DType::kBF16,
        "affine_quantize: cannot quantize " + w.describe() + " (need f32, f16 or bf16)");
  round_to_dtype(0.0f, param_dtype);  // validates param_dtype before any work
  const int64_t cols = w.dim(-1);
  check(cols % s.group_size == 0, "affine_quantize: last dimension of " + w.describe() +
                                      " is not a multiple of group size " +
                                      std::to_string(s.group_size));
  const int64_t rows = cols ? w.numel() / cols : 0;
  const int64_t words = affine_packed_words(cols, s.bits);
  const int64_t groups = cols / s.group_size;
  AffineWeight out;
  out.spec = s;
  out.packed = Tensor::empty(with_last(w.shape(), words), DType::kU32);
  out.scales = Tensor::empty(with_last(w.shape(), groups), param_dtype);
  out.biases = Tensor::empty(with_last(w.shape(), groups), param_dtype);
  // Rows are independent, so splitting them over threads cannot change a single byte.
  ThreadPool::global().parallel_for(size_t(rows), 16, [&](size_t r0, size_t r1) {
    std::vector<float> row(static_cast<size_t>(cols)), sc(static_cast<size_t>(groups)),
        bi(static_cast<size_t>(groups));
    for (int64_t r = int64_t(r0); r < int64_t(r1); ++r) {
      read_f32(w, r * cols, cols, row.data());
      for (float& v : row) v = round_to_dtype(v, param_dtype);
      affine_quantize_row(row.data(), cols, s, param_dtype,
                          out.packed.data<uint32_t>() + r * words, sc.data(), bi.data());
      write_f32(sc.data(), groups, out.scales, r * groups);
      write_f32(bi.data(), groups, out.biases, r * groups);
    }
  });
  return out;
}

int64_t affine_check_shapes(const Tensor& packed, const Tensor& scales, const Tensor& biases,
                            const AffineSpec& s, const std::string& what) {
  check_affine_spec(s, what);
  check(packed.dtype() == DType::kU32 && packed.ndim() >= 1,
        what + ": packed weight must be u32, got " + packed.describe());
  const int64_t cols = packed.dim(-1) * 32 / s.bits;
  const Shape want = with_last(packed.shape(), cols / s.group_size);
  for (const Tensor* t : {&scales, &biases}) {
    check(dtype_traits(t->dtype()).is_float,
          what + ": scales and biases must be floats, got " + t->describe());
    check(t->shape() == want, what + ": scales/biases shape " + shape_string(t->shape()) +
                                  " does not match packed " + shape_string(packed.shape()) +
                                  " at bits=" + std::to_string(s.bits) + " group_size=" +
                                  std::to_string(s.group_size) + " (expected " +
                                  shape_string(want) + ")");
  }
  return cols;
}

Tensor affine_dequantize(const AffineWeight& w) {
  const int64_t cols = affine_check_shapes(w.packed, w.scales, w.biases, w.spec, "affine_dequantize");
  check(w.packed.is_contiguous() && w.scales.is_contiguous() && w.biases.is_contiguous(),
        "affine_dequantize: tensors must be contiguous");
  const int64_t words = w.packed.dim(-1);
  const int64_t groups = cols / w.spec.group_size;
  const int64_t rows = words ? w.packed.numel() / words : 0;
  Tensor out = Tensor::empty(with_last(w.packed.shape(), cols), DType::kF32);
  std::vector<float> sc(static_cast<size_t>(groups)), bi(static_cast<size_t>(groups));
  for (int64_t r = 0; r < rows; ++r) {
    read_f32(w.scales, r * groups, groups, sc.data());
    read_f32(w.biases, r * groups, groups, bi.data());
    affine_dequantize_row(w.packed.data<uint32_t>() + r * words, sc.data(), bi.data(), cols,
                          w.spec, out.data<float>() + r * cols);
  }
  return out;
}

}  // namespace kvlm
