// Rotary position embedding on CUDA: the first rot_dim dims of each head
// (partial rotary; Qwen3.5 rotates a quarter of its head), rotate-half
// convention, the math of ops/cpu/rope.h: for i < rot_dim/2,
//   x_i' = x_i·cos − x_{i+r/2}·sin ;  x_{i+r/2}' = x_{i+r/2}·cos + x_i·sin,
// angle = pos·inv_freq[i] in fp32.
//
// The frequencies are computed once on the host by the CPU's expression
// (rope_inv_freq) and passed in: a device powf may differ from the host's
// by an ulp, which at position 30,000 is a visible angle error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace replayssm::ops::cuda {

// inv_freq[i] = 1 / theta^(2i/rot_dim), i < rot_dim/2, exactly as ops/cpu/rope.cpp.
std::vector<float> rope_inv_freq(int rot_dim, float theta);

// x: (rows, heads) head vectors of bf16, head h of row r at
// x + r·ldx + h·head_stride (q inside Qwen3.5's [query | gate] q_proj rows:
// head_stride = 2·D), rotated in place. pos: (rows) each row's position.
// inv_freq: (rot_dim/2) on the device. rot_dim even, ≤ head_stride.
cudaError_t rope_cuda(uint16_t* x, int64_t ldx, int64_t head_stride, int64_t rows, int heads, int rot_dim,
                      const float* inv_freq, const int32_t* pos, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
