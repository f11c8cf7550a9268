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
#include <memory>
#include <optional>
#include <vector>

#include "kvlm/backend/cpu/attention_codes.h"
#include "kvlm/backend/cpu/attention_kernels.h"
#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/cpu/linear_int8.h"
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

void portable_score_block(const float* q, int group, int d, const float* const* k, int rows,
                          float scale, float* s, size_t stride) {
  for (int g = 0; g < group; ++g)
    for (int r = 0; r < rows; ++r)
      s[size_t(g) * stride + size_t(r)] = dot(q + size_t(g) * size_t(d), k[r], d) * scale;
}

void portable_accumulate(float* acc, int group, int d, const float* w, size_t stride,
                         const float* const* v, int rows) {
  for (int g = 0; g < group; ++g)
    for (int r = 0; r < rows; ++r) {
      float* a = acc + size_t(g) * size_t(d);
      const float wr = w[size_t(g) * stride + size_t(r)];
      for (int i = 0; i < d; ++i) a[i] = std::fma(wr, v[r][i], a[i]);
    }
}

constexpr AttentionRowOps kPortableOps = {portable_key, portable_value, portable_score_block,
                                          portable_accumulate};

// Rows are read once and little work is done per byte, so each pass over a chunk's keys or values
// fetches the block kFetchBlocks ahead of the one it computes on (the hardware prefetcher alone
// left the 2-byte codecs waiting on memory at long context). The fetches go to L2 (prefetcht1):
// into L1 they were held to its few outstanding misses, and a cold KV read at 13-15 GB/s on the
// Zen 4 host (AttentionFromMemory/128/8/64 94 -> 68 us with L2). One block ahead was no faster,
// three or four slower (also at a 4096-token context), and fetching the first blocks before a
// pass starts paid nothing.
constexpr int64_t kFetchBlocks = 2;

void fetch_row(const uint8_t* row, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
}

// Points row[r] at rows first .. first+count-1 (count <= kKeyBlock) of a chunk whose row
// addresses are `at`, and fetches the rows kFetchBlocks blocks further on (below `end`).
void block_rows(const uint8_t* const* at, size_t bytes, int64_t first, int count, int64_t end,
                const uint8_t** row) {
  for (int r = 0; r < count; ++r) {
    const int64_t ahead = first + kFetchBlocks * kKeyBlock + r;
    if (ahead < end) fetch_row(at[ahead], bytes);
    row[r] = at[first + r];
  }
}

// Decodes the block's rows through `decode` into buf (kKeyBlock rows of d floats), pointing
// row[r] at each; the unused pointers repeat row 0 so a SIMD kernel may read the whole block.
void decode_block(const float* (*decode)(const KVCodec&, const uint8_t*, float*),
                  const KVCodec& codec, const uint8_t* const* at, size_t bytes, int64_t first, int count,
                  int64_t end, float* buf, const float** row) {
  const uint8_t* raw[kKeyBlock];
  block_rows(at, bytes, first, count, end, raw);
  // f32 rows (the exact cache) are read in place, without a call per row.
  if (codec.spec().kind == KVCodecKind::kF32)
    for (int r = 0; r < count; ++r) row[r] = reinterpret_cast<const float*>(raw[r]);
  else
    for (int r = 0; r < count; ++r) row[r] = decode(codec, raw[r], buf + size_t(r) * size_t(codec.head_dim()));
  for (int r = count; r < kKeyBlock; ++r) row[r] = row[0];
}

}  // namespace

AttentionRowOps attention_row_ops_portable(const KVCodec&) { return kPortableOps; }

size_t kv_head_offset(const Tensor& storage, int64_t kv_head) {
  return size_t(kv_head) * size_t(storage.dim(1) * storage.dim(2) * storage.dim(3));
}

KVRows kv_rows(const ops::PagedKV& kv, int64_t kv_head) {
  return {static_cast<const uint8_t*>(kv.keys.raw()) + kv_head_offset(kv.keys, kv_head),
          static_cast<const uint8_t*>(kv.values.raw()) + kv_head_offset(kv.values, kv_head),
          kv.codec->key_row_bytes(),
          kv.codec->value_row_bytes(),
          kv.block_table.data(),
          kv.keys.dim(2)};
}

