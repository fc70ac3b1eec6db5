// rope (see rope.h): one thread per (row, head, pair); the two elements of
// a pair are read and written by the same thread, so in place is safe.
#include "ops/cuda/rope.h"

#include <algorithm>
#include <cmath>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kRopeThreads = 256;

__global__ void __launch_bounds__(kRopeThreads) rope_kernel(uint16_t* x, int64_t ldx, int64_t head_stride,
                                                            int64_t rows, int heads, int half, const float* inv_freq,
                                                            const int32_t* pos) {
  pdl_begin();
  const int64_t total = rows * heads * half;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += int64_t(gridDim.x) * blockDim.x) {
    const int i = int(k % half);
    const int64_t rh = k / half, r = rh / heads, h = rh % heads;
    const float f = static_cast<float>(pos[r]) * inv_freq[i];
    const float c = cosf(f), s = sinf(f);
    uint16_t* xh = x + r * ldx + h * head_stride;
    const float a = bf(xh, i), b = bf(xh, i + half);
    put_bf(xh, i, a * c - b * s);
    put_bf(xh, i + half, b * c + a * s);
  }
}

}  // namespace

std::vector<float> rope_inv_freq(int rot_dim, float theta) {
  std::vector<float> f(rot_dim > 0 ? rot_dim / 2 : 0);
  for (int i = 0; i < rot_dim / 2; ++i)
    f[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rot_dim));
  return f;
}

cudaError_t rope_cuda(uint16_t* x, int64_t ldx, int64_t head_stride, int64_t rows, int heads, int rot_dim,
                      const float* inv_freq, const int32_t* pos, cudaStream_t stream) {
  if (rows < 0 || heads < 1 || rot_dim < 0 || rot_dim % 2 != 0 || rot_dim > head_stride ||
      ldx < heads * head_stride || x == nullptr || (rot_dim > 0 && (inv_freq == nullptr || pos == nullptr)))
    return cudaErrorInvalidValue;
  if (rows == 0 || rot_dim == 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((rows * heads * (rot_dim / 2) + kRopeThreads - 1) / kRopeThreads, 65536);
  launch_kernel(rope_kernel, unsigned(blocks), kRopeThreads, 0, stream, x, ldx, head_stride, rows, heads, rot_dim / 2,
                inv_freq, pos);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
