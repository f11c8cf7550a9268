// Paged KV writes through the layer's codec, and causal attention over a sequence's blocks.
//
// attention() splits each query row's visible keys into chunks of kAttentionChunk positions; every
// (query token, kv head, chunk) is one thread-pool task that scores the chunk for all query heads
// of that kv head (a key row is decoded once for the whole GQA group), softmaxes within the chunk
// and sums the value rows in the codec's value domain. The chunks of a row are then merged in
// chunk order (the usual max/sum rescaling of online softmax) and mapped back from the value
// domain once. Chunk boundaries depend only on the query's position, so a result never depends
// on the thread count, the batch, or how the prompt was chunked. A row with a single chunk is
// written by its task directly, with exactly the arithmetic of attention_reference for the
// passthrough codecs.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kvlm/backend/cpu/attention_kernels.h"
#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/vector_math.h"
#include "kvlm/backend/profile.h"
#include "kvlm/base/thread_pool.h"

namespace kvlm {

namespace cpu {

namespace {

const float* portable_key(const KVCodec& c, const uint8_t* row, float* buf) {
  if (c.spec().kind == KVCodecKind::kF32) return reinterpret_cast<const float*>(row);
  c.decode_key_row(row, buf);
  return buf;
}

const float* portable_value(const KVCodec& c, const uint8_t* row, float* buf) {
  if (c.spec().kind == KVCodecKind::kF32) return reinterpret_cast<const float*>(row);
  c.decode_value_row_rotated(row, buf);
  return buf;
}

void portable_accumulate(float* acc, const float* w, int group, const float* v, int d) {
  for (int g = 0; g < group; ++g) {
    float* a = acc + size_t(g) * size_t(d);
    for (int i = 0; i < d; ++i) a[i] += w[g] * v[i];
  }
}

constexpr int64_t kPrefetchRows = 4;

void prefetch_row(const uint8_t* row, size_t bytes) {
  for (size_t at = 0; at < bytes; at += 64) __builtin_prefetch(row + at);
}

constexpr AttentionRowOps kPortableOps = {portable_key, portable_value, portable_accumulate};

}  // namespace

AttentionRowOps attention_row_ops_portable(const KVCodec&) { return kPortableOps; }

AttentionRowOps attention_row_ops(const KVCodec& codec) {
  return cpu_isa() == Isa::kPortable ? attention_row_ops_portable(codec)
                                     : attention_row_ops_avx2(codec);
}

void attention_chunk(const AttentionRowOps& ops, const KVCodec& codec, const KVRows& rows,
                     const float* q, int group, float scale, int64_t begin, int64_t end,
                     const ChunkResult& out, std::vector<float>& scratch) {
  const int d = codec.head_dim();
  const int64_t n = end - begin;
  scratch.resize(size_t(group) * size_t(n) + size_t(d) + size_t(group));
  float* s = scratch.data();  // [group][n] scores, then softmax numerators
  float* buf = s + size_t(group) * size_t(n);
  float* w = buf + d;
  // Rows are read once and the loop does little work per byte, so the next rows are prefetched
  // (the hardware prefetcher alone left the 2-byte codecs waiting on memory at long context).
  for (int64_t j = 0; j < n; ++j) {
    if (j + kPrefetchRows < n) prefetch_row(rows.key(begin + j + kPrefetchRows), rows.key_bytes);
    score_group(q, group, d, ops.key(codec, rows.key(begin + j), buf), scale, s + j, size_t(n));
  }
  for (int g = 0; g < group; ++g) {
    float* sg = s + size_t(g) * size_t(n);
    float m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, sg[j]);
    // The exponentials first (vectorised), then their sum in position order.
    vector_math().exp_shifted(sg, n, m);
    float l = 0.0f;
    for (int64_t j = 0; j < n; ++j) l += sg[j];
    out.m[g] = m;
    out.l[g] = l;
  }
  std::fill(out.o, out.o + size_t(group) * size_t(d), 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    if (j + kPrefetchRows < n) prefetch_row(rows.value(begin + j + kPrefetchRows), rows.value_bytes);
    const float* v = ops.value(codec, rows.value(begin + j), buf);
    for (int g = 0; g < group; ++g) w[g] = s[size_t(g) * size_t(n) + size_t(j)] / out.l[g];
    ops.accumulate(out.o, w, group, v, d);
  }
}

}  // namespace cpu

