// Dtype names and conversion loops (see dtype.h).
#include "core/dtype.h"

namespace replayssm {

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  return std::nullopt;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
  }
  return "?";
}

size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalise the mantissa into an fp32 normal.
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void convert_to_f32(DType t, const void* src, size_t n, float* dst) {
  if (n == 0) return;  // dst may be null (an empty vector's data()); memcpy must not see it
  const auto* b = static_cast<const unsigned char*>(src);
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
  }
}

}  // namespace replayssm
