#include "kvlm/tensor/tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "kvlm/base/error.h"
#include "kvlm/base/half.h"
#include "kvlm/base/host_memory.h"

namespace kvlm {

const char* device_name(Device d) { return d == Device::kCPU ? "cpu" : "cuda"; }

Shape::Shape(size_t n) {
  check(n <= kMaxDims, [&] { return "a shape of " + std::to_string(n) + " dimensions (at most " +
                                    std::to_string(kMaxDims) + " are supported)"; });
  n_ = n;
}

void Shape::push_back(int64_t d) {
  check(n_ < kMaxDims, [&] { return "a shape of more than " + std::to_string(kMaxDims) + " dimensions"; });
  dims_[n_++] = d;
}

Shape::iterator Shape::erase(const_iterator at) {
  const auto i = size_t(at - begin());
  std::copy(begin() + i + 1, end(), begin() + i);
  --n_;
  return begin() + i;
}

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

// Freed host buffers kept for the next allocation of the same size. A forward pass allocates the
// same activation shapes layer after layer, and glibc serves allocations this large with a fresh
// mmap whose pages all fault on first touch: in a 512-token prefill of the 0.5B shape that was
// half the time of the SiLU op and 14% of the whole prefill. At most kMaxBytes are kept; the
// oldest buffers are returned to the system first.
class BufferCache {
 public:
  static constexpr size_t kMinBytes = 64 * 1024;          // smaller ones come from the heap anyway
  static constexpr size_t kMaxBytes = 256 * 1024 * 1024;

  void* take(size_t bytes) {
    if (bytes < kMinBytes) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = buffers_.size(); i-- > 0;)
      if (buffers_[i].bytes == bytes) {
        void* p = buffers_[i].data;
        buffers_.erase(buffers_.begin() + long(i));
        cached_ -= bytes;
        return p;
      }
    return nullptr;
  }

  void give(void* p, size_t bytes) {
    if (bytes < kMinBytes || bytes > kMaxBytes) return std::free(p);
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.push_back({p, bytes});
    cached_ += bytes;
    while (cached_ > kMaxBytes) {
      std::free(buffers_.front().data);
      cached_ -= buffers_.front().bytes;
      buffers_.erase(buffers_.begin());
    }
  }

 private:
  struct Buffer {
    void* data;
    size_t bytes;
  };
  std::mutex mu_;
  std::vector<Buffer> buffers_;  // oldest first
  size_t cached_ = 0;
};

// Never destroyed: tensors held by other statics may be freed after it would be.
BufferCache& buffer_cache() {
  static BufferCache* cache = new BufferCache;
  return *cache;
}

std::shared_ptr<Storage> storage(void* data, size_t bytes, std::shared_ptr<void> keep_alive) {
  if (!data) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
  auto s = std::make_shared<Storage>();
  s->device = Device::kCPU;
  s->data = data;
  s->bytes = bytes;
  s->keep_alive = std::move(keep_alive);
  return s;
}

size_t cache_lines(size_t bytes) { return bytes ? (bytes + 63) / 64 * 64 : 64; }

std::shared_ptr<Storage> allocate_cpu(size_t bytes) {
  const size_t rounded = cache_lines(bytes);
  void* p = buffer_cache().take(rounded);
  if (!p) p = allocate_host(rounded, false);
  return storage(p, bytes, std::shared_ptr<void>(p, [rounded](void* q) { buffer_cache().give(q, rounded); }));
}

// Streamed buffers are packed one after another into slabs of huge pages, so that every byte of
// them streams without a page walk every 4 KB, and the hardware prefetcher, which stops at page
// boundaries, runs on. A buffer on huge pages of its own would leave the tail beyond its last
// whole 2 MB on small pages: 0.4 of every 2.4 MB MLP weight of the 0.5B shape in 4-bit, 13% of the
// bytes decode reads. A slab is at least kSlabBytes, or the buffer rounded up to whole huge
// pages, and the next buffers go into its rest while it has room and is alive; a slab lives while
// any of its buffers does. Untouched parts of a slab are never made resident.
class StreamedSlabs {
 public:
  static constexpr size_t kSlabBytes = size_t(16) << 20;

  std::shared_ptr<Storage> take(size_t bytes) {
    const size_t rounded = cache_lines(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<void> slab = current_.lock();
    if (!slab || used_ + rounded > size_) {
      const size_t size = std::max(kSlabBytes, (rounded + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
      void* base = allocate_host(size, true);
      if (!base) return storage(nullptr, bytes, nullptr);
      slab = std::shared_ptr<void>(base, std::free);
      current_ = slab;
      size_ = size;
      used_ = 0;
    }
    void* p = static_cast<uint8_t*>(slab.get()) + used_;
    used_ += rounded;
    return storage(p, bytes, std::shared_ptr<void>(slab, p));
  }

 private:
  std::mutex mu_;
  std::weak_ptr<void> current_;
  size_t size_ = 0, used_ = 0;
};

std::shared_ptr<Storage> allocate_streamed(size_t bytes) {
  static StreamedSlabs* slabs = new StreamedSlabs;  // never destroyed, like the buffer cache
  return slabs->take(bytes);
}

}  // namespace

Tensor Tensor::allocated(const Shape& shape, DType dtype, bool streamed) {
  for (int64_t d : shape) check(d >= 0, [&] { return "negative dimension in shape " + shape_string(shape); });
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  const size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  t.storage_ = streamed ? allocate_streamed(bytes) : allocate_cpu(bytes);
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check(device == Device::kCPU, [&] { return std::string("device ") + device_name(device) + " is not built in"; });
  return allocated(shape, dtype, false);
}

Tensor Tensor::empty_streamed(const Shape& shape, DType dtype) { return allocated(shape, dtype, true); }

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
        [&] { return "from_f32: " + std::to_string(values.size()) + " values for shape " + shape_string(shape); });
  Tensor t = empty(shape, DType::kF32);
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

// Compares in place: every op checks its operands, and a Shape built for the comparison was a
// heap allocation per check (over 600 per decode step of the 0.5B shape).
bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

Tensor Tensor::reshape(const Shape& shape) const {
  check(is_contiguous(), [&] { return "reshape of a non-contiguous tensor " + describe(); });
  check(shape_numel(shape) == numel(),
        [&] { return "reshape " + describe() + " to " + shape_string(shape) + ": element count differs"; });
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::slice(int d, int64_t begin, int64_t end) const {
  if (d < 0) d += ndim();
  check(d >= 0 && d < ndim() && begin >= 0 && begin <= end && end <= shape_[size_t(d)],
        [&] { return "slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") of dim " +
            std::to_string(d) + " out of range for " + describe(); });
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
  check(dtype_traits(dtype_).is_float, [&] { return std::string("to_f32_vector of ") + dtype_name(dtype_); });
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
