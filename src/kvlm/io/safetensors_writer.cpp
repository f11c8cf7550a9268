#include "kvlm/io/safetensors_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "kvlm/base/error.h"
#include "kvlm/base/file.h"

namespace kvlm {

namespace {

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xff);
  return s;
}

// Appends the bytes of `t` in row-major order, whatever its strides.
void append_tensor_bytes(const Tensor& t, std::string* out) {
  const size_t es = dtype_size(t.dtype());
  if (t.is_contiguous()) {
    out->append(static_cast<const char*>(t.raw()), t.nbytes());
    return;
  }
  std::vector<int64_t> idx(size_t(t.ndim()), 0);
  const char* base = static_cast<const char*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * t.strides()[k];
    out->append(base + off * int64_t(es), es);
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < t.shape()[k]) break;
      idx[k] = 0;
    }
  }
}

}  // namespace

std::string safetensors_image(const std::string& header_json, const std::string& data) {
  return le64(header_json.size()) + header_json + data;
}

SafetensorsWriter::SafetensorsWriter(std::string format) { metadata_["format"] = std::move(format); }

void SafetensorsWriter::add(const std::string& name, const Tensor& t) {
  check(t.defined() && t.device() == Device::kCPU,
        "safetensors writer: tensor '" + name + "' is not a CPU tensor");
  check(name != "__metadata__", "safetensors writer: '__metadata__' is not a tensor name");
  check(entries_.emplace(name, Entry{t.dtype(), t.shape(), t, {}}).second,
        "safetensors writer: duplicate tensor '" + name + "'");
}

void SafetensorsWriter::add_bytes(const std::string& name, DType dtype, const Shape& shape,
                                  std::string bytes) {
  check(bytes.size() == size_t(shape_numel(shape)) * dtype_size(dtype),
        "safetensors writer: tensor '" + name + "' has " + std::to_string(bytes.size()) +
            " bytes for " + dtype_name(dtype) + shape_string(shape));
  check(name != "__metadata__", "safetensors writer: '__metadata__' is not a tensor name");
  check(entries_.emplace(name, Entry{dtype, shape, Tensor(), std::move(bytes)}).second,
        "safetensors writer: duplicate tensor '" + name + "'");
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

size_t SafetensorsWriter::data_bytes() const {
  size_t n = 0;
  for (const auto& [name, e] : entries_) n += size_t(shape_numel(e.shape)) * dtype_size(e.dtype);
  return n;
}

std::vector<std::string> SafetensorsWriter::ordered_names() const {
  std::vector<std::string> names;
  for (const auto& [name, e] : entries_) names.push_back(name);
  // Largest element size first keeps every tensor aligned to its element size.
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return dtype_size(entries_.at(a).dtype) > dtype_size(entries_.at(b).dtype);
  });
  return names;
}

std::string SafetensorsWriter::header_bytes(const std::vector<std::string>& order) const {
  Json header = Json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const std::string& name : order) {
    const Entry& e = entries_.at(name);
    const uint64_t n = uint64_t(shape_numel(e.shape)) * dtype_size(e.dtype);
    header[name] = {{"dtype", dtype_traits(e.dtype).safetensors_tag},
                    {"shape", e.shape},
                    {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  return le64(text.size()) + text;
}

std::string SafetensorsWriter::serialize() const {
  const auto order = ordered_names();
  std::string out = header_bytes(order);
  out.reserve(out.size() + data_bytes());
  for (const std::string& name : order) {
    const Entry& e = entries_.at(name);
    if (e.tensor.defined())
      append_tensor_bytes(e.tensor, &out);
    else
      out += e.bytes;
  }
  return out;
}

void SafetensorsWriter::write(const std::string& path) const {
  // Stream tensor by tensor so a large checkpoint is never held twice in memory.
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  check(bool(f), path + ": cannot create file");
  const auto order = ordered_names();
  const std::string head = header_bytes(order);
  f.write(head.data(), std::streamsize(head.size()));
  std::string buf;
  for (const std::string& name : order) {
    const Entry& e = entries_.at(name);
    if (e.tensor.defined() && e.tensor.is_contiguous()) {
      f.write(static_cast<const char*>(e.tensor.raw()), std::streamsize(e.tensor.nbytes()));
    } else if (e.tensor.defined()) {
      buf.clear();
      append_tensor_bytes(e.tensor, &buf);
      f.write(buf.data(), std::streamsize(buf.size()));
    } else {
      f.write(e.bytes.data(), std::streamsize(e.bytes.size()));
    }
  }
  f.flush();
  check(bool(f), path + ": write failed (disk full?)");
}

}  // namespace kvlm
