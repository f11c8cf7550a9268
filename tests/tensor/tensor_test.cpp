// Host storage: tensors freed during a forward pass are reused by the next allocation of the same
// size, and reuse never leaks old contents into zeros().
#include "kvlm/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cstring>

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

TEST(TensorStorage, NegativeDimensionIsRefused) {
  try {
    Tensor::empty({2, -1}, DType::kF32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "negative dimension in shape [2, -1]");
  }
}

}  // namespace
}  // namespace kvlm