AttentionRowOps attention_row_ops(const KVCodec& codec) {
  switch (cpu_isa()) {
    case Isa::kAvx512: return attention_row_ops_avx512(codec);
    case Isa::kAvx2: return attention_row_ops_avx2(codec);
    default: return attention_row_ops_portable(codec);
  }
}

void attention_chunk(const AttentionRowOps& ops, const KVCodec& codec, const KVRows& rows,
                     int group, float scale, int64_t begin, std::span<const ChunkQuery> queries,
                     std::vector<float>& scratch, const CodePath* codes) {
  const int d = codec.head_dim();
  int64_t n_max = 0;
  for (const ChunkQuery& cq : queries) n_max = std::max(n_max, cq.end - begin);
  // Scores of query t, head g at s[(t*group + g)*ns ..], ns padded to whole blocks so a block's
  // scores always fit.
  const size_t ns = size_t((n_max + kKeyBlock - 1) / kKeyBlock * kKeyBlock);
  scratch.resize(queries.size() * size_t(group) * ns + size_t(kKeyBlock) * size_t(d));
  float* buf = scratch.data() + queries.size() * size_t(group) * ns;
  const auto scores = [&](size_t t) { return scratch.data() + t * size_t(group) * ns; };
  const float* row[kKeyBlock];
  // The chunk's row addresses, found once: KVRows::slot divides by the page size, and every row
  // was addressed three to five times.
  thread_local std::vector<const uint8_t*> addresses;
  addresses.resize(2 * size_t(n_max));
  const uint8_t** key_at = addresses.data();
  const uint8_t** value_at = key_at + n_max;
  rows.addresses(begin, n_max, key_at, value_at);
  // Each decoded (or prepared) block serves every query that sees (part of) it.
  const bool key_codes = codes && codes->key;
  KeyCodeBlock key_block;
  // In decode the chunk's keys and values come cold from memory (a step streams all weights in
  // between). Each pass fetches its own rows: fetching the values during the scores as well asked
  // one core for twice its bandwidth (AttentionFromMemory 128/8/64 5-7% slower, 1024/8/64 10%).
  for (int64_t j = 0; j < n_max; j += kKeyBlock) {
    const int count = int(std::min<int64_t>(kKeyBlock, n_max - j));
    if (key_codes) {
      const uint8_t* raw[kKeyBlock];
      block_rows(key_at, rows.key_bytes, j, count, n_max, raw);
      codes->kernels.prepare(*codes->key, raw, count, key_block);
    } else {
      decode_block(ops.key, codec, key_at, rows.key_bytes, j, count, n_max, buf, row);
    }
    // Past the keys' end the fetches run on into the values, so the value pass starts warm.
    for (int64_t r = std::max<int64_t>(0, j + kFetchBlocks * kKeyBlock - n_max);
         r < std::min(n_max, j + (kFetchBlocks + 1) * kKeyBlock - n_max); ++r)
      fetch_row(value_at[r], rows.value_bytes);
    for (size_t t = 0; t < queries.size(); ++t) {
      const ChunkQuery& cq = queries[t];
      if (j >= cq.end - begin) continue;
      if (key_codes) codes->kernels.score(*codes->key, key_block, *cq.codes, cq.code_row, group, scale, scores(t) + j, ns);
      else ops.score_block(cq.q, group, d, row, int(std::min<int64_t>(kKeyBlock, cq.end - begin - j)), scale, scores(t) + j, ns);
    }
  }
  for (size_t t = 0; t < queries.size(); ++t) {
    const ChunkResult& out = queries[t].out;
    const int64_t n = queries[t].end - begin;
    float* s = scores(t);
    // Softmax per head: maximum, numerators, their sum (in 16 lanes, vector_math's sum_lanes), and
    // the value weights w = p / l, once per (head, key).
    const VectorMathKernels& vm = vector_math();
    for (int g = 0; g < group; ++g) {
      float* sg = s + size_t(g) * ns;
      out.m[g] = vm.max_value(sg, n);
      vm.exp_scaled(sg, sg, n, 1.0f, out.m[g]);
      out.l[g] = vm.sum_lanes(sg, n);
      vm.divide(sg, n, out.l[g]);
    }
    std::fill(out.o, out.o + size_t(group) * size_t(d), 0.0f);
  }
  for (int64_t j = 0; j < n_max; j += kKeyBlock) {
    decode_block(ops.value, codec, value_at, rows.value_bytes, j,
                 int(std::min<int64_t>(kKeyBlock, n_max - j)), n_max, buf, row);
    for (size_t t = 0; t < queries.size(); ++t) {
      const int64_t n = queries[t].end - begin;
      if (j < n)
        ops.accumulate(queries[t].out.o, group, d, scores(t) + j, ns, row, int(std::min<int64_t>(kKeyBlock, n - j)));
    }
  }
}

