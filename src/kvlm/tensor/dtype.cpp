#include "kvlm/tensor/dtype.h"

namespace kvlm {
namespace {

constexpr DTypeTraits kTraits[] = {
    {"f32", "F32", 4, true},  {"f16", "F16", 2, true}, {"bf16", "BF16", 2, true},
    {"i32", "I32", 4, false}, {"u32", "U32", 4, false}, {"u8", "U8", 1, false},
    {"i64", "I64", 8, false},
};
static_assert(sizeof(kTraits) / sizeof(kTraits[0]) == size_t(DType::kCount));

}  // namespace

const DTypeTraits& dtype_traits(DType t) { return kTraits[size_t(t)]; }

bool dtype_from_safetensors(std::string_view tag, DType* out) {
  for (size_t i = 0; i < size_t(DType::kCount); ++i)
    if (tag == kTraits[i].safetensors_tag) return *out = DType(i), true;
  return false;
}

bool dtype_from_name(std::string_view name, DType* out) {
  for (size_t i = 0; i < size_t(DType::kCount); ++i)
    if (name == kTraits[i].name) return *out = DType(i), true;
  return false;
}

}  // namespace kvlm
