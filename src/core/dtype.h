// Element types of checkpoint tensors and their conversion to fp32.
//
// The CPU reference computes in fp32; checkpoints arrive as F32, BF16 or F16.
// Conversion is exact (every bf16/f16 value is representable in fp32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace replayssm {

enum class DType { kF32, kBF16, kF16 };

// Parses a safetensors dtype name ("F32", "BF16", "F16"); nullopt otherwise.
std::optional<DType> dtype_from_safetensors(std::string_view name);
const char* dtype_name(DType t);
size_t dtype_size(DType t);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);

// Converts n elements of type `t` at `src` (any alignment) into fp32 `dst`.
void convert_to_f32(DType t, const void* src, size_t n, float* dst);

}  // namespace replayssm
