#include "kvlm/io/safetensors.h"

#include <algorithm>
#include <cstring>

#include "kvlm/base/error.h"
#include "kvlm/base/json.h"

namespace kvlm {

const SafetensorsEntry* SafetensorsHeader::find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const SafetensorsEntry& e, const std::string& n) { return e.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

namespace {

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A non-negative JSON integer that fits in uint64 (JSON floats such as 1.0 are refused).
bool json_uint(const Json& j, uint64_t* out) {
  if (j.is_number_unsigned()) return *out = j.get<uint64_t>(), true;
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return *out = uint64_t(j.get<int64_t>()), true;
  return false;
}

Shape parse_shape(const Json& j, const std::string& where) {
  const std::string bad = where + " has an invalid shape " + j.dump() +
                          " (need a list of non-negative integers)";
  check(j.is_array(), bad);
  check(j.size() <= Shape::kMaxDims, [&] {
    return where + " has " + std::to_string(j.size()) + " dimensions (at most " +
           std::to_string(Shape::kMaxDims) + " are supported)";
  });
  Shape shape;
  for (const Json& d : j) {
    uint64_t v = 0;
    check(json_uint(d, &v) && v <= uint64_t(INT64_MAX), bad);
    shape.push_back(int64_t(v));
  }
  return shape;
}

// Bytes a tensor of `shape` and `dtype` needs. Error if the bytes of the non-zero dimensions
// overflow: a zero dimension makes the tensor empty, but strides and partial products are still
// computed from the other dimensions, so they must fit too.
uint64_t shape_bytes(const Shape& shape, DType dtype, const std::string& where) {
  int64_t bytes = int64_t(dtype_size(dtype));
  bool empty = false;
  for (int64_t d : shape) {
    empty |= d == 0;
    check(!__builtin_mul_overflow(bytes, d == 0 ? 1 : d, &bytes),
          where + " shape " + shape_string(shape) + " is too large");
  }
  return empty ? 0 : uint64_t(bytes);
}

SafetensorsEntry parse_entry(const std::string& name, const Json& j, uint64_t data_size,
                             const std::string& origin) {
  const std::string where = origin + ": tensor '" + name + "'";
  check(j.is_object(), where + " is not a JSON object");
  check(j.contains("dtype") && j["dtype"].is_string(), where + " has no string field 'dtype'");
  check(j.contains("shape"), where + " has no field 'shape'");
  check(j.contains("data_offsets"), where + " has no field 'data_offsets'");
  SafetensorsEntry e;
  e.name = name;
  const std::string tag = j["dtype"].get<std::string>();
  check(dtype_from_safetensors(tag, &e.dtype),
        origin + ": unknown dtype '" + tag + "' for tensor '" + name + "'");
  e.shape = parse_shape(j["shape"], where);

  const Json& off = j["data_offsets"];
  uint64_t begin = 0, end = 0;
  check(off.is_array() && off.size() == 2 && json_uint(off[0], &begin) && json_uint(off[1], &end) &&
            begin <= end,
        where + " has invalid data_offsets " + off.dump() + " (need [begin, end], begin <= end)");
  const std::string range = "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  check(end <= data_size, where + " data_offsets " + range + " run past the data section (" +
                              std::to_string(data_size) + " bytes)");
  const uint64_t need = shape_bytes(e.shape, e.dtype, where);
  check(end - begin == need, where + " data_offsets " + range + " need " + std::to_string(need) +
                                 " bytes for " + dtype_name(e.dtype) + shape_string(e.shape));
  e.nbytes = size_t(need);
  e.offset = size_t(begin);  // made absolute by the caller
  return e;
}

}  // namespace

SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& origin) {
  check(size >= 8, origin + ": truncated file: " + std::to_string(size) +
                       " bytes, too short for the 8-byte header length");
  const uint64_t header_len = read_le64(data);
  check(header_len <= size - 8, origin + ": truncated file: header says " +
                                    std::to_string(header_len) + " bytes but file has " +
                                    std::to_string(size));
  const std::string text(reinterpret_cast<const char*>(data + 8), size_t(header_len));
  const Json root = parse_json(text, origin + ": safetensors header");
  check(root.is_object(), origin + ": safetensors header is not a JSON object");

  SafetensorsHeader h;
  h.data_start = 8 + size_t(header_len);
  const uint64_t data_size = size - h.data_start;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      check(it.value().is_object(), origin + ": __metadata__ is not a JSON object");
      h.metadata = it.value();
      continue;
    }
    SafetensorsEntry e = parse_entry(it.key(), it.value(), data_size, origin);
    e.offset += h.data_start;
    h.tensors.push_back(std::move(e));
  }
  // nlohmann's object iterates keys in sorted order, so the list is already sorted by name.
  return h;
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<MappedFile> map) : map_(std::move(map)) {
  header_ = parse_safetensors(map_->data(), map_->size(), map_->path());
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  return std::shared_ptr<SafetensorsFile>(new SafetensorsFile(std::make_unique<MappedFile>(path)));
}

Tensor SafetensorsFile::tensor(const SafetensorsEntry& e) const {
  const uint8_t* p = map_->data() + e.offset;
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(e.dtype) != 0) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    std::memcpy(t.raw(), p, e.nbytes);
    return t;
  }
  // The map is read-only; Tensor's pointer is non-const only because Tensor serves owned memory
  // too. Writing through a checkpoint tensor faults, by design.
  return Tensor::borrow(const_cast<uint8_t*>(p), e.shape, e.dtype,
                        std::const_pointer_cast<SafetensorsFile>(shared_from_this()));
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry* e = header_.find(name);
  check(e != nullptr, path() + ": missing tensor '" + name + "'");
  return tensor(*e);
}

}  // namespace kvlm