namespace ops {

namespace {

struct KVLayout {
  int64_t num_blocks, block_size, kv_heads, head_dim;
};

KVLayout check_paged(const PagedKV& kv, const char* op) {
  check(kv.codec != nullptr, std::string(op) + ": the paged KV has no codec");
  cpu::check_cpu_contiguous(kv.keys, op, "key cache");
  cpu::check_cpu_contiguous(kv.values, op, "value cache");
  const KVCodec& c = *kv.codec;
  check(kv.keys.ndim() == 4 && kv.values.ndim() == 4 && kv.keys.dtype() == DType::kU8 &&
            kv.values.dtype() == DType::kU8 && kv.keys.dim(0) == kv.values.dim(0) &&
            kv.keys.dim(1) == kv.values.dim(1) && kv.keys.dim(2) == kv.values.dim(2) &&
            kv.keys.dim(3) == int64_t(c.key_row_bytes()) &&
            kv.values.dim(3) == int64_t(c.value_row_bytes()),
        std::string(op) + ": key and value caches must be u8 [blocks, block_size, kv_heads, row "
                          "bytes] tensors with the row sizes of codec " + c.name() + ", got " +
            kv.keys.describe() + " and " + kv.values.describe());
  return {kv.keys.dim(0), kv.keys.dim(1), kv.keys.dim(2), c.head_dim()};
}

void check_table_covers(const PagedKV& kv, const KVLayout& l, int64_t n_tokens, const char* op) {
  check(n_tokens <= int64_t(kv.block_table.size()) * l.block_size,
        std::string(op) + ": block table of " + std::to_string(kv.block_table.size()) +
            " blocks cannot hold " + std::to_string(n_tokens) + " tokens");
  for (int32_t b : kv.block_table)
    check(b >= 0 && b < l.num_blocks, std::string(op) + ": block id " + std::to_string(b) +
                                          " outside the pool of " + std::to_string(l.num_blocks));
}

cpu::KVRows rows_of(const PagedKV& kv, const KVLayout& l, int64_t kv_head) {
  return {static_cast<const uint8_t*>(kv.keys.raw()),
          static_cast<const uint8_t*>(kv.values.raw()),
          kv.codec->key_row_bytes(),
          kv.codec->value_row_bytes(),
          kv.block_table.data(),
          l.block_size,
          l.kv_heads,
          kv_head};
}

// The first key a query at `pos` sees.
int64_t first_key(int64_t pos, const AttentionParams& p) {
  return p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
}

int64_t chunk_count(int64_t pos, const AttentionParams& p) {
  return (pos - first_key(pos, p) + kAttentionChunk) / kAttentionChunk;
}

// One (query token, kv head, chunk) task and where its partial result goes.
struct ChunkTask {
  int64_t token, kv_head, begin, end;
  int64_t partial;  // index of its partial slot, -1 when the row has one chunk (written in place)
};

}  // namespace

void kv_write(const Tensor& k, const Tensor& v, const PagedKV& kv, int64_t start) {
  const ProfileScope profile(OpKind::kKVWrite);
  const KVLayout l = check_paged(kv, "kv_write");
  cpu::check_f32(k, 3, "kv_write", "keys");
  cpu::check_f32(v, 3, "kv_write", "values");
  check(k.shape() == v.shape() && k.dim(1) == l.kv_heads && k.dim(2) == l.head_dim,
        "kv_write: keys " + k.describe() + " and values " + v.describe() +
            " do not match the cache " + kv.keys.describe() + " of codec " + kv.codec->name());
  const int64_t n = k.dim(0);
  check_table_covers(kv, l, start + n, "kv_write");
  const KVCodec& c = *kv.codec;
  auto* kc = static_cast<uint8_t*>(kv.keys.raw());
  auto* vc = static_cast<uint8_t*>(kv.values.raw());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < l.kv_heads; ++h) {
      const cpu::KVRows r = rows_of(kv, l, h);
      const int64_t src = (t * l.kv_heads + h) * l.head_dim;
      const int64_t slot = r.slot(start + t);
      c.encode_key_row(k.data<float>() + src, kc + size_t(slot) * c.key_row_bytes());
      c.encode_value_row(v.data<float>() + src, vc + size_t(slot) * c.value_row_bytes());
    }
}

