// The log's part of the Mamba2 replay outputs: the split path's first
// kernel (mamba2_replay.cu), one block per (group or chunk of its heads,
// position v of the decode order, sequence b there), for the per-head pass
// to read from scratch (mamba2_replay_scratch.cuh):
//   y_log[v, t, h, p] = D_h·x_{base+t}[p] + Σ_{s≤base+t} e^{L_t−L_s}·dt_s·(B_s·C_t)·x_s[p]
//   decay[v, t, h]    = e^{L_{base+t}}
// with L_s = Σ_{r≤s} dt_r·A_h. B_s·C_t is shared by a group's heads, so it
// is computed once per block instead of once per head.
//
// Why it is written this way (H200, ncu at batch 256; docs/perf): the
// kernel it replaces summed each output over the log with a global load
// per term — 15–18 loads one after another per output, 16 outputs a thread
// — and took 52 µs of an AR step's 354 and about 140 of a verify's 590.
// Here the block's whole log (B, C, its heads' x rows, dt) arrives by
// cp.async in one round trip, and a thread sums all T outputs of one
// (head, row) out of shared memory. Same arithmetic in the same order.
#include <type_traits>

#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kLogThreads = 256;
constexpr size_t kLogShmTarget = 96 * 1024;  // two blocks an SM at least

// Shared memory, in floats from the start; every array a multiple of 4
// floats from there. hc heads per block; the bf16 arrays as copied.
struct LogLayout {
  int hc4, W4, N8, XR;
  int Dt, L, Dot, Wt, B, C, X, total;
};
__host__ __device__ __forceinline__ LogLayout log_layout(int kT, int W, int hc, int P, int N) {
  LogLayout l{};
  l.hc4 = (hc + 3) & ~3, l.W4 = (W + 3) & ~3, l.N8 = (N + 7) & ~7, l.XR = (hc * P + 7) & ~7;
  l.Dt = 0;                          // (W, hc4) dt_s of each head, as in the log
  l.L = l.Dt + W * l.hc4;            // (hc, W4) L_s of each head
  l.Dot = l.L + hc * l.W4;           // (kT, W4) B_s·C_t
  l.Wt = l.Dot + kT * l.W4;          // (hc, W4, kT) output weights
  l.B = l.Wt + hc * l.W4 * kT;       // (W, N8) bf16 B_s
  l.C = l.B + W * l.N8 / 2;          // (kT, N8) bf16 C_t
  l.X = l.C + kT * l.N8 / 2;         // (W, XR) bf16 x_s of the block's heads
  l.total = l.X + W * l.XR / 2;
  return l;
}

