#pragma once
// The pieces of CPU attention over codec rows (attention.cpp puts them together):
//  - AttentionRowOps, the per-row work that differs by ISA: decode a key row, decode a value row
//    into the codec's value domain, add weighted value rows into a group of accumulators. The
//    AVX2 versions perform the same elementwise operations as the portable ones (separately
//    rounded multiply and add, no FMA, exact widenings), so they are bit-identical and the ISA
//    never changes a result;
//  - attention_chunk: one query token's heads that share a kv head, against a run of keys;
//  - attention_reference: the plain algorithm (every row decoded through the codec, one softmax
//    over all keys) that the chunked kernel is tested against.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvlm/backend/cpu/cpu_kernels.h"
#include "kvlm/backend/ops.h"

namespace kvlm::cpu {

// s[g * stride] = dot(q + g*d, k, d) * scale for the `group` query heads that share key row k;
// cpu::dot runs on the process's ISA and every ISA gives the same bits (dot.h).
inline void score_group(const float* q, int group, int d, const float* k, float scale, float* s,
                        size_t stride) {
  for (int g = 0; g < group; ++g) s[size_t(g) * stride] = dot(q + size_t(g) * size_t(d), k, d) * scale;
}

struct AttentionRowOps {
  // The key row as f32: a pointer into the row itself (f32 passthrough) or into buf (head_dim
  // floats), holding exactly KVCodec::decode_key_row's values.
  const float* (*key)(const KVCodec& codec, const uint8_t* row, float* buf);
  // The value row in the codec's value domain, as KVCodec::decode_value_row_rotated; same rule.
  const float* (*value)(const KVCodec& codec, const uint8_t* row, float* buf);
  // acc[g*d + i] += w[g] * v[i] for g < group, i < d.
  void (*accumulate)(float* acc, const float* w, int group, const float* v, int d);
};

AttentionRowOps attention_row_ops_portable(const KVCodec& codec);
// The AVX2 (+F16C) row operations for the codec; portable decoders where a codec has no AVX2
// one (MLX affine 6-bit, head dims not a multiple of 8). Needs a CPU with AVX2 and F16C.
AttentionRowOps attention_row_ops_avx2(const KVCodec& codec);
// The row operations for cpu_isa(): AVX2 ones on AVX2 and AVX-512 CPUs, else portable.
AttentionRowOps attention_row_ops(const KVCodec& codec);

// Where one kv head's rows of a sequence live in a layer's paged storage.
struct KVRows {
  const uint8_t* keys;
  const uint8_t* values;
  size_t key_bytes, value_bytes;  // row sizes
  const int32_t* block_table;
  int64_t block_size, kv_heads, kv_head;

  int64_t slot(int64_t pos) const {
    return (int64_t(block_table[pos / block_size]) * block_size + pos % block_size) * kv_heads +
           kv_head;
  }
  const uint8_t* key(int64_t pos) const { return keys + size_t(slot(pos)) * key_bytes; }
  const uint8_t* value(int64_t pos) const { return values + size_t(slot(pos)) * value_bytes; }
};

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

// The reference: for each query row and head, every visible key and value decoded through the
// codec (decode_key_row, decode_value_row: values fully mapped back one row at a time), one
// softmax over all scores, the weighted sum in position order. Same contract as ops::attention.
Tensor attention_reference(const Tensor& q, const ops::PagedKV& kv, int64_t n_past,
                           const ops::AttentionParams& p);

}  // namespace kvlm::cpu
