#include "kvlm/backend/ops.h"
#include "kvlm/base/error.h"

namespace kvlm::ops {

namespace {

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

void check_bias(const Tensor& bias, int64_t out) {
  if (!bias.defined()) return;
  check(is_float(bias.dtype()) && bias.ndim() == 1 && bias.dim(0) == out && bias.is_contiguous(),
        [&] { return "bias " + bias.describe() + " does not match a weight with " + std::to_string(out) +
            " outputs"; });
}

}  // namespace

Weight dense_weight(const Tensor& w, const Tensor& bias) {
  check(w.defined() && w.ndim() == 2 && is_float(w.dtype()) && w.is_contiguous(),
        [&] { return "dense weight must be a contiguous 2-D f32/f16/bf16 tensor, got " +
            (w.defined() ? w.describe() : std::string("nothing")); });
  Weight out;
  out.weight = w;
  out.bias = bias;
  out.out_features = w.dim(0);
  out.in_features = w.dim(1);
  check_bias(bias, out.out_features);
  return out;
}

Weight affine_weight(const Tensor& packed, const Tensor& scales, const Tensor& biases,
                     const AffineSpec& spec, const Tensor& bias) {
  Weight out;
  out.in_features = affine_check_shapes(packed, scales, biases, spec, "quantized weight");
  check(packed.is_contiguous() && scales.is_contiguous() && biases.is_contiguous(),
        [&] { return "quantized weight: packed " + packed.describe() + ", scales " + scales.describe() +
            " and biases " + biases.describe() + " must be contiguous"; });
  out.out_features = packed.dim(0);
  out.weight = packed;
  out.scales = scales;
  out.biases = biases;
  out.quant = spec;
  out.bias = bias;
  check_bias(bias, out.out_features);
  return out;
}

}  // namespace kvlm::ops