Tensor attention(const Tensor& q, const PagedKV& kv, int64_t n_past, const AttentionParams& p) {
  const ProfileScope profile(OpKind::kAttention);
  const KVLayout l = check_paged(kv, "attention");
  cpu::check_f32(q, 3, "attention", "queries");
  const int64_t n = q.dim(0), heads = q.dim(1), D = q.dim(2);
  check(D == l.head_dim && heads % l.kv_heads == 0,
        "attention: queries " + q.describe() + " do not match the cache " + kv.keys.describe() +
            " of codec " + kv.codec->name());
  check_table_covers(kv, l, n_past + n, "attention");
  const KVCodec& codec = *kv.codec;
  const int group = int(heads / l.kv_heads);
  const cpu::AttentionRowOps row_ops = cpu::attention_row_ops(codec);
  Tensor out = Tensor::empty({n, heads * D}, DType::kF32);
  const float* qp = q.data<float>();
  float* op = out.data<float>();

  std::vector<ChunkTask> tasks;
  int64_t partials = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = n_past + i, first = first_key(pos, p), chunks = chunk_count(pos, p);
    for (int64_t h = 0; h < l.kv_heads; ++h)
      for (int64_t c = 0; c < chunks; ++c)
        tasks.push_back({i, h, first + c * kAttentionChunk,
                         std::min(pos + 1, first + (c + 1) * kAttentionChunk),
                         chunks == 1 ? -1 : partials++});
  }
  // Partial slots of multi-chunk rows: group maxima, group sums, then group*D outputs. A
  // single-chunk row writes its output in place; its maxima and sums go to single_stats, unused.
  const size_t slot_floats = size_t(group) * size_t(D + 2);
  std::vector<float> partial(size_t(partials) * slot_floats);
  std::vector<float> single_stats(size_t(n * l.kv_heads) * 2 * size_t(group));

  thread_pool().parallel_for(tasks.size(), 1, [&](size_t b, size_t e) {
    std::vector<float> scratch;
    for (size_t t = b; t < e; ++t) {
      const ChunkTask& task = tasks[t];
      const int64_t row = task.token * heads + task.kv_head * group;  // first query head
      cpu::ChunkResult r;
      if (task.partial < 0) {
        r.o = op + row * D;
        r.m = single_stats.data() + size_t(task.token * l.kv_heads + task.kv_head) * 2 * size_t(group);
      } else {
        r.m = partial.data() + size_t(task.partial) * slot_floats;
        r.o = r.m + 2 * size_t(group);
      }
      r.l = r.m + group;
      cpu::attention_chunk(row_ops, codec, rows_of(kv, l, task.kv_head), qp + row * D, group,
                           p.scale, task.begin, task.end, r, scratch);
    }
  });

  // Merge multi-chunk rows in chunk order, then map every output row back from the value domain.
  // tasks are ordered by (token, kv head, chunk), so a row's chunks are contiguous.
  std::vector<size_t> row_first(size_t(n * l.kv_heads) + 1);
  for (size_t t = tasks.size(); t-- > 0;)
    row_first[size_t(tasks[t].token * l.kv_heads + tasks[t].kv_head)] = t;
  row_first.back() = tasks.size();
  thread_pool().parallel_for(size_t(n * l.kv_heads), 1, [&](size_t b, size_t e) {
    std::vector<float> factor;
    for (size_t r = b; r < e; ++r) {
      const ChunkTask* first = &tasks[row_first[r]];
      const size_t chunks = row_first[r + 1] - row_first[r];
      float* o = op + (first->token * heads + first->kv_head * group) * D;
      if (chunks > 1) {
        factor.resize(chunks);
        for (int g = 0; g < group; ++g) {
          float m = -INFINITY, sum = 0.0f;
          for (size_t c = 0; c < chunks; ++c)
            m = std::max(m, partial[size_t(first[c].partial) * slot_floats + size_t(g)]);
          for (size_t c = 0; c < chunks; ++c) {
            const float* slot = partial.data() + size_t(first[c].partial) * slot_floats;
            sum += (factor[c] = slot[group + g] * std::exp(slot[g] - m));
          }
          float* og = o + g * D;
          std::fill(og, og + D, 0.0f);
          for (size_t c = 0; c < chunks; ++c) {
            const float w = factor[c] / sum;
            const float* oc =
                partial.data() + size_t(first[c].partial) * slot_floats + 2 * size_t(group) + size_t(g * D);
            row_ops.accumulate(og, &w, 1, oc, int(D));
          }
        }
      }
      for (int g = 0; g < group; ++g) codec.inverse_value_transform(o + g * D);
    }
  });
  return out;
}

}  // namespace ops

namespace cpu {

Tensor attention_reference(const Tensor& q, const ops::PagedKV& kv, int64_t n_past,
                           const ops::AttentionParams& p) {
  check(kv.codec != nullptr, "attention_reference: the paged KV has no codec");
  const KVCodec& codec = *kv.codec;
  const int64_t n = q.dim(0), heads = q.dim(1), D = codec.head_dim();
  const int64_t kv_heads = kv.keys.dim(2), group = heads / kv_heads;
  Tensor out = Tensor::zeros({n, heads * D}, DType::kF32);
  std::vector<float> scores, k(static_cast<size_t>(D)), v(static_cast<size_t>(D));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const KVRows rows = {static_cast<const uint8_t*>(kv.keys.raw()),
                           static_cast<const uint8_t*>(kv.values.raw()),
                           codec.key_row_bytes(),
                           codec.value_row_bytes(),
                           kv.block_table.data(),
                           kv.keys.dim(1),
                           kv_heads,
                           h / group};
      const int64_t pos = n_past + i;
      const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
      const float* qv = q.data<float>() + (i * heads + h) * D;
      scores.clear();
      float m = -INFINITY;
      for (int64_t j = first; j <= pos; ++j) {
        codec.decode_key_row(rows.key(j), k.data());
        scores.push_back(dot(qv, k.data(), D) * p.scale);
        m = std::max(m, scores.back());
      }
      float sum = 0.0f;
      for (float& s : scores) sum += (s = exp_portable(s - m));
      float* o = out.data<float>() + (i * heads + h) * D;
      for (int64_t j = first; j <= pos; ++j) {
        const float w = scores[size_t(j - first)] / sum;
        codec.decode_value_row(rows.value(j), v.data());
        for (int64_t c = 0; c < D; ++c) o[c] += w * v[size_t(c)];
      }
    }
  return out;
}

}  // namespace cpu

}  // namespace kvlm
