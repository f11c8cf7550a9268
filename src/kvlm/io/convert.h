#pragma once
// `kvlm convert`: writes an MLX-format affine-quantized checkpoint that mlx-lm loads.
//
// As mlx-lm's convert does: every 2-D weight of a Linear or Embedding module is quantized
// (attention and MLP projections, lm_head, embed_tokens) into <module>.weight (packed u32),
// <module>.scales and <module>.biases in the model dtype; norms, biases and other tensors stay
// float. A module whose input dimension is not a multiple of the group size stays float and is
// recorded as false in the quantization map. config.json gains "quantization" and
// "quantization_config" = {"group_size": G, "bits": B, ...overrides}; tokenizer files and
// generation_config.json are copied.
#include <functional>
#include <optional>
#include <string>

#include "kvlm/quant/affine.h"
#include "kvlm/tensor/dtype.h"

namespace kvlm {

struct ConvertOptions {
  std::string src_dir, dst_dir;
  AffineSpec spec;
  // Model dtype for float tensors, scales and biases; default: the source's float dtype
  // (config "torch_dtype"/"dtype", else the embedding's dtype).
  std::optional<DType> dtype;
  size_t max_shard_bytes = size_t(5) << 30;  // mlx-lm's default shard size
};

struct ConvertReport {
  int quantized = 0;      // modules quantized
  int kept_float = 0;     // other tensors copied as float
  int skipped = 0;        // quantizable modules left float (input dim not divisible by group)
  size_t bytes_in = 0, bytes_out = 0;
  int shards = 0;
  DType dtype = DType::kBF16;
};

// Whether mlx-lm would quantize the tensor `name` of shape `shape` (a Linear/Embedding weight).
bool is_quantizable_weight(const std::string& name, const Shape& shape);

// Runs the conversion; `log` receives one line per notable action (may be empty).
ConvertReport convert_checkpoint(const ConvertOptions& opt,
                                 const std::function<void(const std::string&)>& log = {});

}  // namespace kvlm
