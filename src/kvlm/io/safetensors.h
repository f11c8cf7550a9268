#pragma once
// safetensors reading. A file is an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ..., optional
// "__metadata__": {string: string}}), then the data section; offsets are relative to the data
// section. Files are mmapped and tensors are views into the map, never copies.
//
// The header is untrusted input: every field is validated and every failure is one kvlm::Error
// that names the file and the problem. parse_safetensors works on bytes so that the fuzzer and
// the tests need not write files.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvlm/base/file.h"
#include "kvlm/base/json.h"
#include "kvlm/tensor/tensor.h"

namespace kvlm {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  size_t offset = 0;  // from the start of the file (header length included)
  size_t nbytes = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // sorted by name
  Json metadata = Json::object();         // "__metadata__", or empty
  size_t data_start = 0;                  // 8 + header length

  // nullptr if absent.
  const SafetensorsEntry* find(const std::string& name) const;
};

// Parses and validates the header of a complete file image `data[0, size)`. `origin` (the path)
// prefixes every error message.
SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& origin);

// An open, mmapped safetensors file. Always held by shared_ptr: the tensors it hands out keep it
// alive.
class SafetensorsFile : public std::enable_shared_from_this<SafetensorsFile> {
 public:
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return map_->path(); }
  const SafetensorsHeader& header() const { return header_; }
  size_t file_size() const { return map_->size(); }

  // A borrowed view of the entry's bytes. A tensor whose bytes are not aligned to its element
  // size (legal in the format, produced by careless writers) is copied into aligned memory
  // instead, since kernels may load it with aligned vector instructions.
  Tensor tensor(const SafetensorsEntry& e) const;
  // Error "<path>: missing tensor '<name>'" if absent.
  Tensor tensor(const std::string& name) const;
  // The entry's pages leave the process's resident set (MappedFile::release): for a tensor
  // whose values were copied into another layout. Views of it stay valid.
  void release(const SafetensorsEntry& e) const { map_->release(e.offset, e.nbytes); }

 private:
  explicit SafetensorsFile(std::unique_ptr<MappedFile> map);
  std::unique_ptr<MappedFile> map_;
  SafetensorsHeader header_;
};

}  // namespace kvlm
