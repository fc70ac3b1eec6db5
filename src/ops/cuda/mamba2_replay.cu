// Mamba2 replay decode (see mamba2_decode.h). One block per (head,
// sequence) streams the checkpoint in passes of rows (mamba2_launch.h).
// Dual form, with L_s = Σ_{r≤s} dt_r·A from the checkpoint:
//   y_t = e^{L_t}·S_c·C_t + Σ_{s≤t} e^{L_t−L_s}·dt_s·(B_s·C_t)·x_s + D·x_t
//   fold f: S ← e^{L_{f−1}}·S_c + Σ_{s<f} e^{L_{f−1}−L_s}·dt_s·x_s ⊗ B_s
// The first pass of the checkpoint is requested before the log (a few KB,
// 16-byte loads) is read and the next pass during each pass, so the log's
// latency-bound work overlaps the state read. A fold reuses the rows in
// registers: the flush costs one state write, not a second read.
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_launch.h"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

// The log's part of one replay block, in shared memory.
struct ReplayLog {
  const float* C;   // (T, N)
  const float* L;   // (W) L_s
  const float* F;   // (W) fold coefficients e^{L_{f−1}−L_s}·dt_s
  const float* Y;   // (T, P) the log's part of y, with D·x
  const float* X;   // (W, P) x_s
  const float* B;   // (W, N) B_s
  int ld;           // row stride of Y and X (P rounded up to 4)
  int base, f;      // first new entry; entries to fold
};

// One pass of rows [p0, p0 + rows): their outputs, then their fold.
template <typename TileT>
__device__ __forceinline__ void replay_pass(const Mamba2DecodeArgs& a, TileT& cur, const ReplayLog& lg, float* Sf,
                                            int b, int h, int p0, int rows, int nw, int w, int lane) {
  const int P = a.P, N = a.N, T = a.T, N4 = (N + 3) & ~3;  // C and B rows are N4 apart
  for (int t = 0; t < T; ++t) {
    float Cc[TileT::kColChunks][TileT::kVec], acc[TileT::kRows];
    TileT::columns(lg.C + t * N4, N, lane, Cc);
#pragma unroll
    for (int r = 0; r < TileT::kRows; ++r) {
      acc[r] = 0.0f;
#pragma unroll
      for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
        for (int e = 0; e < TileT::kVec; ++e) acc[r] += cur.v[r][j][e] * Cc[j][e];
    }
    TileT::row_sums(acc, lane);
    const int i = TileT::row(w, nw, TileT::summed_row(lane));
    if (TileT::row_writer(lane) && i < rows)
      put_bf(a.y, ((int64_t(b) * T + t) * a.H + h) * P + p0 + i,
             expf(lg.L[lg.base + t]) * acc[0] + lg.Y[t * lg.ld + p0 + i]);
  }
  if (lg.f == 0) return;  // block-uniform
  const float decay = expf(lg.L[lg.f - 1]);
#pragma unroll
  for (int r = 0; r < TileT::kRows; ++r)
#pragma unroll
    for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
      for (int e = 0; e < TileT::kVec; ++e) cur.v[r][j][e] *= decay;
  for (int s = 0; s < lg.f; ++s) {
    float Bc[TileT::kColChunks][TileT::kVec];
    TileT::columns(lg.B + s * N4, N, lane, Bc);
#pragma unroll
    for (int r = 0; r < TileT::kRows; ++r) {
      const int i = min(TileT::row(w, nw, r), rows - 1);  // rows past the pass are never stored
      const float c = lg.F[s] * lg.X[s * lg.ld + p0 + i];
#pragma unroll
      for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
        for (int e = 0; e < TileT::kVec; ++e) cur.v[r][j][e] += c * Bc[j][e];
    }
  }
  cur.store(Sf + int64_t(p0) * N, rows, N, N, w, nw, lane);
}

