// conv1d (see conv1d.h). A thread owns one channel of one sequence and
// keeps the K−1 rows before the current one in registers (arrays sized
// kConvMaxK, indexed by unrolled loops so they stay registers). Loads and
// stores are coalesced across the warp's channels. The terms are summed in
// the CPU's order (bias, then oldest row first). The kernels' kPaged
// instances take those K−1 rows from a paged log (Conv1dArgs::log_rows)
// and leave the window alone; the contiguous ones are as they were.
#include "ops/cuda/conv1d.h"
#include "ops/cuda/conv1d.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kConvChunk = 16;  // prefill rows per thread

// kVec channels a thread: 1, or kConvVec (conv_step_channels) where the rows
// are aligned for it and the batch fills the GPU (conv1d_step_vec).
template <int kVec, bool kPaged>
__global__ void __launch_bounds__(kConvThreads) conv1d_step_kernel(ConvArgsT<kPaged> a) {
  pdl_begin();
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * kVec, b = blockIdx.y;
  if (c >= a.C) return;
  if constexpr (kVec > 1) {
    static_assert(kVec == kConvVec, "conv_step_channels' width");
    uint32_t v;
    conv_step_channels<kPaged>(a, c, b, v);
    *reinterpret_cast<uint32_t*>(a.y + int64_t(b) * a.ldy + c) = v;
  } else {
    a.y[int64_t(b) * a.ldy + c] = conv_step_channel<kPaged>(a, c, b);
  }
}

template <bool kPaged>
__global__ void __launch_bounds__(kConvThreads) conv1d_prefill_kernel(ConvArgsT<kPaged> a) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.z, K = a.K;
  const int64_t r0 = a.cu_rows[b], n = a.cu_rows[b + 1] - r0, t0 = int64_t(blockIdx.y) * kConvChunk;
  if (c >= a.C || t0 >= n) return;
  const uint16_t* win = !kPaged && K > 1 ? a.window + int64_t(a.slot[b]) * (K - 1) * a.C + c : nullptr;
  // Virtual row v of [window; x]: v < K−1 is the window, else x row v − (K−1).
  // Output t reads virtual rows t .. t+K−1; the chunk starts with t0 .. t0+K−2.
  float prev[kConvMaxK] = {};
  if constexpr (kPaged) {
    // The window's row v: offset n_logged − (K−1) + v from the base.
    PagedWindow pw{};
    int d0 = 0;
    if (K > 1 && t0 < K - 1) {  // the chunk starts inside the window (block-uniform)
      pw = paged_window(a, b);
      d0 = a.n_logged[b] - (K - 1);
    }
#pragma unroll
    for (int j = 0; j < kConvMaxK - 1; ++j) {
      const int64_t v = t0 + j;
      if (j >= K - 1) continue;
      if (v >= K - 1) {
        prev[j] = bf(a.x, (r0 + v - (K - 1)) * a.ldx + c);
      } else if (const uint16_t* r = pw.row(a, d0 + int(v)); r != nullptr) {
        prev[j] = bf(r, c);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kConvMaxK - 1; ++j) {
      const int64_t v = t0 + j;
      if (j < K - 1) prev[j] = v < K - 1 ? bf(win, v * a.C) : bf(a.x, (r0 + v - (K - 1)) * a.ldx + c);
    }
  }
  const float* wc = a.weight + int64_t(c) * K;
  const float bias = a.bias ? a.bias[c] : 0.0f;
  const int64_t t1 = min(n, t0 + kConvChunk);
  for (int64_t t = t0; t < t1; ++t) {
    const float x = bf(a.x, (r0 + t) * a.ldx + c);
    put_bf(a.y, (r0 + t) * a.ldy + c, conv_out(wc, bias, prev, x, K));
    conv_shift(prev, x, K);
  }
}

// New window row r = virtual row n + r. Ascending r reads rows ahead of the
// ones it writes, so the update is in place per thread.
__global__ void __launch_bounds__(kConvThreads) conv1d_window_kernel(Conv1dWindowArgs a) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y, K = a.K;
  const int64_t r0 = a.cu_rows[b], n = a.n_rows != nullptr ? a.n_rows[b] : a.cu_rows[b + 1] - r0;
  if (c >= a.C || n <= 0) return;
  uint16_t* win = a.window + int64_t(a.slot[b]) * (K - 1) * a.C + c;
  for (int r = 0; r < K - 1; ++r) {
    const int64_t v = n + r;
    win[int64_t(r) * a.C] = v < K - 1 ? win[v * a.C] : a.x[(r0 + v - (K - 1)) * a.ldx + c];
  }
}

