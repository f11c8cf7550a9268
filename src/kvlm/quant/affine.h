#pragma once
// MLX affine quantization: the weight and KV format of MLX checkpoints.
//
// A row of `cols` values is cut into groups of `group_size` consecutive values. Each group stores
// a scale and a bias (in the model dtype) and one `bits`-bit code per value, so that
//   value ~= scale * code + bias.
// Codes are packed as one little-endian bit stream per row: code i occupies bits
// [i*bits, (i+1)*bits) of the row's bytes, least significant bit first. For bits 2, 4 and 8 this
// is "32/bits codes per uint32, low bits first"; for 3, 5 and 6 it is MLX's 3-, 5- and 3-byte
// packs of 8, 8 and 4 codes, which are the same bit stream.
//
// The quantize rule is MLX's GPU kernel (Metal and CUDA, which agree), which is what produced
// nearly every MLX checkpoint in circulation; affine.cpp states the rule and how MLX's CPU
// backend differs from it.
#include <cstdint>

#include "kvlm/tensor/dtype.h"
#include "kvlm/tensor/tensor.h"

namespace kvlm {

struct AffineSpec {
  int bits = 4;
  int group_size = 64;
};

// bits 2, 3, 4, 5, 6, 8; group_size 32, 64, 128.
bool affine_spec_supported(const AffineSpec& s);
// Throws Error("<what>: unsupported MLX quantization bits=B group_size=G ...") unless supported.
void check_affine_spec(const AffineSpec& s, const std::string& what);

// uint32 words per row of `cols` values (MLX layout); cols*bits must be a multiple of 32.
int64_t affine_packed_words(int64_t cols, int bits);

// Quantizes one row of `cols` values (cols % group_size == 0) with MLX's rule. The inputs should
// already be representable in `param_dtype` (MLX quantizes the weight in the model dtype).
// scales/biases receive cols/group_size values, already rounded to `param_dtype` (bf16/f16/f32)
// because that is what MLX stores; the codes are computed, as in MLX, from the f32 scale and bias
// before that rounding.
void affine_quantize_row(const float* x, int64_t cols, const AffineSpec& s, DType param_dtype,
                         uint32_t* packed, float* scales, float* biases);

// out[i] = scales[g] * q[i] + biases[g], g = i / group_size.
void affine_dequantize_row(const uint32_t* packed, const float* scales, const float* biases,
                           int64_t cols, const AffineSpec& s, float* out);

// The integer code i of a packed row.
uint32_t affine_code(const uint32_t* packed, int64_t i, int bits);
// Stores code `q` (< 2^bits) at position i of a packed row; the other codes are untouched.
void affine_set_code(uint32_t* packed, int64_t i, int bits, uint32_t q);

// A quantized matrix as MLX stores it: weight u32[rows, cols*bits/32], scales and biases
// [rows, cols/group_size] in the parameter dtype.
struct AffineWeight {
  Tensor packed, scales, biases;
  AffineSpec spec;
};

// Quantizes a 2-D float tensor (f32/f16/bf16, rows contiguous) row by row. The input is first
// rounded to `param_dtype`, as MLX quantizes the weight after casting it to the model dtype.
AffineWeight affine_quantize(const Tensor& w, const AffineSpec& s, DType param_dtype);
// Dequantizes to an f32 tensor [rows, cols]; checks that the three shapes agree with `s`.
Tensor affine_dequantize(const AffineWeight& w);
// The unpacked column count implied by a packed tensor, checking shapes and dtypes against `s`;
// throws Error("<what>: ...") on any mismatch.
int64_t affine_check_shapes(const Tensor& packed, const Tensor& scales, const Tensor& biases,
                            const AffineSpec& s, const std::string& what);

}  // namespace kvlm
