// The int8 path's activation quantizer, its portable reference kernel and the dispatch.
#include "kvlm/backend/cpu/linear_int8.h"

#include <algorithm>
#include <cmath>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/quant/affine.h"

namespace kvlm::cpu {

Int8Acts quantize_int8_acts(const float* x, int64_t T, int64_t in, int group_size, int bits) {
  Int8Acts a;
  const int64_t chunk = int8_chunk(bits);
  const int lane_shift = bits == 4 ? 3 : 2;  // log2 of the codes per lane
  const int32_t m = 1 << (bits - 1);
  a.stride = (in + kInt8Block - 1) / kInt8Block * kInt8Block;
  a.lanes = (in + chunk - 1) / chunk * kDotLanes;
  a.groups = in / group_size;
  a.groups_pad = (a.groups + kDotLanes - 1) / kDotLanes * kDotLanes;
  a.q.assign(size_t(T * a.stride), 0);
  a.d.assign(size_t(T * a.lanes), 0.0f);
  a.base.assign(size_t(T * a.lanes), 0);
  a.sx.assign(size_t(T * a.groups_pad), 0.0f);
  // Token rows are independent: they are quantized in parallel (a prefill chunk has hundreds).
  ops::thread_pool().parallel_for(size_t(T), 16, [&](size_t t_begin, size_t t_end) {
    // Local copies: the int8 stores below may alias anything, so captured values would be
    // reloaded from memory on every code.
    const int code_bits = bits, shift = lane_shift;
    const int32_t mid = m;
    const int64_t per_lane = int64_t(1) << shift, G = group_size, groups = a.groups;
    for (int64_t t = int64_t(t_begin); t < int64_t(t_end); ++t) {
      const float* xt = x + t * in;
      int8_t* q = a.q.data() + t * a.stride;
      // sx_g in index order within each group; looping over the groups innermost lets their
      // dependency chains overlap (one group after another waited on every add).
      float* sx = a.sx.data() + t * a.groups_pad;
      int32_t* base = a.base.data() + t * a.lanes;
      float* d = a.d.data() + t * a.lanes;
      for (int64_t k = 0; k < G; ++k)
        for (int64_t g = 0; g < groups; ++g) sx[g] += xt[g * G + k];
      for (int64_t g = 0; g < groups; ++g) {
        const Int8Scale sc = int8_group_scale(xt + g * G, G);
        if (sc.d == 0.0f) continue;  // codes, d and base stay 0
        // Lane by lane: each lane's codes summed in a register, its base written once.
        for (int64_t i = g * G; i < (g + 1) * G; i += per_lane) {
          int32_t sum = 0;
          for (int64_t c = i; c < i + per_lane; ++c) {
            const int8_t v = round_to_int8(xt[c] * sc.inv);
            q[int8_act_index(c, code_bits)] = v;
            sum += v;
          }
          base[i >> shift] = -mid * sum;
          d[i >> shift] = sc.d;
        }
      }
    }
  });
  return a;
}

void int8_center_biases(const float* s, float* b, int64_t groups, int bits) {
  const float m = float(1 << (bits - 1));
  for (int64_t g = 0; g < groups; ++g) b[g] += s[g] * m;
}

void int8_lane_groups(int group_size, int bits, int32_t (&out)[16]) {
  const int64_t lane_codes = int8_chunk(bits) / kDotLanes;
  for (int64_t k = 0; k < kDotLanes; ++k) out[k] = int32_t(k * lane_codes / group_size);
}

bool uses_int8(const ops::Weight& w) {
  return w.matmul == ops::MatmulPath::kInt8 && w.quant && (w.quant->bits == 4 || w.quant->bits == 8);
}

void linear_int8_portable(const LinearRows& job, const Int8Acts& acts) {
  const ops::Weight& w = *job.w;
  const int bits = w.quant->bits;
  const int64_t in = w.in_features, G = w.quant->group_size, groups = acts.groups;
  const int64_t chunk = int8_chunk(bits), lane_codes = chunk / kDotLanes;
  const int64_t words = affine_packed_words(in, bits);
  const int32_t m = 1 << (bits - 1);
  // Scales zero-padded past the last group, for the lanes past the row's end.
  std::vector<float> s(size_t(acts.lanes), 0.0f), b(size_t(acts.groups_pad), 0.0f);
  for (int64_t r = 0; r < job.R; ++r) {
    const int64_t row = job.r0 + r;
    const uint32_t* packed = w.weight.data<uint32_t>() + row * words;
    widen(w.scales, row * groups, groups, s.data());
    widen(w.biases, row * groups, groups, b.data());
    int8_center_biases(s.data(), b.data(), groups, bits);
    for (int64_t t = 0; t < job.T; ++t) {
      const int8_t* q = acts.q.data() + t * acts.stride;
      float F[kDotLanes] = {};
      const float* sx = acts.sx.data() + t * acts.groups_pad;
      for (int64_t g = 0; g < acts.groups_pad; g += kDotLanes) fma_lanes(b.data() + g, sx + g, F);
      for (int64_t lane = 0; lane < acts.lanes; ++lane) {
        int32_t P = 0;
        const int64_t i0 = lane * lane_codes;
        for (int64_t i = i0; i < std::min(i0 + lane_codes, in); ++i)
          P += (int32_t(affine_code(packed, i, bits)) - m) * int32_t(q[int8_act_index(i, bits)]);
        const float u = s[size_t(i0 / G)] * acts.d[size_t(t * acts.lanes + lane)];
        F[lane % kDotLanes] = std::fma(u, float(P), F[lane % kDotLanes]);
      }
      job.y[t * job.ldy + r] = fold_lanes(F);
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

LinearKernel::LinearKernel(Isa isa, const ops::Weight& w, const float* x, int64_t T,
                           std::span<const LinearKernel> same_input) {
  if (!uses_int8(w)) {
    exact_ = linear_rows_kernel(isa);
    return;
  }
  int8_ = linear_int8_kernel(isa);
  group_size_ = w.quant->group_size;
  bits_ = w.quant->bits;
  for (const LinearKernel& k : same_input)
    if (k.acts_ && k.group_size_ == group_size_ && k.bits_ == bits_) {
      acts_ = k.acts_;
      return;
    }
  acts_ = std::make_shared<const Int8Acts>(quantize_int8_acts(x, T, w.in_features, group_size_, bits_));
}

void LinearKernel::operator()(const LinearRows& job) const {
  if (int8_) int8_(job, *acts_);
  else exact_(job);
}

}  // namespace kvlm::cpu