void attention_chunk(const AttentionRowOps& ops, const KVCodec& codec, const KVRows& rows,
                     const float* q, int group, float scale, int64_t begin, int64_t end,
                     const ChunkResult& out, std::vector<float>& scratch) {
  const ChunkQuery one = {q, end, out};
  attention_chunk(ops, codec, rows, group, scale, begin, {&one, 1}, scratch);
}

}  // namespace cpu

namespace ops {

namespace {

struct KVLayout {
  int64_t num_blocks, block_size, kv_heads, head_dim;
};

KVLayout check_paged(const PagedKV& kv, const char* op) {
  check(kv.codec != nullptr, [&] { return std::string(op) + ": the paged KV has no codec"; });
  cpu::check_cpu_contiguous(kv.keys, op, "key cache");
  cpu::check_cpu_contiguous(kv.values, op, "value cache");
  const KVCodec& c = *kv.codec;
  check(kv.keys.ndim() == 4 && kv.values.ndim() == 4 && kv.keys.dtype() == DType::kU8 &&
            kv.values.dtype() == DType::kU8 && kv.keys.dim(0) == kv.values.dim(0) &&
            kv.keys.dim(1) == kv.values.dim(1) && kv.keys.dim(2) == kv.values.dim(2) &&
            kv.keys.dim(3) == int64_t(c.key_row_bytes()) &&
            kv.values.dim(3) == int64_t(c.value_row_bytes()),
        [&] { return std::string(op) + ": key and value caches must be u8 [kv_heads, blocks, block_size, row "
                          "bytes] tensors with the row sizes of codec " + c.name() + ", got " +
            kv.keys.describe() + " and " + kv.values.describe(); });
  return {kv.keys.dim(1), kv.keys.dim(2), kv.keys.dim(0), c.head_dim()};
}

void check_table_covers(const PagedKV& kv, const KVLayout& l, int64_t n_tokens, const char* op) {
  check(n_tokens <= int64_t(kv.block_table.size()) * l.block_size,
        [&] { return std::string(op) + ": block table of " + std::to_string(kv.block_table.size()) +
            " blocks cannot hold " + std::to_string(n_tokens) + " tokens"; });
  for (int32_t b : kv.block_table)
    check(b >= 0 && b < l.num_blocks, [&] { return std::string(op) + ": block id " + std::to_string(b) +
                                          " outside the pool of " + std::to_string(l.num_blocks); });
}

// The first key a query at `pos` sees.
int64_t first_key(int64_t pos, const AttentionParams& p) {
  return p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
}

int64_t chunk_count(int64_t pos, const AttentionParams& p) {
  return (pos - first_key(pos, p) + kAttentionChunk) / kAttentionChunk;
}

// Query tokens of one sequence share a task when they see the same chunk of keys: prefill
// decodes each key and value block once for up to this many of them.
constexpr int64_t kQueryTile = 8;

// One sequence of an attention_batch call, checked.
struct SeqJob {
  const float* q;
  const PagedKV* kv;
  KVLayout l;
  cpu::AttentionRowOps ops;
  int64_t n_past, row0;  // row0: its first row in the batch output
  // The code path, when asked for and the codec has one, and for its key form every query head
  // quantized (row = token * heads + head).
  std::optional<cpu::CodePath> path;
  cpu::QueryCodes codes;
};

// Where a query token's keys start and how its results are kept.
struct TokenInfo {
  int32_t seq;
  int64_t pos, first, chunks;
  int64_t partial;  // its first partial slot (kv head h's chunk c: partial + h*chunks + c); -1
                    // when it has one chunk, whose result is written in place
};

// One task: the tokens [token_begin, token_end) of a sequence (batch rows), one kv head and
// the chunk of keys starting at `begin` that all of them see, each up to its own position.
struct ChunkTask {
  int64_t token_begin, token_end, kv_head, chunk, begin;
};

}  // namespace

void kv_write(const Tensor& k, const Tensor& v, const PagedKV& kv, int64_t start) {
  const ProfileScope profile(OpKind::kKVWrite);
  const KVLayout l = check_paged(kv, "kv_write");
  cpu::check_f32(k, 3, "kv_write", "keys");
  cpu::check_f32(v, 3, "kv_write", "values");
  check(k.shape() == v.shape() && k.dim(1) == l.kv_heads && k.dim(2) == l.head_dim,
        [&] { return "kv_write: keys " + k.describe() + " and values " + v.describe() +
            " do not match the cache " + kv.keys.describe() + " of codec " + kv.codec->name(); });
  const int64_t n = k.dim(0);
  check_table_covers(kv, l, start + n, "kv_write");
  const KVCodec& c = *kv.codec;
  for (int64_t h = 0; h < l.kv_heads; ++h) {
    auto* kc = static_cast<uint8_t*>(kv.keys.raw()) + cpu::kv_head_offset(kv.keys, h);
    auto* vc = static_cast<uint8_t*>(kv.values.raw()) + cpu::kv_head_offset(kv.values, h);
    const cpu::KVRows r = cpu::kv_rows(kv, h);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t src = (t * l.kv_heads + h) * l.head_dim, slot = r.slot(start + t);
      c.encode_key_row(k.data<float>() + src, kc + size_t(slot) * c.key_row_bytes());
      c.encode_value_row(v.data<float>() + src, vc + size_t(slot) * c.value_row_bytes());
    }
  }
}

