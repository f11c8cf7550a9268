#pragma once
// Element types and their traits. Per-type behaviour lives in one table (dtype_traits), in the
// manner of ggml's type_traits, so adding a type touches one place.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvlm {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kU32, kU8, kI64, kCount };

struct DTypeTraits {
  const char* name;             // kvlm's own spelling, used in messages
  const char* safetensors_tag;  // spelling in a safetensors header
  size_t size;                  // bytes per element
  bool is_float;
};

const DTypeTraits& dtype_traits(DType t);
inline size_t dtype_size(DType t) { return dtype_traits(t).size; }
inline const char* dtype_name(DType t) { return dtype_traits(t).name; }

// Parses a safetensors dtype tag ("F32", "BF16", ...); returns false if kvlm does not support it.
bool dtype_from_safetensors(std::string_view tag, DType* out);
// Parses kvlm's own spelling ("f32", "bf16", ...) as used on the command line.
bool dtype_from_name(std::string_view name, DType* out);

}  // namespace kvlm
