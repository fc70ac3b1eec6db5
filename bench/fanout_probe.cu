// Write-heavy bandwidth probe for the decode benchmark: one read and
// `copies` writes — the traffic of the standard speculative verify, which
// reads a state and writes one per draft (T = 4: a fifth of the bytes
// read, four fifths written). The copy bandwidth is half reads, half
// writes; a write-heavy mix reaches another figure on HBM, and that
// figure, not the copy's, is the standard verify's floor.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda_bench.h"  // beside this file

namespace replayssm::bench {

namespace {

// Each thread reads 4 float4s a round (all in flight) and writes each to
// every copy; copy c of element i lives at dst + c·n + i.
template <int kCopies>
__global__ void fanout_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = src[i + k * stride];
#pragma unroll
    for (int c = 0; c < kCopies; ++c)
#pragma unroll
      for (int k = 0; k < 4; ++k) dst[size_t(c) * n + i + k * stride] = v[k];
  }
  for (; i < n; i += stride) {
    const float4 v = src[i];
#pragma unroll
    for (int c = 0; c < kCopies; ++c) dst[size_t(c) * n + i] = v;
  }
}

}  // namespace

cudaError_t fanout_copy(const void* src, void* dst, size_t bytes, int copies, int sms) {
  auto go = [&](auto kernel) {
    kernel<<<sms * 8, 256>>>(static_cast<const float4*>(src), static_cast<float4*>(dst), bytes / 16);
    return cudaGetLastError();
  };
  return copies == 4 ? go(fanout_kernel<4>) : cudaErrorInvalidValue;  // the bench's T
}

}  // namespace replayssm::bench
