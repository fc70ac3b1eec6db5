// The conv1d kernels' per-channel arithmetic (conv1d.cu), shared with the
// Mamba2 step that runs the conv and the log append as one kernel
// (mamba2_conv_append.cu): the terms summed in the CPU's order (bias, then
// oldest row first), so both produce the same bits.
#pragma once

#include <cuda_runtime.h>

#include "ops/cuda/conv1d.h"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

constexpr int kConvThreads = 128;

// silu(bias + Σ_{j<K−1} w[j]·prev[j] + w[K−1]·newest); prev[0] is the oldest.
__device__ __forceinline__ float conv_out(const float* wc, float bias, const float (&prev)[kConvMaxK], float newest,
                                          int K) {
  float acc = bias;
#pragma unroll
  for (int j = 0; j < kConvMaxK - 1; ++j)
    if (j < K - 1) acc += wc[j] * prev[j];
  acc += wc[K - 1] * newest;
  return silu_f(acc);
}

// prev ← prev[1..K−2], newest.
__device__ __forceinline__ void conv_shift(float (&prev)[kConvMaxK], float newest, int K) {
#pragma unroll
  for (int j = 0; j < kConvMaxK - 1; ++j) {
    if (j < K - 2) prev[j] = prev[j + 1];
    if (j == K - 2) prev[j] = newest;
  }
}

// The window update needs neither weights nor outputs.
inline cudaError_t conv1d_check(const Conv1dArgs& a, bool window_only = false) {
  if (a.batch < 0 || a.C < 1 || a.K < 1 || a.K > kConvMaxK || a.x == nullptr || a.ldx < a.C ||
      a.batch > 65535 ||  // grid y / z
      (!window_only && (a.weight == nullptr || a.y == nullptr || a.ldy < a.C)) ||
      (a.K > 1 && (a.window == nullptr || a.slot == nullptr)))
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

// Decode: sequence b's new row (row b of x) at channel c. Returns the
// post-conv value as bf16 bits and shifts the window in place (it is bf16
// like x: shifted bit for bit).
__device__ __forceinline__ uint16_t conv_step_channel(const Conv1dArgs& a, int c, int b) {
  const int K = a.K;
  // K = 1 has no window (window and slot may be nullptr).
  uint16_t* win = K > 1 ? a.window + int64_t(a.slot[b]) * (K - 1) * a.C + c : nullptr;
  float prev[kConvMaxK] = {};
#pragma unroll
  for (int j = 0; j < kConvMaxK - 1; ++j)
    if (j < K - 1) prev[j] = bf(win, int64_t(j) * a.C);
  const uint16_t xb = a.x[int64_t(b) * a.ldx + c];
  const float out = conv_out(a.weight + int64_t(c) * K, a.bias ? a.bias[c] : 0.0f, prev, bf(&xb, 0), K);
  for (int j = 0; j + 1 < K - 1; ++j) win[int64_t(j) * a.C] = win[int64_t(j + 1) * a.C];
  if (K > 1) win[int64_t(K - 2) * a.C] = xb;
  return __bfloat16_as_ushort(__float2bfloat16(out));
}

}  // namespace replayssm::ops::cuda
