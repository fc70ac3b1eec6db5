// Mamba2 decode kernels (see mamba2_decode.h).
//
// One block per (head, sequence), four warps; a warp owns whole rows p of
// the head's (P, N) state, its lanes stride over n with 16-byte loads when N
// is a multiple of 128, so every state byte moves once, coalesced. These are
// memory-bound: the state read (and, for the standard step, write) is the
// cost; everything else is small.
#include <cuda_bf16.h>

#include "ops/cuda/mamba2_decode.h"

namespace replayssm::ops::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxN = 256;  // shared-memory rows of B and C
constexpr int kMaxW = 64;

__device__ __forceinline__ float bf(const uint16_t* p, int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}

__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float head_dt(const Mamba2DecodeArgs& a, int b, int h) {
  const float dt = softplus_f(a.dt_raw[b * a.H + h] + a.dt_bias[h]);
  return fminf(fmaxf(dt, a.dt_min), a.dt_max);
}

template <bool kVec>
__global__ void step_kernel(Mamba2DecodeArgs a) {
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  __shared__ float sB[kMaxN], sC[kMaxN];
  for (int n = threadIdx.x; n < a.N; n += blockDim.x) {
    sB[n] = bf(a.Bm, (int64_t(b) * a.G + g) * a.N + n);
    sC[n] = bf(a.Cm, (int64_t(b) * a.G + g) * a.N + n);
  }
  __syncthreads();
  const float A = -expf(a.A_log[h]);
  const float dt = head_dt(a, b, h), dA = expf(dt * A);
  float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * a.P * a.N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int p = warp; p < a.P; p += kWarps) {
    const float xp = bf(a.x, (int64_t(b) * a.H + h) * a.P + p);
    float* row = S + int64_t(p) * a.N;
    float acc = 0.0f;
    if constexpr (kVec) {
      for (int n = lane * 4; n < a.N; n += 128) {
        float4 s = *reinterpret_cast<float4*>(row + n);
        s.x = s.x * dA + (dt * sB[n]) * xp;
        s.y = s.y * dA + (dt * sB[n + 1]) * xp;
        s.z = s.z * dA + (dt * sB[n + 2]) * xp;
        s.w = s.w * dA + (dt * sB[n + 3]) * xp;
        *reinterpret_cast<float4*>(row + n) = s;
        acc += s.x * sC[n] + s.y * sC[n + 1] + s.z * sC[n + 2] + s.w * sC[n + 3];
      }
    } else {
      for (int n = lane; n < a.N; n += 32) {
        const float s = row[n] * dA + (dt * sB[n]) * xp;
        row[n] = s;
        acc += s * sC[n];
      }
    }
    acc = warp_sum(acc);
    if (lane == 0)
      reinterpret_cast<__nv_bfloat16*>(a.y)[(int64_t(b) * a.H + h) * a.P + p] =
          __float2bfloat16(acc + a.D[h] * xp);
  }
}

