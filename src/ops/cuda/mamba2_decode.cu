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
constexpr int kMaxP = 256;

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
  __shared__ float sY[kMaxP];  // the log's part of y, per row
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
  // Σ_s w_s·x_s[p] with the threads over p: each entry's x row is read
  // once, coalesced.
  for (int p = threadIdx.x; p < a.P; p += blockDim.x) {
    const float xt = bf(a.x, (int64_t(b) * a.H + h) * a.P + p);
    float acc = sW[n_log] * xt + a.D[h] * xt;
    for (int s = 0; s < n_log; ++s) acc += sW[s] * bf(a.log_x, ((int64_t(b) * a.W + s) * a.H + h) * a.P + p);
    sY[p] = acc;
  }
  __syncthreads();
  const float decay = expf(sL[n_log]);
  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * a.P * a.N;
  for (int p = warp; p < a.P; p += kWarps) {
    const float* row = S + int64_t(p) * a.N;
    float acc = 0.0f;
    if constexpr (kVec) {
      for (int n = lane * 4; n < a.N; n += 128) {
        const float4 v = *reinterpret_cast<const float4*>(row + n);
        acc += v.x * sC[n] + v.y * sC[n + 1] + v.z * sC[n + 2] + v.w * sC[n + 3];
      }
    } else {
      for (int n = lane; n < a.N; n += 32) acc += row[n] * sC[n];
    }
    acc = warp_sum(acc) * decay;
    if (lane == 0)
      reinterpret_cast<__nv_bfloat16*>(a.y)[(int64_t(b) * a.H + h) * a.P + p] = __float2bfloat16(acc + sY[p]);
  }
}

// S ← e^{L}·S + Σ_s e^{L−L_s}·dt_s·x_s ⊗ B_s (the fold in dual form: one
// multiply-add per entry and element instead of two).
template <bool kVec>
__global__ void flush_kernel(Mamba2DecodeArgs a) {
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int n_log = a.n_log[b];
  if (n_log == 0) return;
  extern __shared__ float shm[];
  float* sB = shm;                  // (n_log, N)
  float* sX = shm + n_log * a.N;    // (n_log, P): e^{L−L_s}·dt_s·x_s[p]
  __shared__ float sCoef[kMaxW], sDecay;
  const float A = -expf(a.A_log[h]);
  if (threadIdx.x == 0) {
    float L = 0.0f;
    for (int s = 0; s < n_log; ++s) {
      L += a.log_dt[(int64_t(b) * a.W + s) * a.H + h] * A;
      sCoef[s] = L;  // L_s for now
    }
    for (int s = 0; s < n_log; ++s) sCoef[s] = expf(L - sCoef[s]) * a.log_dt[(int64_t(b) * a.W + s) * a.H + h];
    sDecay = expf(L);
  }
  for (int i = threadIdx.x; i < n_log * a.N; i += blockDim.x)
    sB[i] = bf(a.log_B, ((int64_t(b) * a.W + i / a.N) * a.G + g) * a.N + i % a.N);
  __syncthreads();
  for (int i = threadIdx.x; i < n_log * a.P; i += blockDim.x)
    sX[i] = sCoef[i / a.P] * bf(a.log_x, ((int64_t(b) * a.W + i / a.P) * a.H + h) * a.P + i % a.P);
  __syncthreads();
  const float decay = sDecay;
  float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * a.P * a.N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int p = warp; p < a.P; p += kWarps) {
    float* row = S + int64_t(p) * a.N;
    if constexpr (kVec) {
      for (int n = lane * 4; n < a.N; n += 128) {
        float4 v = *reinterpret_cast<float4*>(row + n);
        v.x *= decay, v.y *= decay, v.z *= decay, v.w *= decay;
        for (int s = 0; s < n_log; ++s) {
          const float c = sX[s * a.P + p];
          const float4 Bs = *reinterpret_cast<const float4*>(sB + s * a.N + n);
          v.x += c * Bs.x, v.y += c * Bs.y, v.z += c * Bs.z, v.w += c * Bs.w;
        }
        *reinterpret_cast<float4*>(row + n) = v;
      }
    } else {
      for (int n = lane; n < a.N; n += 32) {
        float v = row[n] * decay;
        for (int s = 0; s < n_log; ++s) v += sX[s * a.P + p] * sB[s * a.N + n];
        row[n] = v;
      }
    }
  }
}

cudaError_t check_shapes(const Mamba2DecodeArgs& a, bool replay) {
  if (a.batch <= 0) return cudaSuccess;
  if (a.N > kMaxN || a.P > kMaxP || a.G <= 0 || a.H % a.G != 0 || (replay && a.W > kMaxW))
    return cudaErrorInvalidValue;
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
  const size_t shm = sizeof(float) * a.W * (a.N + a.P);
  if (shm > 48 * 1024) return cudaErrorInvalidValue;
  if (a.N % 128 == 0) flush_kernel<true><<<grid, 32 * kWarps, shm, stream>>>(a);
  else flush_kernel<false><<<grid, 32 * kWarps, shm, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
