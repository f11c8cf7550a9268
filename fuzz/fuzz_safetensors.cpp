// Fuzzes the safetensors header parser with arbitrary file images. The contract under test: any
// byte string either parses into entries that lie inside the image with sizes matching their
// shapes, or throws kvlm::Error; it never crashes, reads out of bounds or throws anything else.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "kvlm/base/error.h"
#include "kvlm/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const kvlm::SafetensorsHeader h = kvlm::parse_safetensors(data, size, "fuzz");
    for (const kvlm::SafetensorsEntry& e : h.tensors) {
      const bool inside = e.offset >= h.data_start && e.offset <= size && e.nbytes <= size - e.offset;
      const bool sized = uint64_t(kvlm::shape_numel(e.shape)) * kvlm::dtype_size(e.dtype) == e.nbytes;
      if (!inside || !sized) std::abort();
      // Touch the first and last byte so ASan checks the range really is inside the image.
      if (e.nbytes) {
        volatile uint8_t first = data[e.offset], last = data[e.offset + e.nbytes - 1];
        (void)first;
        (void)last;
      }
    }
  } catch (const kvlm::Error&) {
  }
  return 0;
}
