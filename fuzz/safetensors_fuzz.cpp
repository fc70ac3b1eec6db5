// Fuzzes the safetensors reader: the input is a whole file (u64 header
// length, JSON header, data), checked as SafetensorsFile::open checks a
// mapped one. When it is accepted, every tensor must lie inside the input
// and hold exactly its shape's bytes, and the loadable ones are converted to
// fp32 as the model loader does, so that a bad offset reads out of bounds
// under the address sanitizer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace replayssm;
  auto r = SafetensorsFile::parse(std::span<const uint8_t>(data, size), "fuzz.safetensors");
  if (!r.ok()) return 0;
  size_t total = 0;
  for (const auto& [name, t] : *r) {
    if (t.data < data || t.nbytes > size || t.data + t.nbytes > data + size) std::abort();
    total += t.nbytes;
    if (!t.dtype) continue;
    const int64_t n = t.numel();
    if (n < 0 || static_cast<uint64_t>(n) * dtype_size(*t.dtype) != t.nbytes) std::abort();
    std::vector<float> out(static_cast<size_t>(n));
    convert_to_f32(*t.dtype, t.data, out.size(), out.data());
  }
  if (total > size) std::abort();
  return 0;
}
