#pragma once
// A checkpoint directory: config.json, optional generation_config.json, and weights in
// model.safetensors or model.safetensors.index.json plus shards (Hugging Face and MLX layouts).
// Tensors are mmapped views; a Checkpoint is cheap to copy (shared state).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/base/json.h"
#include "kvlm/quant/affine.h"
#include "kvlm/tensor/tensor.h"

namespace kvlm {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::string file;  // path of the safetensors file holding it
};

class Checkpoint {
 public:
  // Errors name the file at fault: missing or malformed config.json, missing shard, bad header.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const;
  // config.json. If it has "text_config", that object's fields are merged over the top-level
  // ones (text_config wins); top-level "architectures"/"model_type" stay when text_config lacks
  // them.
  const Json& config() const;
  // The path to report in errors about config fields ("<dir>/config.json").
  const std::string& config_path() const;
  // generation_config.json, or an empty object.
  const Json& generation_config() const;

  bool has(const std::string& name) const;
  // Error "<dir>: missing tensor '<name>'".
  const TensorInfo& info(const std::string& name) const;
  // A borrowed view into the mmap (keeps the map alive).
  Tensor tensor(const std::string& name) const;
  // Like tensor(), but Error "<file>: tensor '<name>' has shape [a, b], expected [c, d]" when the
  // shape differs.
  Tensor tensor_checked(const std::string& name, const Shape& expected) const;
  std::vector<std::string> names() const;  // sorted
  // Tensor `name`'s mapped pages leave the process's resident set (SafetensorsFile::release),
  // once its values have been copied: its views stay valid and page back in if read.
  void release(const std::string& name) const;

  // The MLX affine spec of module `module` (a tensor name without ".weight"): the per-module
  // override of config.json's "quantization" block if there is one (false = not quantized),
  // else the global {bits, group_size} when "<module>.scales" exists (mlx-lm's rule). nullopt =
  // not quantized. "quantization_config" is read the same way when "quantization" is absent;
  // a quantization_config naming another method (gptq, awq, fp8, ...) is refused at open().
  std::optional<AffineSpec> quantization_for(const std::string& module) const;
  // The packed weight, scales and biases of a quantized module (quantization_for(module) must
  // hold), checked to be a [out, in] matrix, or [..., out, in] for stacked experts, equal to
  // `expected` once unpacked. Errors name the file and the tensor.
  AffineWeight affine_weight(const std::string& module, const Shape& expected) const;
  // True if config.json carries an MLX quantization block.
  bool is_quantized() const;

  size_t total_bytes() const;  // sum of all tensor sizes

  struct State;

 private:
  explicit Checkpoint(std::shared_ptr<const State> s) : s_(std::move(s)) {}
  std::shared_ptr<const State> s_;
};

// The merge rule of Checkpoint::config(), exposed for tests and for tools reading bare configs.
Json merge_text_config(const Json& config);

}  // namespace kvlm
