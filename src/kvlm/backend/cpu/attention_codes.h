#pragma once
// The int8 key path of attention over compressed caches (ops::AttentionParams::kv_path =
// MatmulPath::kInt8): keys are scored on their codes against int8 queries, as llama.cpp scores a
// quantized K cache, instead of being decoded to f32 and multiplied in floats.
//
// Key rows of MLX affine 4- and 8-bit codecs and of TurboQuant k4 and k8 are, per group g of G
// elements (the codec's group: affine 32/64/128, TurboQuant 32),
//   k_i = A_g * (u_i - m) + B_g,   u_i the unsigned code, m = 2^(bits-1),
//   MLX affine (scale s, bias b):        A = s, B = b + s*m           (k = s*u + b)
//   TurboQuant k8 (int8 code c; s, z):   u = c + 128, A = s, B = s*z  (k = (c + z)*s)
//   TurboQuant k4 (code u; s, z):        A = s, B = s*(z + m)         (k = (u + z)*s)
// each product and sum rounded once, in that order. A query head q is quantized per key group
// with linear_int8.h's rule (d_g = max|q|/127, qq_i = rne(q_i * 127/max|q|), sq_g = the float sum
// of the group's q in index order). Then, for one query head and one key,
//   P_g   = sum over the group of (u_i - m) * qq_i                 (int32, exact)
//   t_g   = A_g * (d_g * float(P_g)) + B_g * sq_g                  (each step rounded)
//   score = ((0 + t_0) + t_1 + ... + t_last) * scale               (group order)
// Integer sums are exact in any order and the float steps run in this fixed order, so every ISA
// gives the same bits and a score depends only on its own query and key. Against the decoded
// keys the error is the query's rounding times the centred codes:
//   |score - scale * q.k| <= scale * sum_g |A_g| * d_g/2 * sum_i |u_i - m|   (+ float rounding).
//
// Codes are read in pieces of 64 elements (piece c: elements 64c .. 64c+63), one 64-byte vector:
// bytes 0..31 hold elements 64c .. 64c+31 and bytes 32..63 the next 32, so a group of 32 is one
// half of a piece and larger groups are whole pieces. 8-bit pieces are the row's bytes (+128 for
// TurboQuant); a 4-bit half holds its 16 packed bytes' low nibbles (the even elements), then their
// high nibbles (the odd ones). The query's codes are stored in the same order.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kvlm/backend/cpu/attention_kernels.h"
#include "kvlm/base/cpu_isa.h"
#include "kvlm/quant/kv_codec.h"

namespace kvlm::cpu {

inline constexpr int kCodePiece = 64;       // elements per piece
inline constexpr int kMaxCodeGroups = 16;   // groups per row: head_dim 512 in groups of 32

// How a codec's key rows read as codes; key_code_form() derives it.
struct KeyCodeForm {
  int bits = 0;             // 4 or 8
  int group = 0;            // G
  bool turbo = false;       // TurboQuant (else MLX affine)
  DType params = DType::kF16;  // dtype of the per-group parameters
  int head_dim = 0;
  int groups() const { return head_dim / group; }
  int pieces() const { return head_dim / kCodePiece; }
  size_t code_bytes() const { return size_t(head_dim) * size_t(bits) / 8; }  // before the parameters
};

// The form of codec's keys, or nullopt when they have none (passthrough, MLX affine 2/3/5/6 bits,
// TurboQuant k2/k5, head dims that are not a multiple of 64): those keep the decode path.
std::optional<KeyCodeForm> key_code_form(const KVCodec& codec);

// `rows` query heads of head_dim floats quantized for one key form, row after row.
struct QueryCodes {
  std::vector<int8_t> q;      // [rows, head_dim], piece order
  std::vector<float> d, sq;   // [rows, kMaxCodeGroups]: d_g and sq_g, zero past the groups
  std::vector<int32_t> base;  // [rows, kMaxCodeGroups]: -m * (the group's sum of qq)
  int64_t dim = 0;

