#pragma once
// Tensor: a typed, shaped, strided view of a storage on a device. Storage is either owned (an
// aligned allocation) or borrowed (for instance a slice of an mmapped checkpoint kept alive by a
// shared owner). Model code passes Tensors to backend ops and never dereferences their memory
// directly, so the same model code can run on a device whose memory the host cannot read.
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kvlm/tensor/dtype.h"

namespace kvlm {

enum class Device : uint8_t { kCPU, kCUDA };
const char* device_name(Device d);

// A tensor's dimensions, or its strides: up to kMaxDims values held inline, so that making,
// copying and slicing a tensor allocates nothing for them (a decode step of the 0.5B shape makes
// and copies tensors about a thousand times). The interface is std::vector's, as far as used.
class Shape {
 public:
  static constexpr size_t kMaxDims = 8;
  using value_type = int64_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : Shape(dims.begin(), dims.end()) {}
  explicit Shape(size_t n);  // n zeros
  template <class It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t& back() { return dims_[n_ - 1]; }
  int64_t back() const { return dims_[n_ - 1]; }
  iterator begin() { return dims_.data(); }
  iterator end() { return dims_.data() + n_; }
  const_iterator begin() const { return dims_.data(); }
  const_iterator end() const { return dims_.data() + n_; }

  // Error past kMaxDims.
  void push_back(int64_t d);
  // Removes the value at `at`; returns the position after it.
  iterator erase(const_iterator at);

  friend bool operator==(const Shape& a, const Shape& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::array<int64_t, kMaxDims> dims_{};
  size_t n_ = 0;
};

std::string shape_string(const Shape& s);  // "[2, 3]"
int64_t shape_numel(const Shape& s);

// A block of device memory. `keep_alive` holds whatever owns borrowed memory.
struct Storage {
  Device device = Device::kCPU;
  void* data = nullptr;
  size_t bytes = 0;
  std::shared_ptr<void> keep_alive;
};

class Tensor {
 public:
  Tensor() = default;

  // A new zero-filled, contiguous tensor on `device` (64-byte aligned on the CPU).
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::kCPU);
  // A new uninitialised contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::kCPU);
  // A new uninitialised CPU tensor that lives as long as a model and is streamed every step
  // (weight copies, the KV pool): on huge pages (base/host_memory.h), small ones sharing slabs of
  // them. Activations stay on small pages (their recycled buffers cost nothing to fault).
  static Tensor empty_streamed(const Shape& shape, DType dtype);
  // A contiguous view of borrowed CPU memory; `owner` keeps it alive.
  static Tensor borrow(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner);
  // Copies host f32 values into a new f32 CPU tensor.
  static Tensor from_f32(const std::vector<float>& values, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : Device::kCPU; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int ndim() const { return int(shape_.size()); }
  int64_t dim(int i) const { return shape_[size_t(i < 0 ? i + ndim() : i)]; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;

  // Views sharing storage.
  Tensor reshape(const Shape& shape) const;            // requires contiguity
  Tensor slice(int dim, int64_t begin, int64_t end) const;  // [begin, end) along dim
  Tensor select(int64_t index) const;                  // index along dim 0, drops it

  // Raw pointer to element 0. Only backends and host-side code for CPU tensors may use it.
  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(storage_->data) +
                                offset_ * int64_t(dtype_size(dtype_)));
  }
  void* raw() const { return data<uint8_t>(); }

  // Host copy of the values widened to f32 (any float dtype, any device the build supports).
  std::vector<float> to_f32_vector() const;
  std::string describe() const;  // "bf16[896, 4864] cpu"

 private:
  // A new contiguous CPU tensor, its buffer recycled (activations) or streamed (weight copies).
  static Tensor allocated(const Shape& shape, DType dtype, bool streamed);

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::kF32;
  Shape shape_, strides_;
  int64_t offset_ = 0;  // in elements
};

Shape contiguous_strides(const Shape& shape);

}  // namespace kvlm