template <typename TileT>
__global__ void __launch_bounds__(32 * kMamba2Warps) mamba2_replay_kernel(Mamba2DecodeArgs a) {
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, N = a.N, T = a.T, W = a.W, pass_rows = nw * TileT::kRows;
  const int n_log = min(max(a.n_log[b], T), W), base = n_log - T;
  const int f = a.fold != nullptr ? min(max(a.fold[b], 0), min(n_log, a.max_fold)) : 0;
  extern __shared__ float shm[];  // every array a multiple of 4 floats from the start: 16-byte aligned
  const int W4 = (W + 3) & ~3, P4 = (P + 3) & ~3, N4 = (N + 3) & ~3;
  float* sC = shm;              // (T, N)
  float* sB = sC + T * N4;      // (W, N) B_s
  float* sL = sB + W * N4;      // (W) L_s
  float* sDt = sL + W4;         // (W) dt_s
  float* sF = sDt + W4;         // (W) fold coefficients
  float* sWt = sF + W4;         // (T, W) output weights
  float* sY = sWt + T * W4;     // (T, P)
  float* sX = sY + T * P4;      // (W, P) x_s

  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * P * N;
  TileT cur;
  cur.load(S, min(pass_rows, P), N, N, w, nw, lane);

  const float A = -expf(a.A_log[h]);
  for (int s = threadIdx.x; s < n_log; s += blockDim.x) {
    const float dt = a.log_dt[(int64_t(b) * W + s) * a.H + h];
    sDt[s] = dt;
    sL[s] = dt * A;
  }
  load_bf_rows(sC, a.Cm + (int64_t(b) * T * a.G + g) * N, T, N, int64_t(a.G) * N, N4);
  load_bf_rows(sB, a.log_B + (int64_t(b) * W * a.G + g) * N, n_log, N, int64_t(a.G) * N, N4);
  load_bf_rows(sX, a.log_x + (int64_t(b) * W * a.H + h) * P, n_log, P, int64_t(a.H) * P, P4);
  __syncthreads();
  if (w == 0) warp_prefix_sum(sL, n_log, lane);
  __syncthreads();

  // Output weights: one warp per (token, entry) pair, a dot over N.
  for (int k = w; k < T * n_log; k += nw) {
    const int t = k / n_log, s = k % n_log;
    if (s > base + t) continue;  // warp-uniform
    float d = 0.0f;
    for (int n = lane; n < N; n += 32) d += sB[s * N4 + n] * sC[t * N4 + n];
    d = warp_sum(d);
    if (lane == 0) sWt[t * W4 + s] = expf(sL[base + t] - sL[s]) * sDt[s] * d;
  }
  for (int s = threadIdx.x; s < f; s += blockDim.x) sF[s] = expf(sL[f - 1] - sL[s]) * sDt[s];
  __syncthreads();
  const float Dh = a.D[h];
  for (int i = threadIdx.x; i < T * P; i += blockDim.x) {
    const int t = i / P, p = i % P;
    float acc = Dh * sX[(base + t) * P4 + p];
    for (int s = 0; s <= base + t; ++s) acc += sWt[t * W4 + s] * sX[s * P4 + p];
    sY[t * P4 + p] = acc;
  }
  __syncthreads();

  const ReplayLog lg{sC, sL, sF, sY, sX, sB, P4, base, f};
  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.H + h) * P * N : nullptr;
  for (int p0 = 0; p0 < P; p0 += pass_rows) {
    const int rows = min(pass_rows, P - p0);
    TileT nxt;
    if (p0 + pass_rows < P) nxt.load(S + int64_t(p0 + pass_rows) * N, min(pass_rows, P - p0 - pass_rows), N, N, w, nw, lane);
    replay_pass(a, cur, lg, Sf, b, h, p0, rows, nw, w, lane);
    cur = nxt;
  }
}

}  // namespace

cudaError_t mamba2_replay_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  if (a.batch < 0 || a.G <= 0 || a.H % a.G != 0 || a.P <= 0 || a.T < 1 || a.T > kMamba2MaxT || a.W < a.T ||
      a.W > kMamba2MaxW || a.max_fold < 0 || a.max_fold > a.W || (a.fold != nullptr && a.fold_slot == nullptr))
    return cudaErrorInvalidValue;
  return with_mamba2_tile(a, [&](auto tag) {
    using TileT = decltype(tag);
    const int nw = mamba2_warps(a.P, TileT::kRows);
    const int W4 = (a.W + 3) & ~3, P4 = (a.P + 3) & ~3, N4 = (a.N + 3) & ~3;
    const size_t shm = sizeof(float) * (a.T * N4 + a.W * N4 + 3 * W4 + a.T * W4 + a.T * P4 + a.W * P4);
    if (shm > 48 * 1024) {
      if (cudaError_t e = cudaFuncSetAttribute(mamba2_replay_kernel<TileT>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm));
          e != cudaSuccess)
        return e;
    }
    mamba2_replay_kernel<TileT><<<dim3(a.H, a.batch), 32 * nw, shm, stream>>>(a);
    return cudaGetLastError();
  });
}

}  // namespace replayssm::ops::cuda
