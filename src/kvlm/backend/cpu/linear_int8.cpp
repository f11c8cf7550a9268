// The int8 path's activation quantizer, its portable reference kernel and the dispatch.
#include "kvlm/backend/cpu/linear_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/dot.h"
#include "kvlm/base/thread_pool.h"
#include "kvlm/quant/affine.h"
#include "kvlm/quant/kv_codec.h"

namespace kvlm::cpu {

void quantize_int8_row_portable(const float* x, int group_size, int bits, Int8Acts& a, int64_t t, int64_t g0,
                                int64_t g1) {
  const int64_t G = group_size;
  const int32_t mid = 1 << (bits - 1);
  int8_t* q = a.q.data() + t * a.in;
  for (int64_t g = g0; g < g1; ++g) {
    const float* xg = x + g * G;
    float lanes[kDotLanes];
    std::copy(xg, xg + kDotLanes, lanes);
    for (int64_t c = kDotLanes; c < G; c += kDotLanes)
      for (int64_t k = 0; k < kDotLanes; ++k) lanes[k] += xg[c + k];
    a.sx(t, g) = fold_lanes(lanes);
    const Int8Scale sc = int8_group_scale(xg, G);
    if (sc.d == 0.0f) {
      a.clear_group(t, g);
      continue;
    }
    int32_t sum = 0;
    for (int64_t i = 0; i < G; ++i) {
      const int8_t v = round_to_int8(xg[i] * sc.inv);
      q[int8_act_index(g * G + i, bits)] = v;
      sum += v;
    }
    a.base(t, g) = -mid * sum;
    a.d(t, g) = sc.d;
  }
}

Int8Acts::Int8Acts(int64_t T, int64_t width, int group_size, int code_bits)
    : in(width), groups(width / group_size), bits(code_bits) {
  // The codes first, then the scalars from the next cache line.
  const size_t codes = size_t(T * in), tiles = size_t((T + 7) / 8 * groups);
  const size_t codes_bytes = (codes + 63) / 64 * 64;
  storage_ = std::make_unique_for_overwrite<std::byte[]>(codes_bytes + tiles * sizeof(Int8TokenGroup));
  std::byte* p = storage_.get();
  q = {reinterpret_cast<int8_t*>(p), codes};
  scalars = {reinterpret_cast<Int8TokenGroup*>(p + codes_bytes), tiles};
}

Int8Acts quantize_int8_acts(Isa isa, const float* x, int64_t T, int64_t in, int group_size, int bits) {
  Int8Acts a(T, in, group_size, bits);
  const QuantizeInt8RowFn quantize = int8_kernels(isa).quantize;
  ops::thread_pool().parallel_for(size_t(T), 1, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) quantize(x + int64_t(t) * in, group_size, bits, a, int64_t(t), 0, a.groups);
  });
  return a;
}

Int8ActsWriter::Int8ActsWriter(const ops::Weight* next, int64_t T, int64_t width, int64_t part) {
  if (!next || !uses_int8(*next) || next->in_features != width || part % next->quant->group_size != 0) return;
  group_size_ = next->quant->group_size;
  acts_ = std::make_shared<Int8Acts>(T, width, group_size_, next->quant->bits);
  quantize_ = int8_kernels(cpu_isa()).quantize;
}

