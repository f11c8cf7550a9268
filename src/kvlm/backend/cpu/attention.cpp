// Paged KV writes and causal attention over a sequence's blocks.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm::ops {

namespace {

struct KVLayout {
  int64_t num_blocks, block_size, kv_heads, head_dim;
};

KVLayout check_paged(const PagedKV& kv, const char* op) {
  cpu::check_cpu_contiguous(kv.keys, op, "key cache");
  cpu::check_cpu_contiguous(kv.values, op, "value cache");
  check(kv.keys.ndim() == 4 && kv.keys.shape() == kv.values.shape() &&
            kv.keys.dtype() == kv.values.dtype(),
        std::string(op) + ": key and value caches must be equal [blocks, block_size, kv_heads, "
                          "head_dim] tensors, got " + kv.keys.describe() + " and " +
            kv.values.describe());
  return {kv.keys.dim(0), kv.keys.dim(1), kv.keys.dim(2), kv.keys.dim(3)};
}

// Element offset of (token position, kv head) in the cache, through the block table.
int64_t slot_offset(const PagedKV& kv, const KVLayout& l, int64_t pos, int64_t kv_head) {
  const int64_t block = kv.block_table[size_t(pos / l.block_size)];
  return ((block * l.block_size + pos % l.block_size) * l.kv_heads + kv_head) * l.head_dim;
}

void check_table_covers(const PagedKV& kv, const KVLayout& l, int64_t n_tokens, const char* op) {
  check(n_tokens <= int64_t(kv.block_table.size()) * l.block_size,
        std::string(op) + ": block table of " + std::to_string(kv.block_table.size()) +
            " blocks cannot hold " + std::to_string(n_tokens) + " tokens");
  for (int32_t b : kv.block_table)
    check(b >= 0 && b < l.num_blocks, std::string(op) + ": block id " + std::to_string(b) +
                                          " outside the pool of " + std::to_string(l.num_blocks));
}

}  // namespace

void kv_write(const Tensor& k, const Tensor& v, const PagedKV& kv, int64_t start) {
  const KVLayout l = check_paged(kv, "kv_write");
  cpu::check_f32(k, 3, "kv_write", "keys");
  cpu::check_f32(v, 3, "kv_write", "values");
  check(k.shape() == v.shape() && k.dim(1) == l.kv_heads && k.dim(2) == l.head_dim,
        "kv_write: keys " + k.describe() + " and values " + v.describe() +
            " do not match the cache " + kv.keys.describe());
  const int64_t n = k.dim(0);
  check_table_covers(kv, l, start + n, "kv_write");
  const size_t esize = dtype_size(kv.keys.dtype());
  auto* kc = static_cast<uint8_t*>(kv.keys.raw());
  auto* vc = static_cast<uint8_t*>(kv.values.raw());
  const int64_t row = l.kv_heads * l.head_dim;  // one token's slot is contiguous across heads
  for (int64_t t = 0; t < n; ++t) {
    const int64_t off = slot_offset(kv, l, start + t, 0);
    cpu::narrow(k.data<float>() + t * row, row, kv.keys.dtype(), kc + off * int64_t(esize));
    cpu::narrow(v.data<float>() + t * row, row, kv.values.dtype(), vc + off * int64_t(esize));
  }
}

Tensor attention(const Tensor& q, const PagedKV& kv, int64_t n_past, const AttentionParams& p) {
  const KVLayout l = check_paged(kv, "attention");
  cpu::check_f32(q, 3, "attention", "queries");
  const int64_t n = q.dim(0), heads = q.dim(1), D = q.dim(2);
  check(D == l.head_dim && heads % l.kv_heads == 0,
        "attention: queries " + q.describe() + " do not match the cache " + kv.keys.describe());
  check_table_covers(kv, l, n_past + n, "attention");
  const int64_t group = heads / l.kv_heads;
  Tensor out = Tensor::empty({n, heads * D}, DType::kF32);
  const float* qp = q.data<float>();
  float* op = out.data<float>();
  const bool f32_cache = kv.keys.dtype() == DType::kF32;

  // One task per (query token, head); each reduces over its own keys in position order.
  thread_pool().parallel_for(size_t(n * heads), 1, [&](size_t b, size_t e) {
    std::vector<float> scores;
    std::vector<float> kbuf(static_cast<size_t>(D)), vbuf(static_cast<size_t>(D));
    for (size_t task = b; task < e; ++task) {
      const int64_t i = int64_t(task) / heads, h = int64_t(task) % heads, kvh = h / group;
      const int64_t pos = n_past + i;
      const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
      const float* qv = qp + (i * heads + h) * D;
      scores.resize(size_t(pos - first + 1));
      float m = -INFINITY;
      for (int64_t j = first; j <= pos; ++j) {
        const int64_t off = slot_offset(kv, l, j, kvh);
        const float* kv_row = f32_cache ? kv.keys.data<float>() + off : kbuf.data();
        if (!f32_cache) cpu::widen(kv.keys, off, D, kbuf.data());
        const float s = cpu::dot(qv, kv_row, D) * p.scale;
        scores[size_t(j - first)] = s;
        m = std::max(m, s);
      }
      float sum = 0.0f;
      for (float& s : scores) sum += (s = std::exp(s - m));
      float* o = op + (i * heads + h) * D;
      std::fill(o, o + D, 0.0f);
      for (int64_t j = first; j <= pos; ++j) {
        const float w = scores[size_t(j - first)] / sum;
        const int64_t off = slot_offset(kv, l, j, kvh);
        const float* v_row = f32_cache ? kv.values.data<float>() + off : vbuf.data();
        if (!f32_cache) cpu::widen(kv.values, off, D, vbuf.data());
        for (int64_t d = 0; d < D; ++d) o[d] += w * v_row[d];
      }
    }
  });
  return out;
}

}  // namespace kvlm::ops
