// gemv_cuda (see gemv.h).
#include "ops/cuda/gemv.h"

#include <cuda_bf16.h>

#include <climits>

#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kGemvWarps = 8;  // output rows per block
constexpr int kUnroll = 4;     // 16-byte loads in flight per lane

// Eight bf16 of a 16-byte word, as fp32.
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(p[i]);
    f[2 * i] = t.x, f[2 * i + 1] = t.y;
  }
}

// W's row streams once: no point keeping it in L1.
__device__ __forceinline__ uint4 load_stream(const uint16_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <int kRows, bool kVec>
__global__ void __launch_bounds__(32 * kGemvWarps) gemv_kernel(const uint16_t* x, int64_t ldx, const uint16_t* w,
                                                               int64_t n_out, int64_t n_in, const float* bias, void* y,
                                                               int64_t ldy, bool y_fp32) {
  const int lane = threadIdx.x % 32;
  const int64_t o = int64_t(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (o >= n_out) return;  // whole warps
  const uint16_t* wr = w + o * n_in;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  if (kVec) {  // n_in % 8 == 0, 16-byte aligned rows
    constexpr int kStep = 32 * 8;
    int64_t i = int64_t(lane) * 8;
    for (; i + (kUnroll - 1) * kStep < n_in; i += kUnroll * kStep) {
      uint4 wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = load_stream(wr + i + u * kStep);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float wf[8];
        unpack8(wv[u], wf);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float xf[8];
          unpack8(__ldg(reinterpret_cast<const uint4*>(x + r * ldx + i + u * kStep)), xf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r] = fmaf(wf[e], xf[e], acc[r]);
        }
      }
    }
    for (; i < n_in; i += kStep) {
      float wf[8];
      unpack8(load_stream(wr + i), wf);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float xf[8];
        unpack8(__ldg(reinterpret_cast<const uint4*>(x + r * ldx + i)), xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] = fmaf(wf[e], xf[e], acc[r]);
      }
    }
  } else {
    for (int64_t i = lane; i < n_in; i += 32) {
      const float wv = bf(wr, i);
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = fmaf(wv, bf(x, r * ldx + i), acc[r]);
    }
  }
  const float b = bias != nullptr ? bias[o] : 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float s = warp_sum(acc[r]) + b;
    if (lane == 0) {
      if (y_fp32) static_cast<float*>(y)[r * ldy + o] = s;
      else put_bf(static_cast<uint16_t*>(y), r * ldy + o, s);
    }
  }
}

template <int kRows>
void launch(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t n_out, int64_t n_in, const float* bias, void* y,
            int64_t ldy, bool y_fp32, bool vec, cudaStream_t stream) {
  const unsigned blocks = unsigned((n_out + kGemvWarps - 1) / kGemvWarps);
  if (vec)
    gemv_kernel<kRows, true><<<blocks, 32 * kGemvWarps, 0, stream>>>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32);
  else
    gemv_kernel<kRows, false><<<blocks, 32 * kGemvWarps, 0, stream>>>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32);
}

}  // namespace

cudaError_t gemv_cuda(const uint16_t* x, int64_t ldx, int rows, const uint16_t* w, int64_t n_out, int64_t n_in,
                      const float* bias, void* y, int64_t ldy, bool y_fp32, cudaStream_t stream) {
  if (rows < 0 || rows > kGemvMaxRows || n_out < 1 || n_in < 1 || ldx < n_in || ldy < n_out ||
      (n_out + kGemvWarps - 1) / kGemvWarps > INT_MAX)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || w == nullptr || y == nullptr) return cudaErrorInvalidValue;
  const bool vec = n_in % 8 == 0 && ldx % 8 == 0 && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w)) % 16 == 0;
  switch (rows) {
    case 1: launch<1>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32, vec, stream); break;
    case 2: launch<2>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32, vec, stream); break;
    case 3: launch<3>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32, vec, stream); break;
    case 4: launch<4>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32, vec, stream); break;
    case 5: launch<5>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32, vec, stream); break;
    case 6: launch<6>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32, vec, stream); break;
    case 7: launch<7>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32, vec, stream); break;
    default: launch<8>(x, ldx, w, n_out, n_in, bias, y, ldy, y_fp32, vec, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
