#include "kvlm/tensor/tensor.h"

#include <cstdlib>
#include <cstring>

#include "kvlm/base/error.h"
#include "kvlm/base/half.h"

namespace kvlm {

const char* device_name(Device d) { return d == Device::kCPU ? "cpu" : "cuda"; }

std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= shape[i];
  }
  return st;
}

namespace {

std::shared_ptr<Storage> allocate_cpu(size_t bytes) {
  auto s = std::make_shared<Storage>();
  s->device = Device::kCPU;
  s->bytes = bytes;
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
  s->data = p;
  s->keep_alive = std::shared_ptr<void>(p, std::free);
  return s;
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check(device == Device::kCPU, std::string("device ") + device_name(device) + " is not built in");
  for (int64_t d : shape) check(d >= 0, "negative dimension in shape " + shape_string(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.storage_ = allocate_cpu(size_t(shape_numel(shape)) * dtype_size(dtype));
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  std::memset(t.storage_->data, 0, t.storage_->bytes);
  return t;
}

Tensor Tensor::borrow(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.storage_ = std::make_shared<Storage>();
  t.storage_->data = data;
  t.storage_->bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  t.storage_->keep_alive = std::move(owner);
  return t;
}

Tensor Tensor::from_f32(const std::vector<float>& values, const Shape& shape) {
  check(int64_t(values.size()) == shape_numel(shape),
        "from_f32: " + std::to_string(values.size()) + " values for shape " + shape_string(shape));
  Tensor t = empty(shape, DType::kF32);
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Tensor Tensor::reshape(const Shape& shape) const {
  check(is_contiguous(), "reshape of a non-contiguous tensor " + describe());
  check(shape_numel(shape) == numel(),
        "reshape " + describe() + " to " + shape_string(shape) + ": element count differs");
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::slice(int d, int64_t begin, int64_t end) const {
  if (d < 0) d += ndim();
  check(d >= 0 && d < ndim() && begin >= 0 && begin <= end && end <= shape_[size_t(d)],
        "slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") of dim " +
            std::to_string(d) + " out of range for " + describe());
  Tensor t = *this;
  t.offset_ += begin * strides_[size_t(d)];
  t.shape_[size_t(d)] = end - begin;
  return t;
}

Tensor Tensor::select(int64_t index) const {
  Tensor t = slice(0, index, index + 1);
  t.shape_.erase(t.shape_.begin());
  t.strides_.erase(t.strides_.begin());
  return t;
}

std::vector<float> Tensor::to_f32_vector() const {
  check(device() == Device::kCPU, "to_f32_vector: only CPU tensors are readable on the host");
  check(dtype_traits(dtype_).is_float, std::string("to_f32_vector of ") + dtype_name(dtype_));
  std::vector<float> out(static_cast<size_t>(numel()));
  std::vector<int64_t> idx(shape_.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * strides_[k];
    switch (dtype_) {
      case DType::kF32: out[i] = data<float>()[off]; break;
      case DType::kF16: out[i] = f16_to_f32(data<uint16_t>()[off]); break;
      default: out[i] = bf16_to_f32(data<uint16_t>()[off]); break;
    }
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < shape_[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_string(shape_) + " " + device_name(device());
}

}  // namespace kvlm
