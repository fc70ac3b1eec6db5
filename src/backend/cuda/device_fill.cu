// fill_uniform_bf16, fill_uniform_f32 (see device_fill.h).
#include "backend/cuda/device_fill.h"

#include <cuda_bf16.h>

namespace replayssm::cuda {

namespace {

// splitmix64's finaliser: a bijective mix, good enough for weights.
__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Element i of stream `seed`, uniform in [0, 1).
__device__ __forceinline__ float unit(uint64_t seed, int64_t i) {
  return float(mix(seed + 0x9e3779b97f4a7c15ull * uint64_t(i + 1)) >> 40) * (1.0f / 16777216.0f);
}

__global__ void fill_uniform_kernel(__nv_bfloat16* out, int64_t n, float bound, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16((2.0f * unit(seed, i) - 1.0f) * bound);
}

__global__ void fill_uniform_f32_kernel(float* out, int64_t n, float lo, float hi, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = lo + (hi - lo) * unit(seed, i);
}

unsigned fill_blocks(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return unsigned(blocks < 8192 ? blocks : 8192);
}

}  // namespace

cudaError_t fill_uniform_bf16(uint16_t* out, int64_t n, float bound, uint64_t seed, cudaStream_t stream) {
  if (n < 0 || (n > 0 && out == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_uniform_kernel<<<fill_blocks(n), 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), n, bound, seed);
  return cudaGetLastError();
}

cudaError_t fill_uniform_f32(float* out, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream) {
  if (n < 0 || (n > 0 && out == nullptr) || !(lo <= hi)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_uniform_f32_kernel<<<fill_blocks(n), 256, 0, stream>>>(out, n, lo, hi, seed);
  return cudaGetLastError();
}

}  // namespace replayssm::cuda
