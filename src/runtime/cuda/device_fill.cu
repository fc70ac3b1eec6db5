// fill_uniform_bf16 (see device_fill.h).
#include "runtime/cuda/device_fill.h"

#include <cuda_bf16.h>

namespace replayssm::cuda {

namespace {

// splitmix64's finaliser: a bijective mix, good enough for weights.
__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_uniform_kernel(__nv_bfloat16* out, int64_t n, float bound, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = mix(seed + 0x9e3779b97f4a7c15ull * uint64_t(i + 1));
    const float u = float(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = __float2bfloat16((2.0f * u - 1.0f) * bound);
  }
}

}  // namespace

cudaError_t fill_uniform_bf16(uint16_t* out, int64_t n, float bound, uint64_t seed, cudaStream_t stream) {
  if (n < 0 || (n > 0 && out == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  fill_uniform_kernel<<<unsigned(blocks < 8192 ? blocks : 8192), 256, 0, stream>>>(
      reinterpret_cast<__nv_bfloat16*>(out), n, bound, seed);
  return cudaGetLastError();
}

}  // namespace replayssm::cuda