Tensor attention_batch(std::span<const AttentionSequence> seqs, const AttentionParams& p, const Weight* next,
                       QuantizedInput* next_input) {
  const ProfileScope profile(OpKind::kAttention);
  check(!seqs.empty(), "attention: no sequences");
  int64_t heads = 0, D = 0;
  std::vector<SeqJob> jobs;
  int64_t total = 0;
  for (const AttentionSequence& s : seqs) {
    const KVLayout l = check_paged(s.kv, "attention");
    cpu::check_f32(s.q, 3, "attention", "queries");
    check(s.q.dim(2) == l.head_dim && s.q.dim(1) % l.kv_heads == 0,
          [&] { return "attention: queries " + s.q.describe() + " do not match the cache " +
              s.kv.keys.describe() + " of codec " + s.kv.codec->name(); });
    if (jobs.empty()) heads = s.q.dim(1), D = s.q.dim(2);
    check(s.q.dim(1) == heads && l.head_dim == D && (jobs.empty() || l.kv_heads == jobs[0].l.kv_heads),
          [&] { return "attention: the batch's sequences differ in heads or head_dim: " + s.q.describe() +
              " and " + seqs[0].q.describe(); });
    check_table_covers(s.kv, l, s.n_past + s.q.dim(0), "attention");
    jobs.push_back({s.q.data<float>(), &s.kv, l, cpu::attention_row_ops(*s.kv.codec), s.n_past, total, {}, {}});
    if (p.kv_path == MatmulPath::kInt8) {
      SeqJob& job = jobs.back();
      job.path = cpu::code_path(*s.kv.codec);
      if (job.path && job.path->key)
        job.codes = cpu::quantize_query_codes(*job.path->key, s.q.data<float>(), s.q.dim(0) * s.q.dim(1));
    }
    total += s.q.dim(0);
  }
  const int64_t kv_heads = jobs[0].l.kv_heads;
  const int group = int(heads / kv_heads);
  Tensor out = Tensor::empty({total, heads * D}, DType::kF32);
  float* op = out.data<float>();

  // Tokens, their partial slots, and tasks: consecutive tokens of a sequence with the same first
  // key form a tile; chunk c of a tile is one task per kv head over the tile's tokens that reach
  // it (a suffix of the tile, since later tokens have at least as many chunks).
  std::vector<TokenInfo> tokens;
  std::vector<ChunkTask> tasks;
  int64_t partials = 0;
  for (size_t si = 0; si < jobs.size(); ++si) {
    const SeqJob& job = jobs[si];
    const int64_t n = seqs[si].q.dim(0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = job.n_past + i, chunks = chunk_count(pos, p);
      tokens.push_back({int32_t(si), pos, first_key(pos, p), chunks, chunks == 1 ? -1 : partials});
      if (chunks > 1) partials += kv_heads * chunks;
    }
    for (int64_t i = 0; i < n;) {
      const int64_t t0 = job.row0 + i;
      int64_t t1 = t0 + 1;
      while (t1 < job.row0 + n && t1 - t0 < kQueryTile && tokens[size_t(t1)].first == tokens[size_t(t0)].first) ++t1;
      for (int64_t c = 0; c < tokens[size_t(t1 - 1)].chunks; ++c) {
        int64_t tb = t0;
        while (tokens[size_t(tb)].chunks <= c) ++tb;
        for (int64_t h = 0; h < kv_heads; ++h)
          tasks.push_back({tb, t1, h, c, tokens[size_t(t0)].first + c * kAttentionChunk});
      }
      i += t1 - t0;
    }
  }
  // Partial slots of multi-chunk rows: group maxima, group sums, then group*D outputs. A
  // single-chunk row writes its output in place; its maxima and sums go to single_stats, unused.
  const size_t slot_floats = size_t(group) * size_t(D + 2);
  // Every task writes all of its slot before the merge reads it, so the slots start
  // uninitialized (zeroing them took 5% of a 512-token prefill's attention, on one thread).
  const auto partial = std::make_unique_for_overwrite<float[]>(size_t(partials) * slot_floats);
  const auto single_stats = std::make_unique_for_overwrite<float[]>(size_t(total * kv_heads) * 2 * size_t(group));
  // Multi-chunk rows are merged, and rows of codecs that rotate values mapped back, in a second
  // pool round, skipped when no row needs either (decode of short contexts).
  const bool merge = partials > 0 || std::any_of(jobs.begin(), jobs.end(), [](const SeqJob& j) {
    return j.kv->codec->rotates_values();
  });
  // The output quantized for `next` by the round that finishes each row's kv-head slice.
  cpu::Int8ActsWriter codes(next_input ? next : nullptr, total, heads * D, group * D);

  thread_pool().parallel_for(tasks.size(), 1, [&](size_t b, size_t e) {
    std::vector<float> scratch;
    std::vector<cpu::ChunkQuery> queries;
    for (size_t t = b; t < e; ++t) {
      const ChunkTask& task = tasks[t];
      const SeqJob& job = jobs[size_t(tokens[size_t(task.token_begin)].seq)];
      queries.clear();
      for (int64_t gt = task.token_begin; gt < task.token_end; ++gt) {
        const TokenInfo& tok = tokens[size_t(gt)];
        const int64_t head0 = task.kv_head * group;  // first query head
        cpu::ChunkResult r;
        if (tok.partial < 0) {
          r.o = op + (gt * heads + head0) * D;
          r.m = single_stats.get() + size_t(gt * kv_heads + task.kv_head) * 2 * size_t(group);
        } else {
          r.m = partial.get() + size_t(tok.partial + task.kv_head * tok.chunks + task.chunk) * slot_floats;
          r.o = r.m + 2 * size_t(group);
        }
        r.l = r.m + group;
        queries.push_back({job.q + ((gt - job.row0) * heads + head0) * D,
                           std::min(tok.pos + 1, task.begin + kAttentionChunk), r, &job.codes,
                           (gt - job.row0) * heads + head0});
      }
      cpu::attention_chunk(job.ops, *job.kv->codec, cpu::kv_rows(*job.kv, task.kv_head), group,
                           p.scale, task.begin, queries, scratch, job.path ? &*job.path : nullptr);
      if (codes && !merge)
        for (int64_t gt = task.token_begin; gt < task.token_end; ++gt)
          codes.write(op + gt * heads * D, gt, task.kv_head * group * D, (task.kv_head + 1) * group * D);
    }
  });

  // Merge multi-chunk rows in chunk order, then map every output row back from the value domain.
  if (merge) thread_pool().parallel_for(size_t(total * kv_heads), 1, [&](size_t b, size_t e) {
    std::vector<float> factor;
    for (size_t r = b; r < e; ++r) {
      const int64_t gt = int64_t(r) / kv_heads, h = int64_t(r) % kv_heads;
      const TokenInfo& tok = tokens[size_t(gt)];
      const SeqJob& job = jobs[size_t(tok.seq)];
      float* o = op + (gt * heads + h * group) * D;
      if (tok.chunks > 1) {
        const float* slots = partial.get() + size_t(tok.partial + h * tok.chunks) * slot_floats;
        const size_t chunks = size_t(tok.chunks);
        factor.resize(chunks);
        for (int g = 0; g < group; ++g) {
          float m = -INFINITY, sum = 0.0f;
          for (size_t c = 0; c < chunks; ++c) m = std::max(m, slots[c * slot_floats + size_t(g)]);
          for (size_t c = 0; c < chunks; ++c) {
            const float* slot = slots + c * slot_floats;
            sum += (factor[c] = slot[group + g] * std::exp(slot[g] - m));
          }
          float* og = o + g * D;
          std::fill(og, og + D, 0.0f);
          for (size_t c = 0; c < chunks; ++c) {
            const float w = factor[c] / sum;
            const float* oc = slots + c * slot_floats + 2 * size_t(group) + size_t(g * D);
            job.ops.accumulate(og, 1, int(D), &w, 0, &oc, 1);
          }
        }
      }
      for (int g = 0; g < group; ++g) job.kv->codec->inverse_value_transform(o + g * D);
      if (codes) codes.write(op + gt * heads * D, gt, h * group * D, (h + 1) * group * D);
    }
  });
  codes.finish(next_input);
  return out;
}