// The paged window before position base + n_upto[b] into out_slot[b]'s
// window (conv1d_gather_window_cuda), a thread per (channel, sequence):
// copied as bits, zeros where the checkpoint is position 0's.
__global__ void __launch_bounds__(kConvThreads) conv1d_gather_window_kernel(Conv1dArgs a, const int32_t* n_upto,
                                                                            uint16_t* out, const int32_t* out_slot) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y, K = a.K;
  if (c >= a.C || out_slot[b] < 0) return;
  const PagedWindow pw = paged_window(a, b);
  const int d0 = n_upto[b] - (K - 1);  // the oldest row's offset from the base
  uint16_t* dst = out + int64_t(out_slot[b]) * (K - 1) * a.C + c;
  for (int j = 0; j < K - 1; ++j) {
    const uint16_t* r = pw.row(a, d0 + j);
    dst[int64_t(j) * a.C] = r != nullptr ? r[c] : uint16_t(0);
  }
}

}  // namespace

cudaError_t conv1d_step_cuda(const Conv1dArgs& a, cudaStream_t stream) {
  if (cudaError_t e = conv1d_check(a); e != cudaSuccess) return e;
  if (a.batch == 0) return cudaSuccess;
  bool vec = false;
  if (cudaError_t e = conv1d_step_vec(a, &vec); e != cudaSuccess) return e;
  const int per_block = kConvThreads * (vec ? kConvVec : 1);
  const dim3 grid((a.C + per_block - 1) / per_block, a.batch);
  if (a.log_rows != nullptr)
    launch_kernel(vec ? conv1d_step_kernel<kConvVec, true> : conv1d_step_kernel<1, true>, grid, kConvThreads, 0, stream,
                  a);
  else
    launch_kernel(vec ? conv1d_step_kernel<kConvVec, false> : conv1d_step_kernel<1, false>, grid, kConvThreads, 0,
                  stream, a);
  return cudaGetLastError();
}

cudaError_t conv1d_prefill_cuda(const Conv1dArgs& a, cudaStream_t stream) {
  if (cudaError_t e = conv1d_check(a); e != cudaSuccess) return e;
  if (a.cu_rows == nullptr || a.max_rows < 0 || a.y == a.x) return cudaErrorInvalidValue;
  if (a.batch == 0 || a.max_rows == 0) return cudaSuccess;
  const unsigned cb = (a.C + kConvThreads - 1) / kConvThreads, chunks = (a.max_rows + kConvChunk - 1) / kConvChunk;
  if (chunks > 65535) return cudaErrorInvalidValue;
  const bool paged = a.log_rows != nullptr;
  if (paged) launch_kernel(conv1d_prefill_kernel<true>, dim3(cb, chunks, a.batch), kConvThreads, 0, stream, a);
  else launch_kernel(conv1d_prefill_kernel<false>, dim3(cb, chunks, a.batch), kConvThreads, 0, stream, a);
  // Paged, there is no window to update: the rows are logged by the caller.
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || a.K == 1 || a.keep_window || paged) return e;
  launch_kernel(conv1d_window_kernel, dim3(cb, a.batch), kConvThreads, 0, stream, a);
  return cudaGetLastError();
}

cudaError_t conv1d_window_cuda(const Conv1dArgs& a, cudaStream_t stream) {
  if (cudaError_t e = conv1d_check(a, true); e != cudaSuccess) return e;
  if (a.cu_rows == nullptr) return cudaErrorInvalidValue;
  if (a.batch == 0 || a.K == 1) return cudaSuccess;
  launch_kernel(conv1d_window_kernel, dim3((a.C + kConvThreads - 1) / kConvThreads, a.batch), kConvThreads, 0, stream,
                a);
  return cudaGetLastError();
}

cudaError_t conv1d_gather_window_cuda(const Conv1dArgs& a, const int32_t* n_upto, uint16_t* out_window,
                                      const int32_t* out_slot, cudaStream_t stream) {
  if (a.batch < 0 || a.batch > 65535 || a.C < 1 || a.K < 1 || a.K > kConvMaxK) return cudaErrorInvalidValue;
  if (a.batch == 0 || a.K == 1) return cudaSuccess;
  if (a.log_rows == nullptr || !conv1d_paged_ok(a) || n_upto == nullptr || out_window == nullptr ||
      out_slot == nullptr)
    return cudaErrorInvalidValue;
  launch_kernel(conv1d_gather_window_kernel, dim3((a.C + kConvThreads - 1) / kConvThreads, a.batch), kConvThreads, 0,
                stream, a, n_upto, out_window, out_slot);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