Tensor int8_tiles(const ops::Weight& w) {
  const int bits = w.quant->bits, G = w.quant->group_size;
  const int64_t rows = w.out_features, groups = w.in_features / G, words = G * bits / 32;
  const int64_t row_words = affine_packed_words(w.in_features, bits);
  const DType params = w.scales.dtype();
  const size_t esize = dtype_size(params);
  const int64_t group_bytes = int8_group_bytes(G, bits, params);
  const int64_t tiles = (rows + kInt8TileRows - 1) / kInt8TileRows;
  // Rows past the weight's end keep zero codes, scales and biases.
  Tensor out = Tensor::empty_streamed({tiles * groups * group_bytes}, DType::kU8);
  std::memset(out.raw(), 0, size_t(out.numel()));
  const auto* packed = w.weight.data<uint32_t>();
  const auto* scales = static_cast<const uint8_t*>(w.scales.raw());
  const auto* biases = static_cast<const uint8_t*>(w.biases.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  ops::thread_pool().parallel_for(size_t(tiles), 1, [&](size_t b, size_t e) {
    for (int64_t tile = int64_t(b); tile < int64_t(e); ++tile)
      for (int64_t g = 0; g < groups; ++g) {
        uint8_t* block = dst + (tile * groups + g) * group_bytes;
        auto* codes = reinterpret_cast<uint32_t*>(block);
        uint8_t* s = block + words * kInt8TileRows * 4;
        uint8_t* bi = s + kInt8TileRows * esize;
        for (int64_t k = 0; k < kInt8TileRows && tile * kInt8TileRows + k < rows; ++k) {
          const int64_t r = tile * kInt8TileRows + k;
          for (int64_t j = 0; j < words; ++j) codes[j * kInt8TileRows + k] = packed[r * row_words + g * words + j];
          const size_t at = size_t(r * groups + g) * esize;
          std::memcpy(s + k * esize, scales + at, esize);
          std::memcpy(bi + k * esize, biases + at, esize);
        }
      }
  });
  return out;
}

bool uses_int8(const ops::Weight& w) {
  return w.matmul == ops::MatmulPath::kInt8 && w.int8_tiles.defined();
}

void linear_int8_portable(const LinearRows& job, const Int8Acts& acts) {
  const ops::Weight& w = *job.w;
  const int bits = w.quant->bits, G = w.quant->group_size;
  const int64_t groups = acts.groups, words = G * bits / 32, codes_per_word = 32 / bits;
  const DType params = w.scales.dtype();
  const size_t esize = dtype_size(params);
  const int64_t group_bytes = int8_group_bytes(G, bits, params);
  const int32_t m = 1 << (bits - 1);
  const uint32_t mask = (1u << bits) - 1;
  const auto* tiles = static_cast<const uint8_t*>(w.int8_tiles.raw());
  for (int64_t r = 0; r < job.R; ++r) {
    const int64_t row = job.r0 + r, tile = row / kInt8TileRows, k = row % kInt8TileRows;
    for (int64_t t = 0; t < job.T; ++t) {
      const int8_t* q = acts.q.data() + t * acts.in;
      float y = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* block = tiles + (tile * groups + g) * group_bytes;
        const uint8_t* sb = block + words * kInt8TileRows * 4 + k * esize;
        const float s = load_kv_scalar(sb, params), b = load_kv_scalar(sb + kInt8TileRows * esize, params);
        int32_t P = 0;
        for (int64_t j = 0; j < words; ++j) {
          uint32_t word;
          std::memcpy(&word, block + (j * kInt8TileRows + k) * 4, 4);
          for (int64_t c = 0; c < codes_per_word; ++c) {
            const int64_t i = (g * words + j) * codes_per_word + c;
            P += (int32_t((word >> (c * bits)) & mask) - m) * int32_t(q[int8_act_index(i, bits)]);
          }
        }
        y = std::fma(b + s * float(m), acts.sx(t, g), y);
        y = std::fma(s * acts.d(t, g), float(P), y);
      }
      job.y[t * job.ldy + r] = y;
    }
  }
}

Int8Kernels int8_kernels(Isa isa) {
  if (int8_uses_vnni(isa)) return {linear_int8_avx512, quantize_int8_row_avx512};
  if (isa != Isa::kPortable) return {linear_int8_avx2, quantize_int8_row_avx2};
  return {linear_int8_portable, quantize_int8_row_portable};
}

LinearKernel::LinearKernel(Isa isa, const ops::Weight& w, const float* x, int64_t T,
                           std::span<const LinearKernel> same_input,
                           const std::shared_ptr<const Int8Acts>& quantized) {
  if (!uses_int8(w)) {
    exact_ = linear_rows_kernel(isa);
    if (!exact_.token_group) return;
    const int tokens = exact_.token_group(T);
    for (const LinearKernel& k : same_input)
      if (k.packed_ && k.packed_->tokens == tokens) {
        packed_ = k.packed_;
        return;
      }
    packed_ = std::make_shared<const PackedX>(pack_x(x, T, w.in_features, tokens));
    return;
  }
  int8_ = int8_kernels(isa).linear;
  group_size_ = w.quant->group_size;
  bits_ = w.quant->bits;
  for (const LinearKernel& k : same_input)
    if (k.acts_ && k.group_size_ == group_size_ && k.bits_ == bits_) {
      acts_ = k.acts_;
      return;
    }
  if (quantized && quantized->in == w.in_features && quantized->q.size() == size_t(T * w.in_features) &&
      quantized->groups * group_size_ == w.in_features && quantized->bits == bits_) {
    acts_ = quantized;
    return;
  }
  acts_ = std::make_shared<const Int8Acts>(quantize_int8_acts(isa, x, T, w.in_features, group_size_, bits_));
}

void LinearKernel::operator()(const LinearRows& job) const {
  static const PackedX kUnpacked;  // the portable kernel reads job.x
  if (int8_) int8_(job, *acts_);
  else exact_.run(job, packed_ ? *packed_ : kUnpacked);
}

}  // namespace kvlm::cpu
