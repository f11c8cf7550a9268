// Host storage: tensors freed during a forward pass are reused by the next allocation of the same
// size, reuse never leaks old contents into zeros(), and streamed tensors (weight copies, the KV
// pool) are packed into huge-page slabs of their own.
#include "kvlm/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kvlm/base/error.h"

namespace kvlm {
namespace {

TEST(TensorStorage, FreedLargeBufferIsReusedBySameSize) {
  const void* first = nullptr;
  {
    const Tensor a = Tensor::empty({1024, 256}, DType::kF32);  // 1 MB
    first = a.raw();
  }
  const Tensor b = Tensor::empty({256, 1024}, DType::kF32);  // same bytes, another shape
  EXPECT_EQ(b.raw(), first);
  const Tensor c = Tensor::empty({1024, 256}, DType::kF32);  // the cached one is taken
  EXPECT_NE(c.raw(), first);
}

TEST(TensorStorage, ZerosAreZeroOnAReusedBuffer) {
  {
    Tensor a = Tensor::empty({512, 512}, DType::kF32);
    std::memset(a.raw(), 0xff, a.nbytes());
  }
  const Tensor z = Tensor::zeros({512, 512}, DType::kF32);
  const auto* p = static_cast<const unsigned char*>(z.raw());
  size_t nonzero = 0;
  for (size_t i = 0; i < z.nbytes(); ++i) nonzero += p[i] != 0;
  EXPECT_EQ(nonzero, 0u);
}

// Streamed tensors share slabs: each gets its own 64-byte aligned bytes, and a tensor keeps its
// slab (and contents) alive after the others of it are gone. One larger than a slab starts a slab
// of its own on a huge page, and the next tensor follows it there.
TEST(TensorStorage, StreamedTensorsAreAlignedDisjointAndOutliveTheirNeighbours) {
  std::vector<Tensor> small;
  for (int64_t n : {100, 4096, 300000, 7})
    small.push_back(Tensor::empty_streamed({n}, DType::kU8));
  for (size_t i = 0; i < small.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(small[i].raw()) % 64, 0u) << i;
    std::memset(small[i].raw(), int(i + 1), small[i].nbytes());
  }
  const Tensor last = small.back();
  small.pop_back();
  for (size_t i = 0; i < small.size(); ++i) {
    const auto* p = static_cast<const unsigned char*>(small[i].raw());
    for (size_t b = 0; b < small[i].nbytes(); ++b) ASSERT_EQ(p[b], i + 1) << i << " " << b;
  }
  small.clear();
  const auto* p = static_cast<const unsigned char*>(last.raw());
  for (size_t b = 0; b < last.nbytes(); ++b) EXPECT_EQ(p[b], 4) << b;
  const Tensor big = Tensor::empty_streamed({(20 << 20) + 1}, DType::kU8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.raw()) % (2 << 20), 0u);
  const Tensor next = Tensor::empty_streamed({1 << 20}, DType::kU8);  // fits in the rest
  EXPECT_EQ(static_cast<const uint8_t*>(next.raw()), static_cast<const uint8_t*>(big.raw()) + (20 << 20) + 64);
}

TEST(TensorStorage, NegativeDimensionIsRefused) {
  try {
    Tensor::empty({2, -1}, DType::kF32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "negative dimension in shape [2, -1]");
  }
}

// Shapes hold their dimensions inline: a shape past kMaxDims is refused by name, and slicing a
// leading dimension away (Tensor::select) keeps the others in order.
TEST(Shape, HoldsUpToEightDimensionsInline) {
  Shape s{1, 2, 3, 4, 5, 6, 7};
  s.push_back(8);
  EXPECT_EQ(s.size(), Shape::kMaxDims);
  EXPECT_EQ(shape_string(s), "[1, 2, 3, 4, 5, 6, 7, 8]");
  try {
    s.push_back(9);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "a shape of more than 8 dimensions");
  }
  s.erase(s.begin());
  EXPECT_EQ(s, (Shape{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_FALSE(s == (Shape{2, 3, 4, 5, 6, 7}));
  const Tensor t = Tensor::zeros({3, 4, 5}, DType::kF32);
  EXPECT_EQ(t.select(1).shape(), (Shape{4, 5}));
  EXPECT_EQ(t.select(1).strides(), (Shape{5, 1}));
}

}  // namespace
}  // namespace kvlm
