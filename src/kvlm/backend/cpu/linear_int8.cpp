// The int8 path's activation quantizer, its portable reference kernel and the dispatch.
#include "kvlm/backend/cpu/linear_int8.h"

#include <algorithm>
#include <cmath>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/quant/affine.h"

namespace kvlm::cpu {

namespace {

// Rounds v (|v| <= 127.5) to the nearest integer, ties to even: adding and subtracting 1.5 * 2^23
// leaves no fraction bits, and the add rounds to nearest even. Plain float adds, so it costs no
// library call and vectorizes.
inline int8_t round_to_int8(float v) {
  constexpr float kMagic = 12582912.0f;
  return int8_t(int32_t((v + kMagic) - kMagic));
}

// t_g summed in dot.h's 16-lane order: the definition every ISA's combine reproduces.
float combine_portable(const int32_t* idot, const float* s, const float* b, const float* d,
                       const float* sx, int64_t groups_pad) {
  float acc[kDotLanes] = {};
  for (int64_t g = 0; g < groups_pad; g += kDotLanes)
    for (int64_t k = 0; k < kDotLanes; ++k)
      acc[k] += std::fma(s[g + k] * d[g + k], float(idot[g + k]), b[g + k] * sx[g + k]);
  return fold_lanes(acc);
}

}  // namespace

Int8Acts quantize_int8_acts(const float* x, int64_t T, int64_t in, int group_size, int bits) {
  Int8Acts a;
  a.stride = (in + kInt8Chunk - 1) / kInt8Chunk * kInt8Chunk;
  a.groups = in / group_size;
  a.groups_pad = (a.groups + kDotLanes - 1) / kDotLanes * kDotLanes;
  a.q.assign(size_t(T * a.stride), 0);
  a.d.assign(size_t(T * a.groups_pad), 0.0f);
  a.sx.assign(size_t(T * a.groups_pad), 0.0f);
  a.qsum.assign(size_t(T * a.groups_pad), 0);
  for (int64_t t = 0; t < T; ++t) {
    int8_t* q = a.q.data() + t * a.stride;
    for (int64_t g = 0; g < a.groups; ++g) {
      const float* xg = x + t * in + g * group_size;
      float amax = 0.0f, sum = 0.0f;
      for (int64_t k = 0; k < group_size; ++k) {
        amax = std::max(amax, std::fabs(xg[k]));
        sum += xg[k];
      }
      a.sx[size_t(t * a.groups_pad + g)] = sum;
      if (amax == 0.0f) continue;  // d_g = 0 and xq = 0 already
      a.d[size_t(t * a.groups_pad + g)] = amax / 127.0f;
      const float inv = 127.0f / amax;
      int32_t qsum = 0;
      for (int64_t k = 0; k < group_size; ++k) {
        const int8_t v = round_to_int8(xg[k] * inv);
        q[int8_act_index(g * group_size + k, bits)] = v;
        qsum += v;
      }
      a.qsum[size_t(t * a.groups_pad + g)] = qsum;
    }
  }
  return a;
}

void int8_center_biases(const float* s, float* b, int64_t groups, int bits) {
  const float m = float(1 << (bits - 1));
  for (int64_t g = 0; g < groups; ++g) b[g] += s[g] * m;
}

bool uses_int8(const ops::Weight& w) {
  return w.matmul == ops::MatmulPath::kInt8 && w.quant && (w.quant->bits == 4 || w.quant->bits == 8);
}

void linear_int8_portable(const LinearRows& job, const Int8Acts& acts) {
  const ops::Weight& w = *job.w;
  const int64_t in = w.in_features, G = w.quant->group_size, bits = w.quant->bits;
  const int64_t words = affine_packed_words(in, int(bits));
  const int32_t m = 1 << (bits - 1);
  std::vector<float> s(size_t(acts.groups_pad), 0.0f), b(size_t(acts.groups_pad), 0.0f);
  std::vector<int32_t> idot(size_t(acts.groups_pad), 0);
  for (int64_t r = 0; r < job.R; ++r) {
    const int64_t row = job.r0 + r;
    const uint32_t* packed = w.weight.data<uint32_t>() + row * words;
    widen(w.scales, row * acts.groups, acts.groups, s.data());
    widen(w.biases, row * acts.groups, acts.groups, b.data());
    int8_center_biases(s.data(), b.data(), acts.groups, int(bits));
    for (int64_t t = 0; t < job.T; ++t) {
      const int8_t* q = acts.q.data() + t * acts.stride;
      for (int64_t g = 0; g < acts.groups; ++g) {
        int32_t sum = 0;
        for (int64_t i = g * G; i < (g + 1) * G; ++i)
          sum += int32_t(q[int8_act_index(i, int(bits))]) * (int32_t(affine_code(packed, i, int(bits))) - m);
        idot[size_t(g)] = sum;
      }
      const float* d = acts.d.data() + t * acts.groups_pad;
      const float* sx = acts.sx.data() + t * acts.groups_pad;
      job.y[t * job.ldy + r] = combine_portable(idot.data(), s.data(), b.data(), d, sx, acts.groups_pad);
    }
  }
}

LinearInt8Fn linear_int8_kernel(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      // The AVX-512 int8 kernel needs VNNI; without it the AVX2 kernel computes the same bits.
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512vnni") ? linear_int8_avx512 : linear_int8_avx2;
    case Isa::kAvx2: return linear_int8_avx2;
    case Isa::kPortable: break;
  }
  return linear_int8_portable;
}

LinearKernel::LinearKernel(Isa isa, const ops::Weight& w, const float* x, int64_t T) {
  if (!uses_int8(w)) {
    exact_ = linear_rows_kernel(isa);
    return;
  }
  int8_ = linear_int8_kernel(isa);
  acts_ = quantize_int8_acts(x, T, w.in_features, w.quant->group_size, w.quant->bits);
}

void LinearKernel::operator()(const LinearRows& job) const {
  if (int8_) int8_(job, acts_);
  else exact_(job);
}

}  // namespace kvlm::cpu