  // One row's codes and its groups' d, sq and base.
  struct Head {
    const int8_t* q;
    const float *d, *sq;
    const int32_t* base;
  };
  Head head(int64_t row) const {
    const size_t at = size_t(row * kMaxCodeGroups);
    return {q.data() + row * dim, d.data() + at, sq.data() + at, base.data() + at};
  }
};

QueryCodes quantize_query_codes(const KeyCodeForm& form, const float* q, int64_t rows);

// A block of kKeyBlock key rows made ready for scoring, once for every query head that scores it.
struct KeyCodeBlock {
  const uint8_t* codes[kKeyBlock];  // piece-order codes of each key (the row, or in `bytes`)
  alignas(64) float a[kMaxCodeGroups][kKeyBlock];  // A_g of each key
  alignas(64) float b[kMaxCodeGroups][kKeyBlock];  // B_g of each key
  std::vector<uint8_t> bytes;                      // [kKeyBlock, head_dim] where rows are rewritten
};

// A row's codes in piece order (TurboQuant 8-bit and every 4-bit row; MLX affine 8-bit rows are
// piece order as they are), d bytes, in 64-bit words.
void rewrite_key_codes(const KeyCodeForm& form, const uint8_t* row, uint8_t* out);

// Fills `out` from key rows 0 .. count-1 (count <= kKeyBlock); the unused keys repeat row 0.
using PrepareKeysFn = void (*)(const KeyCodeForm& form, const uint8_t* const* rows, int count, KeyCodeBlock& out);
void prepare_key_codes_portable(const KeyCodeForm& form, const uint8_t* const* rows, int count, KeyCodeBlock& out);
// The same values with AVX-512 (a block's parameters widened 16 keys at a time).
void prepare_key_codes_avx512(const KeyCodeForm& form, const uint8_t* const* rows, int count, KeyCodeBlock& out);

// s[h*stride + r] = the score of key r of the block for query head `first + h` of q, h < heads,
// r < kKeyBlock (scores past the block's rows are computed and ignored by the caller).
using ScoreCodesFn = void (*)(const KeyCodeForm& form, const KeyCodeBlock& keys, const QueryCodes& q,
                              int64_t first, int heads, float scale, float* s, size_t stride);
void score_codes_portable(const KeyCodeForm& form, const KeyCodeBlock& keys, const QueryCodes& q,
                          int64_t first, int heads, float scale, float* s, size_t stride);
// AVX2 (vpmaddwd on codes widened to 16 bits); same bits as the portable kernel.
void score_codes_avx2(const KeyCodeForm& form, const KeyCodeBlock& keys, const QueryCodes& q,
                      int64_t first, int heads, float scale, float* s, size_t stride);
// AVX-512 F/BW/VL/DQ with VNNI (vpdpbusd); same bits as the portable kernel.
void score_codes_avx512(const KeyCodeForm& form, const KeyCodeBlock& keys, const QueryCodes& q,
                        int64_t first, int heads, float scale, float* s, size_t stride);
// The kernels of an ISA: AVX-512 needs VNNI too (else the AVX2 scoring kernel runs).
struct KeyCodeKernels {
  PrepareKeysFn prepare;
  ScoreCodesFn score;
};
KeyCodeKernels key_code_kernels(Isa isa);
KeyCodeKernels key_code_kernels();  // of cpu_isa()

// Values on the same path are decoded and accumulated as on the exact path, one fma per element
// and row, o_i = fma(w_r, v_{r,i}, o_i) (AttentionRowOps::accumulate).

// What attention_chunk needs to read one compressed codec's rows on the int8 path: the key form
// (absent for key codes without one) and its kernels.
struct CodePath {
  std::optional<KeyCodeForm> key;
  KeyCodeKernels kernels{};
};

// The path of codec: MLX affine and TurboQuant codecs have one, passthrough codecs nullopt.
std::optional<CodePath> code_path(const KVCodec& codec);

}  // namespace kvlm::cpu
