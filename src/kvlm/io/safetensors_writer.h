#pragma once
// safetensors writing, for `kvlm convert` and for tests that need fixture files.
//
// Layout follows the reference implementation so that every reader accepts the file: the JSON
// header is padded with spaces to a multiple of 8 bytes, and tensors are laid out contiguously,
// sorted by element size (largest first) and then by name, so each tensor starts aligned to its
// element size.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kvlm/base/json.h"
#include "kvlm/tensor/tensor.h"

namespace kvlm {

class SafetensorsWriter {
 public:
  // `format` goes into __metadata__ {"format": ...}: "mlx" for MLX checkpoints, "pt" otherwise.
  explicit SafetensorsWriter(std::string format = "pt");

  // Adds a CPU tensor (any strides; written contiguously). The tensor is kept, not copied, until
  // write(). Error on a duplicate name.
  void add(const std::string& name, const Tensor& t);
  // Adds raw bytes with a declared dtype and shape; the byte count must match.
  void add_bytes(const std::string& name, DType dtype, const Shape& shape, std::string bytes);
  void set_metadata(const std::string& key, const std::string& value);

  size_t size() const { return entries_.size(); }
  size_t data_bytes() const;  // total tensor bytes
  // Writes the file; Error naming `path` on failure.
  void write(const std::string& path) const;
  // The complete file image (header and data); used by tests to build damaged files.
  std::string serialize() const;

 private:
  struct Entry {
    DType dtype;
    Shape shape;
    Tensor tensor;      // set by add()
    std::string bytes;  // set by add_bytes()
  };
  std::vector<std::string> ordered_names() const;
  std::string header_bytes(const std::vector<std::string>& order) const;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// The 8-byte length prefix plus `header_json` as given, followed by `data`: for tests and the
// fuzzer, which need headers that lie.
std::string safetensors_image(const std::string& header_json, const std::string& data);

}  // namespace kvlm
