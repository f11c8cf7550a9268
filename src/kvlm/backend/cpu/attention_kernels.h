#pragma once
// The pieces of CPU attention over codec rows (attention.cpp puts them together):
//  - AttentionRowOps, the work that differs by ISA: decode a key row, decode a value row into
//    the codec's value domain, score a block of kKeyBlock decoded keys against a group of query
//    heads, add a block of weighted value rows into a group of accumulators. The SIMD versions
//    perform the same operations as the portable ones (cpu::dot's lane order and fold; one fma
//    per value element and row; exact widenings), so they are bit-identical
//    and the ISA never changes a result;
//  - attention_chunk: one query token's heads that share a kv head, against a run of keys;
//  - attention_reference: the plain algorithm (every row decoded through the codec, one softmax
//    over all keys) that the chunked kernel is tested against.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/ops.h"

namespace kvlm::cpu {

// Keys and values are processed in blocks of this many rows: one 16-lane dot accumulator per
// key fills the registers, and the 16 accumulators fold together into one vector of scores.
inline constexpr int kKeyBlock = 16;

struct CodePath;  // attention_codes.h
struct QueryCodes;

struct AttentionRowOps {
  // The key row as f32: a pointer into the row itself (f32 passthrough) or into buf (head_dim
  // floats), holding exactly KVCodec::decode_key_row's values.
  const float* (*key)(const KVCodec& codec, const uint8_t* row, float* buf);
  // The value row in the codec's value domain, as KVCodec::decode_value_row_rotated; same rule.
  const float* (*value)(const KVCodec& codec, const uint8_t* row, float* buf);
  // s[g*stride + r] = dot(q + g*d, k[r], d) * scale for g < group, r < rows (cpu::dot's bits).
  // All kKeyBlock pointers must be readable rows and stride >= kKeyBlock: SIMD versions score
  // and store the whole block, the caller ignores scores past `rows`.
  void (*score_block)(const float* q, int group, int d, const float* const* k, int rows,
                      float scale, float* s, size_t stride);
  // acc[g*d + i] = fma(w[g*stride + r], v[r][i], acc[g*d + i]) for r = 0 .. rows-1 in order,
  // for g < group, i < d.
  void (*accumulate)(float* acc, int group, int d, const float* w, size_t stride,
                     const float* const* v, int rows);
};

AttentionRowOps attention_row_ops_portable(const KVCodec& codec);
// The AVX2 (+F16C, FMA) operations for the codec; portable decoders where a codec has no AVX2
// one (MLX affine 6-bit, head dims not a multiple of 8), portable block kernels for head dims
// not a multiple of 16. Needs a CPU with AVX2, FMA and F16C.
AttentionRowOps attention_row_ops_avx2(const KVCodec& codec);
// attention_row_ops_avx2 with AVX-512 block kernels. Needs AVX-512 F/BW/VL/DQ.
AttentionRowOps attention_row_ops_avx512(const KVCodec& codec);
// The operations of cpu_isa().
AttentionRowOps attention_row_ops(const KVCodec& codec);

// Where one kv head's rows of a sequence live in a layer's paged storage: the head's region of
// the layer ([num_blocks, block_size, row bytes], ops::PagedKV), read through the block table.
struct KVRows {
  const uint8_t* keys;
  const uint8_t* values;
  size_t key_bytes, value_bytes;  // row sizes
  const int32_t* block_table;
  int64_t block_size;

  int64_t slot(int64_t pos) const {
    return int64_t(block_table[pos / block_size]) * block_size + pos % block_size;
  }
  const uint8_t* key(int64_t pos) const { return keys + size_t(slot(pos)) * key_bytes; }
  const uint8_t* value(int64_t pos) const { return values + size_t(slot(pos)) * value_bytes; }
  // key(pos) and value(pos) of positions begin .. begin+n-1, one page at a time.
  void addresses(int64_t begin, int64_t n, const uint8_t** key_rows, const uint8_t** value_rows) const {
    for (int64_t j = 0; j < n;) {
      const int64_t pos = begin + j, run = std::min(n - j, block_size - pos % block_size);
      for (int64_t s = slot(pos), end = j + run; j < end; ++j, ++s) {
        key_rows[j] = keys + size_t(s) * key_bytes;
        value_rows[j] = values + size_t(s) * value_bytes;
      }
    }
  }
};

// Bytes from a layer's storage (keys or values, ops::PagedKV's layout) to kv head `kv_head`'s region.
size_t kv_head_offset(const Tensor& storage, int64_t kv_head);
// Head kv_head's rows of a sequence's paged KV (checked by the caller).
KVRows kv_rows(const ops::PagedKV& kv, int64_t kv_head);

// One chunk's partial result for `group` query heads: o[g*d ..] = sum_j p_j v_j in the codec's
// value domain with p the softmax over the chunk's own scores; m[g] their maximum and
// l[g] = sum_j exp(s_j - m[g]), which is what merging chunks needs.
struct ChunkResult {
  float* o;
  float* m;
  float* l;
};

// Scores s_j = dot(q_g, k_j) * scale for keys begin .. end-1 (cpu::dot, in position order),
// their softmax, and the weighted sum of the value rows. q holds `group` rows of head_dim floats.
// `scratch` is resized as needed (a caller reuses it across chunks).
void attention_chunk(const AttentionRowOps& ops, const KVCodec& codec, const KVRows& rows,
                     const float* q, int group, float scale, int64_t begin, int64_t end,
                     const ChunkResult& out, std::vector<float>& scratch);

// One query of a tile: its `group` heads' rows, the end of its keys, where its result goes.
struct ChunkQuery {
  const float* q;
  int64_t end;
  ChunkResult out;
  // The int8 key path: the query's heads quantized (attention_codes.h), its first head at `code_row`.
  const QueryCodes* codes = nullptr;
  int64_t code_row = 0;
};

// attention_chunk for several queries whose keys start at the same position `begin` (each
// ending at its own end > begin): every key and value block is decoded once for all of them.
// Each query's result has exactly the bits it has alone. With `codes`, the rows are read on their
// codes where the codec has a code form (keys: every query then carries its QueryCodes).
void attention_chunk(const AttentionRowOps& ops, const KVCodec& codec, const KVRows& rows,
                     int group, float scale, int64_t begin, std::span<const ChunkQuery> queries,
                     std::vector<float>& scratch, const CodePath* codes = nullptr);

// The reference: for each query row and head, every visible key and value decoded through the
// codec (decode_key_row, decode_value_row: values fully mapped back one row at a time), one
// softmax over all scores, the weighted sum in position order. Same contract as ops::attention.
Tensor attention_reference(const Tensor& q, const ops::PagedKV& kv, int64_t n_past,
                           const ops::AttentionParams& p);

}  // namespace kvlm::cpu
