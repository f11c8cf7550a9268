#pragma once
// What the tests of the int8 path share: MLX affine weights on the int8 path, and the check that
// activations an op quantized for the layer after it are the ones that layer would make itself.
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>

#include "isa_test_util.h"
#include "kvlm/backend/cpu/linear_int8.h"
#include "kvlm/backend/ops.h"
#include "kvlm/quant/affine.h"

namespace kvlm::cpu {

struct QuantWeight {
  Tensor packed, scales, biases;
  ops::Weight w;
};

inline QuantWeight quantized(int64_t R, int64_t in, int bits, int group, DType params, uint32_t seed) {
  Tensor f = Tensor::empty({R, in}, DType::kF32);
  const auto v = normal(size_t(R * in), seed);
  std::memcpy(f.data<float>(), v.data(), v.size() * sizeof(float));
  const AffineWeight q = affine_quantize(f, AffineSpec{bits, group}, params);
  QuantWeight t{q.packed, q.scales, q.biases, {}};
  t.w = ops::affine_weight(t.packed, t.scales, t.biases, AffineSpec{bits, group});
  t.w.matmul = ops::MatmulPath::kInt8;
  t.w = ops::int8_weight(t.w);
  return t;
}

template <class T>
bool same_bytes(std::span<T> a, std::span<T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Every token's d, sx and base of every group in a and b, bit for bit (the unused lanes of a last
// token tile aside).
inline bool same_scalars(const Int8Acts& a, const Int8Acts& b) {
  if (a.q.size() != b.q.size() || a.in != b.in || a.groups != b.groups) return false;
  const auto same = [](auto x, auto y) { return std::memcmp(&x, &y, sizeof(x)) == 0; };
  for (int64_t t = 0; t < int64_t(a.q.size()) / a.in; ++t)
    for (int64_t g = 0; g < a.groups; ++g)
      if (!same(a.d(t, g), b.d(t, g)) || !same(a.sx(t, g), b.sx(t, g)) || !same(a.base(t, g), b.base(t, g)))
        return false;
  return true;
}

// Activations an op quantized for `w` are byte for byte those linear would quantize from its
// result h, and linear gives the same bits with them as without.
inline void expect_quantized_for(const Tensor& h, const ops::QuantizedInput& acts, const ops::Weight& w,
                                 const std::string& at) {
  ASSERT_TRUE(acts) << at;
  const int64_t T = h.dim(0);
  const Int8Acts want = quantize_int8_acts(cpu_isa(), h.data<float>(), T, h.dim(1), w.quant->group_size, w.quant->bits);
  EXPECT_TRUE(same_bytes(acts->q, want.q)) << at;
  EXPECT_TRUE(same_scalars(*acts, want)) << at;
  const Tensor with = ops::linear(h, w, acts), without = ops::linear(h, w);
  EXPECT_EQ(std::memcmp(with.data<float>(), without.data<float>(), size_t(T * w.out_features) * sizeof(float)), 0)
      << at;
}

}  // namespace kvlm::cpu