// One token's instance bounded to 8 blocks an SM (32 registers): the
// decode order and row map (321a416, c58e8cb) took it from 32 to 48 registers,
// 5 blocks an SM, and beams of 8 at batch 64 from 35.4 to 39.7 µs (H200,
// the old kernel in the new binary: 37.0). 0 for the others: no bound, as before.
// kPaged: the log's rows through the block table (Mamba2DecodeArgs::pages).
template <int kT, bool kPaged>
__global__ void __launch_bounds__(kLogThreads, kT == 1 ? 8 : 0) mamba2_replay_log_kernel(Mamba2DecodeArgs a, int hc) {
  pdl_begin();
  const int hpg = a.H / a.G, chunks = (hpg + hc - 1) / hc;
  const int g = blockIdx.x / chunks, k0 = blockIdx.x % chunks * hc, nh = min(hc, hpg - k0), h0 = g * hpg + k0;
  // Position v of the decode order (the scratch's rows), sequence b there (the log's).
  const int v = blockIdx.y, b = a.seq != nullptr ? a.seq[v] : v;
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, N = a.N, T = a.T, W = a.W, H = a.H;
  const int64_t r0 = decode_row0(a.row, b, T);  // sequence b's first row of C (no row map with a decode order)
  if (r0 < 0) return;                           // not in this launch (block-uniform)
  const int n_log = min(max(a.n_log[b], T), W), base = n_log - T;
  const LogLayout l = log_layout(kT, W, hc, P, N);
  const int W4 = l.W4;
  extern __shared__ float shm[];
  float *sDt = shm + l.Dt, *sL = shm + l.L, *sDot = shm + l.Dot, *sWt = shm + l.Wt;
  uint16_t* stB = reinterpret_cast<uint16_t*>(shm + l.B);
  uint16_t* stC = reinterpret_cast<uint16_t*>(shm + l.C);
  uint16_t* stX = reinterpret_cast<uint16_t*>(shm + l.X);

  // The block's log in one round trip: for entry s, the heads' x rows are
  // contiguous in the log (nh·P values).
  if constexpr (kPaged) {
    const PagedLog pl = paged_log(a.pages, b);
    copy_async_bf_rows_at(stB, a.log_B + int64_t(g) * N, PagedRows{pl, 0}, n_log, N, int64_t(a.G) * N, l.N8);
    copy_async_bf_rows(stC, a.Cm + (r0 * a.G + g) * N, T, N, int64_t(a.G) * N, l.N8);
    copy_async_bf_rows_at(stX, a.log_x + int64_t(h0) * P, PagedRows{pl, 0}, n_log, nh * P, int64_t(H) * P, l.XR);
    for (int i = threadIdx.x; i < n_log * nh; i += blockDim.x)
      cp_async<4>(sDt + i / nh * l.hc4 + i % nh, a.log_dt + pl.row(i / nh) * H + h0 + i % nh);
  } else {
    const float* gDt = a.log_dt + int64_t(b) * W * H + h0;
    copy_async_bf_rows(stB, a.log_B + (int64_t(b) * W * a.G + g) * N, n_log, N, int64_t(a.G) * N, l.N8);
    copy_async_bf_rows(stC, a.Cm + (r0 * a.G + g) * N, T, N, int64_t(a.G) * N, l.N8);
    copy_async_bf_rows(stX, a.log_x + (int64_t(b) * W * H + h0) * P, n_log, nh * P, int64_t(H) * P, l.XR);
    for (int i = threadIdx.x; i < n_log * nh; i += blockDim.x)
      cp_async<4>(sDt + i / nh * l.hc4 + i % nh, gDt + int64_t(i / nh) * H + i % nh);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // L_s per head (a warp each), then the dots B_s·C_t (a warp each).
  for (int k = w; k < nh; k += nw) {
    const float A = -expf(a.A_log[h0 + k]);
    for (int s = lane; s < n_log; s += 32) sL[k * W4 + s] = A * sDt[s * l.hc4 + k];
    __syncwarp();
    warp_prefix_sum(sL + k * W4, n_log, lane);
  }
  for (int i = w; i < T * n_log; i += nw) {
    const int t = i / n_log, s = i % n_log;
    if (s > base + t) continue;  // warp-uniform
    float d = 0.0f;
    for (int n = lane; n < N; n += 32) d += bf(stB, s * l.N8 + n) * bf(stC, t * l.N8 + n);
    d = warp_sum(d);
    if (lane == 0) sDot[t * W4 + s] = d;
  }
  __syncthreads();

  // Output weights (zero past an output's token) and the decays.
  for (int i = threadIdx.x; i < nh * n_log * kT; i += blockDim.x) {
    const int t = i % kT, s = i / kT % n_log, k = i / (kT * n_log);
    sWt[(k * W4 + s) * kT + t] =
        t < T && s <= base + t ? expf(sL[k * W4 + base + t] - sL[k * W4 + s]) * sDt[s * l.hc4 + k] * sDot[t * W4 + s]
                               : 0.0f;
  }
  float* y_log = a.scratch;
  float* decay = a.scratch + int64_t(a.batch) * T * H * P;
  for (int i = threadIdx.x; i < nh * T; i += blockDim.x)
    decay[(int64_t(v) * T + i % T) * H + h0 + i / T] = expf(sL[i / T * W4 + base + i % T]);
  __syncthreads();

  // A thread per (head, row): all T outputs, each x_s read once.
  for (int i = threadIdx.x; i < nh * P; i += blockDim.x) {
    const int k = i / P, p = i % P, h = h0 + k;
    const uint16_t* x = stX + k * P + p;
    const float Dh = a.D[h];
    float acc[kT];
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[t] = t < T ? Dh * bf(x, (base + t) * l.XR) : 0.0f;
    for (int s = 0; s < n_log; ++s) {
      const float xs = bf(x, s * l.XR);
      const float* wt = sWt + (k * W4 + s) * kT;
#pragma unroll
      for (int t = 0; t < kT; ++t) acc[t] += wt[t] * xs;
    }
#pragma unroll
    for (int t = 0; t < kT; ++t)
      if (t < T) y_log[((int64_t(v) * T + t) * H + h) * P + p] = acc[t];
  }
}

template <int kT, bool kPaged>
cudaError_t launch_log(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  // Heads per block: the group's, halved until the block's shared memory
  // leaves room for two blocks an SM (long logs of wide heads).
  const int hpg = a.H / a.G;
  int hc = hpg;
  auto bytes = [&](int c) { return sizeof(float) * size_t(log_layout(kT, a.W, c, a.P, a.N).total); };
  while (hc > 1 && bytes(hc) > kLogShmTarget) hc = (hc + 1) / 2;
  if (cudaError_t e = allow_dynamic_smem(mamba2_replay_log_kernel<kT, kPaged>, bytes(hc)); e != cudaSuccess) return e;
  const int chunks = (hpg + hc - 1) / hc;
  launch_kernel(mamba2_replay_log_kernel<kT, kPaged>, dim3(a.G * chunks, a.batch), kLogThreads, bytes(hc), stream, a,
                hc);
  return cudaGetLastError();
}

}  // namespace

cudaError_t mamba2_replay_log(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  auto by_tokens = [&](auto paged) {
    constexpr bool kPaged = decltype(paged)::value;
    return a.T <= 1   ? launch_log<1, kPaged>(a, stream)
           : a.T <= 4 ? launch_log<4, kPaged>(a, stream)
                      : launch_log<8, kPaged>(a, stream);
  };
  return a.pages.page != nullptr ? by_tokens(std::true_type{}) : by_tokens(std::false_type{});
}

}  // namespace replayssm::ops::cuda
