// How rownorm_kernel (norm.cu) sums a row, shared with the GEMV that
// normalises the residual stream in its last block (gemv.h, GemvEpilogue):
// the same fp32 additions in the same order, so a step whose out
// projection carries the next block's norm gives the bits of the step that
// runs the norm as its own kernel — the fused path changes no token.
//
// rownorm_kernel's order for a group of n elements:
//   n ≤ kWarpGroupMax                     — one warp, lane l summing l, l+32, …,
//                                           then the warp's butterfly;
//   n > kWarpGroupMax, few groups         — a block of kNormThreadsWide: thread t
//     (< kWideBelowGroups)                  summing t, t+1024, …, each warp's
//                                           butterfly, then the 32 warp sums in
//                                           order;
//   otherwise                             — the same over kNormThreads.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

constexpr int kNormThreads = 256;
constexpr int kNormThreadsWide = 1024;     // few long groups (decode at small batch): one wide block each
constexpr int64_t kWarpGroupMax = 512;     // groups up to this long are reduced by one warp
constexpr int64_t kWideBelowGroups = 256;  // fewer groups than this leave most SMs idle

// y[r] = bf16(w'·(h[r]·inv)), inv = 1/sqrt(mean(h[r]²) + eps), for r < rows,
// by the whole calling block of kThreads (a multiple of 32 dividing
// kNormThreadsWide), in rownorm_kernel's order for `rows` groups of n
// (rows < kWideBelowGroups). h is read through L2 (ld.cg): other blocks of
// the grid wrote it. red: kMaxBlockWarps floats of shared memory. Every
// thread of the block must call it.
//
// A thread's elements are loaded at once and kept in registers (up to
// kNormHold, n ≤ kNormHold·kThreads): one L2 round trip per row instead of
// a chain of dependent loads, which at the end of a GEMV would sit on the
// step's critical path. Longer rows take the same sums in a loop.
constexpr int kNormHold = 32;

template <int kThreads>
__device__ inline void residual_norm_rows(const float* h, int64_t ldh, int rows, int n, const float* w,
                                          bool unit_offset, float eps, uint16_t* y, int64_t ldy, float* red) {
  static_assert(kThreads % 32 == 0 && kNormThreadsWide % kThreads == 0, "a block that divides the wide norm's");
  const int t = threadIdx.x, lane = t % 32;
  auto weight = [&](int i) { return w == nullptr ? 1.0f : unit_offset ? 1.0f + w[i] : w[i]; };
  if (n <= kWarpGroupMax) {  // a warp per row: lane l holds l, l + 32, …
    constexpr int kLane = int(kWarpGroupMax) / 32;
    for (int r = t / 32; r < rows; r += kThreads / 32) {
      const float* hr = h + r * ldh;
      float v[kLane];
#pragma unroll
      for (int m = 0; m < kLane; ++m) v[m] = lane + 32 * m < n ? __ldcg(hr + lane + 32 * m) : 0.0f;
      float ss = 0.0f;
#pragma unroll
      for (int m = 0; m < kLane; ++m)
        if (lane + 32 * m < n) ss += v[m] * v[m];
      ss = warp_sum(ss);
      const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
#pragma unroll
      for (int m = 0; m < kLane; ++m) {
        const int i = lane + 32 * m;
        if (i < n) put_bf(y, r * ldy + i, weight(i) * (v[m] * inv));
      }
    }
    return;
  }
  // A virtual block of kNormThreadsWide: thread t plays t + j·kThreads for
  // j < kPer; virtual thread vt sums vt, vt + 1024, … = t + (j + k·kPer)·kThreads.
  constexpr int kPer = kNormThreadsWide / kThreads;
  for (int r = 0; r < rows; ++r) {
    const float* hr = h + r * ldh;
    if (n <= kNormHold * kThreads) {
      float v[kNormHold];
#pragma unroll
      for (int m = 0; m < kNormHold; ++m) v[m] = t + m * kThreads < n ? __ldcg(hr + t + m * kThreads) : 0.0f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        float ss = 0.0f;
#pragma unroll
        for (int k = 0; k < kNormHold / kPer; ++k) {
          const int m = j + k * kPer;
          if (t + m * kThreads < n) ss += v[m] * v[m];
        }
        ss = warp_sum(ss);
        if (lane == 0) red[(t + j * kThreads) / 32] = ss;
      }
      __syncthreads();
      float s = 0.0f;
      for (int i = 0; i < kNormThreadsWide / 32; ++i) s += red[i];
      const float inv = 1.0f / sqrtf(s / static_cast<float>(n) + eps);
      __syncthreads();  // every thread has read red before the next row writes it
#pragma unroll
      for (int m = 0; m < kNormHold; ++m) {
        const int i = t + m * kThreads;
        if (i < n) put_bf(y, r * ldy + i, weight(i) * (v[m] * inv));
      }
      continue;
    }
    for (int vt = t; vt < kNormThreadsWide; vt += kThreads) {
      float ss = 0.0f;
      for (int i = vt; i < n; i += kNormThreadsWide) {
        const float v = __ldcg(hr + i);
        ss += v * v;
      }
      ss = warp_sum(ss);
      if (lane == 0) red[vt / 32] = ss;
    }
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < kNormThreadsWide / 32; ++i) s += red[i];
    const float inv = 1.0f / sqrtf(s / static_cast<float>(n) + eps);
    __syncthreads();
    for (int i = t; i < n; i += kThreads) put_bf(y, r * ldy + i, weight(i) * (__ldcg(hr + i) * inv));
  }
}

}  // namespace replayssm::ops::cuda
