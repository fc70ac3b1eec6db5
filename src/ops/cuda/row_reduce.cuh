// Device helpers of the row kernels (norms, argmax, GDN prepare): sums and
// an index-stable argmax over a warp or a whole block, SiLU and sigmoid
// written as the CPU reference writes them (ops/cpu/activation.h). The SSM
// kernels' helpers (bf16 access, warp_sum) are in tile.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

constexpr int kMaxBlockWarps = 32;

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

// Sum of v over the whole block (blockDim.x a multiple of 32); every thread
// gets it. red: kMaxBlockWarps floats of shared memory, free to reuse after.
__device__ inline float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int nw = blockDim.x / 32;
  if (nw == 1) return v;
  __syncthreads();  // a previous call's readers are done with red
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float s = 0.0f;
  for (int i = 0; i < nw; ++i) s += red[i];
  return s;
}

// As block_sum, in fp64. red: kMaxBlockWarps doubles.
__device__ inline double block_sum_f64(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  double s = 0.0;
  for (int w = 0; w < int(blockDim.x / 32); ++w) s += red[w];
  return s;
}

// (value, index) with the CPU's order: larger value first, then lower index
// (ops: argmax keeps the first maximum). NaN never wins.
__device__ __forceinline__ bool argmax_better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}
__device__ inline void warp_argmax(float& v, int32_t& i) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (argmax_better(ov, oi, v, i)) v = ov, i = oi;
  }
}
// Over the whole block; every thread gets the result. rv, ri: kMaxBlockWarps
// entries of shared memory each.
__device__ inline void block_argmax(float& v, int32_t& i, float* rv, int32_t* ri) {
  warp_argmax(v, i);
  const int nw = blockDim.x / 32;
  if (nw == 1) return;
  __syncthreads();
  if (threadIdx.x % 32 == 0) rv[threadIdx.x / 32] = v, ri[threadIdx.x / 32] = i;
  __syncthreads();
  v = rv[0], i = ri[0];
  for (int w = 1; w < nw; ++w)
    if (argmax_better(rv[w], ri[w], v, i)) v = rv[w], i = ri[w];
}

}  // namespace replayssm::ops::cuda