Tensor attention(const Tensor& q, const PagedKV& kv, int64_t n_past, const AttentionParams& p) {
  const AttentionSequence one = {q, kv, n_past};
  return attention_batch({&one, 1}, p);
}

}  // namespace ops

namespace cpu {

Tensor attention_reference(const Tensor& q, const ops::PagedKV& kv, int64_t n_past,
                           const ops::AttentionParams& p) {
  check(kv.codec != nullptr, "attention_reference: the paged KV has no codec");
  const KVCodec& codec = *kv.codec;
  const int64_t n = q.dim(0), heads = q.dim(1), D = codec.head_dim();
  const int64_t kv_heads = kv.keys.dim(0), group = heads / kv_heads;
  Tensor out = Tensor::zeros({n, heads * D}, DType::kF32);
  std::vector<float> scores, k(static_cast<size_t>(D)), v(static_cast<size_t>(D));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const KVRows rows = kv_rows(kv, h / group);
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
      for (float& s : scores) s = exp_portable(s - m);
      const float sum = sum_lanes_portable(scores.data(), int64_t(scores.size()));
      float* o = out.data<float>() + (i * heads + h) * D;
      for (int64_t j = first; j <= pos; ++j) {
        const float w = scores[size_t(j - first)] / sum;
        codec.decode_value_row(rows.value(j), v.data());
        for (int64_t c = 0; c < D; ++c) o[c] = std::fma(w, v[size_t(c)], o[c]);
      }
    }
  return out;
}

}  // namespace cpu

}  // namespace kvlm