// y_t = e^{L_t}·S_c·C_t + Σ_{s≤t} e^{L_t−L_s}·dt_s·(B_s·C_t)·x_s + D·x_t,
// the new token being entry t = n_log.
template <bool kVec>
__global__ void replay_kernel(Mamba2DecodeArgs a) {
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int n_log = a.n_log[b];
  __shared__ float sC[kMaxN], sW[kMaxW + 1], sL[kMaxW + 1], sDt[kMaxW + 1];
  for (int n = threadIdx.x; n < a.N; n += blockDim.x) sC[n] = bf(a.Cm, (int64_t(b) * a.G + g) * a.N + n);
  const float A = -expf(a.A_log[h]);
  if (threadIdx.x == 0) {
    float L = 0.0f;
    for (int s = 0; s <= n_log; ++s) {
      const float dt = s < n_log ? a.log_dt[(int64_t(b) * a.W + s) * a.H + h] : head_dt(a, b, h);
      L += dt * A;
      sL[s] = L;
      sDt[s] = dt;
    }
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Weights of every entry: one warp per entry, a dot over N.
  for (int s = warp; s <= n_log; s += kWarps) {
    const uint16_t* Bs = s < n_log ? a.log_B + ((int64_t(b) * a.W + s) * a.G + g) * a.N
                                   : a.Bm + (int64_t(b) * a.G + g) * a.N;
    float d = 0.0f;
    for (int n = lane; n < a.N; n += 32) d += bf(Bs, n) * sC[n];
    d = warp_sum(d);
    if (lane == 0) sW[s] = expf(sL[n_log] - sL[s]) * sDt[s] * d;
  }
  __syncthreads();
  const float decay = expf(sL[n_log]);
  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * a.P * a.N;
  for (int p = warp; p < a.P; p += kWarps) {
    const float* row = S + int64_t(p) * a.N;
    float acc = 0.0f;
    if constexpr (kVec) {
      for (int n = lane * 4; n < a.N; n += 128) {
        const float4 s = *reinterpret_cast<const float4*>(row + n);
        acc += s.x * sC[n] + s.y * sC[n + 1] + s.z * sC[n + 2] + s.w * sC[n + 3];
      }
    } else {
      for (int n = lane; n < a.N; n += 32) acc += row[n] * sC[n];
    }
    acc = warp_sum(acc) * decay;
    if (lane == 0) {
      const float xt = bf(a.x, (int64_t(b) * a.H + h) * a.P + p);
      for (int s = 0; s < n_log; ++s) acc += sW[s] * bf(a.log_x, ((int64_t(b) * a.W + s) * a.H + h) * a.P + p);
      acc += sW[n_log] * xt + a.D[h] * xt;
      reinterpret_cast<__nv_bfloat16*>(a.y)[(int64_t(b) * a.H + h) * a.P + p] = __float2bfloat16(acc);
    }
  }
}

template <bool kVec>
__global__ void flush_kernel(Mamba2DecodeArgs a) {
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int n_log = a.n_log[b];
  if (n_log == 0) return;
  extern __shared__ float sB[];  // (n_log, N)
  __shared__ float sDt[kMaxW], sDA[kMaxW];
  const float A = -expf(a.A_log[h]);
  for (int i = threadIdx.x; i < n_log * a.N; i += blockDim.x)
    sB[i] = bf(a.log_B, ((int64_t(b) * a.W + i / a.N) * a.G + g) * a.N + i % a.N);
  for (int s = threadIdx.x; s < n_log; s += blockDim.x) {
    sDt[s] = a.log_dt[(int64_t(b) * a.W + s) * a.H + h];
    sDA[s] = expf(sDt[s] * A);
  }
  __syncthreads();
  float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * a.P * a.N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int p = warp; p < a.P; p += kWarps) {
    float* row = S + int64_t(p) * a.N;
    float xs[kMaxW];
    for (int s = 0; s < n_log; ++s) xs[s] = bf(a.log_x, ((int64_t(b) * a.W + s) * a.H + h) * a.P + p);
    for (int n = lane; n < a.N; n += 32) {
      float v = row[n];
      for (int s = 0; s < n_log; ++s) v = v * sDA[s] + (sDt[s] * sB[s * a.N + n]) * xs[s];
      row[n] = v;
    }
  }
}

cudaError_t check_shapes(const Mamba2DecodeArgs& a, bool replay) {
  if (a.batch <= 0) return cudaSuccess;
  if (a.N > kMaxN || a.G <= 0 || a.H % a.G != 0 || (replay && a.W > kMaxW)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

cudaError_t mamba2_step_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  if (cudaError_t e = check_shapes(a, false); e != cudaSuccess || a.batch == 0) return e;
  const dim3 grid(a.H, a.batch);
  if (a.N % 128 == 0) step_kernel<true><<<grid, 32 * kWarps, 0, stream>>>(a);
  else step_kernel<false><<<grid, 32 * kWarps, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t mamba2_replay_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  if (cudaError_t e = check_shapes(a, true); e != cudaSuccess || a.batch == 0) return e;
  const dim3 grid(a.H, a.batch);
  if (a.N % 128 == 0) replay_kernel<true><<<grid, 32 * kWarps, 0, stream>>>(a);
  else replay_kernel<false><<<grid, 32 * kWarps, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t mamba2_flush_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  if (cudaError_t e = check_shapes(a, true); e != cudaSuccess || a.batch == 0) return e;
  const dim3 grid(a.H, a.batch);
  const size_t shm = sizeof(float) * a.W * a.N;
  if (shm > 48 * 1024) return cudaErrorInvalidValue;
  flush_kernel<false><<<grid, 32 * kWarps, shm, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
