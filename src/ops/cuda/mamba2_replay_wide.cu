// Mamba2 replay decode, one kernel of wide blocks (see mamba2_replay.cu
// for the math): the launcher's choice when (head, sequence) blocks are
// few — batch 1–2 at H = 128, where every kernel of a step is bound by
// its chain of dependent latencies, not by bandwidth.
//
// What shortens the chain, against mamba2_replay_kernel's one-kernel path
// (measured on the H200, docs/perf):
//   - a block of kMamba2WideWarps warps takes a head in one pass, its
//     state requested before anything else;
//   - with Mamba2DecodeArgs::early, the log's entries older than this
//     step's tokens (earlier steps wrote them) are requested with cp.async
//     before the PDL wait: into shared memory, holding no register, so the
//     wait and the next kernel's release are not delayed;
//   - two block barriers instead of four: every warp scans the decays
//     itself (≤ 64 values, in registers) before its (token, entry) dots,
//     and the log's part of y is summed by the lane that writes the row.
//     (Every warp reducing every dot itself, to drop one more barrier, was
//     slower: 16 warps re-reading B and C from shared memory.)
#include <algorithm>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_launch.h"
#include "ops/cuda/mamba2_replay_pass.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

// Shared memory, in floats from the start; every array a multiple of 4
// floats from there, so 16-byte aligned.
struct WideLayout {
  int C, B, X, Dt, L, F, decay, Wt, Yoff, stage, total;
};
__host__ __device__ __forceinline__ WideLayout wide_layout(int T, int W, int P, int N) {
  const int W4 = (W + 3) & ~3, P4 = (P + 3) & ~3, N4 = (N + 3) & ~3, T4 = (T + 3) & ~3;
  const int N8 = (N + 7) & ~7, P8 = (P + 7) & ~7;
  WideLayout l{};
  l.C = 0;                  // (T, N4) C of each token
  l.B = l.C + T * N4;       // (W, N4) B_s
  l.X = l.B + W * N4;       // (W, P4) x_s
  l.Dt = l.X + W * P4;      // (W4) dt_s
  l.L = l.Dt + W4;          // (W4) L_s
  l.F = l.L + W4;           // (W4) fold coefficients
  l.decay = l.F + W4;       // (T4) e^{L_t}
  l.Wt = l.decay + T4;      // (T, W4) output weights
  l.Yoff = l.Wt + T * W4;   // (T) int64: where token t's row of y starts
  l.stage = l.Yoff + 2 * T4;  // (W, N8) then (W, P8) bf16: the early entries as copied
  l.total = l.stage + W * (N8 + P8) / 2;
  return l;
}

template <typename TileT>
__global__ void __launch_bounds__(32 * kMamba2WideWarps, 1) mamba2_replay_wide_kernel(Mamba2DecodeArgs a) {
  if (!a.early) pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, N = a.N, T = a.T, W = a.W, pass_rows = nw * TileT::kRows;
  const int n_log = min(max(a.n_log[b], T), W), base = n_log - T;
  const int f = a.fold != nullptr ? min(max(a.fold[b], 0), min(n_log, a.max_fold)) : 0;
  const int W4 = (W + 3) & ~3, P4 = (P + 3) & ~3, N4 = (N + 3) & ~3, N8 = (N + 7) & ~7, P8 = (P + 7) & ~7;
  const WideLayout l = wide_layout(T, W, P, N);
  extern __shared__ float shm[];
  float *sC = shm + l.C, *sB = shm + l.B, *sX = shm + l.X, *sDt = shm + l.Dt, *sL = shm + l.L, *sF = shm + l.F;
  float *sDecay = shm + l.decay, *sWt = shm + l.Wt;
  int64_t* sYoff = reinterpret_cast<int64_t*>(shm + l.Yoff);
  uint16_t* stB = reinterpret_cast<uint16_t*>(shm + l.stage);
  uint16_t* stX = stB + W * N8;

  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * P * N;
  TileT cur;
  cur.load(S, min(pass_rows, P), N, N, w, nw, lane);
  const uint16_t* gB = a.log_B + (int64_t(b) * W * a.G + g) * N;
  const uint16_t* gX = a.log_x + (int64_t(b) * W * a.H + h) * P;
  const float* gDt = a.log_dt + int64_t(b) * W * a.H + h;
  const int staged = a.early ? base : 0;  // block-uniform
  if (staged > 0) {
    for (int s = threadIdx.x; s < staged; s += blockDim.x) cp_async<4>(sDt + s, gDt + int64_t(s) * a.H);
    copy_async_bf_rows(stB, gB, staged, N, int64_t(a.G) * N, N8);
    copy_async_bf_rows(stX, gX, staged, P, int64_t(a.H) * P, P8);
    cp_async_commit();
  }

  if (a.early) pdl_begin();  // the newest entries and C come from the kernel before
  if (staged > 0) {  // a thread converts what it copied itself: no barrier before
    cp_async_wait<0>();
    unstage_bf_rows(sB, N4, stB, N8, staged, N, bf_rows_chunk(stB, gB, N, int64_t(a.G) * N, N8));
    unstage_bf_rows(sX, P4, stX, P8, staged, P, bf_rows_chunk(stX, gX, P, int64_t(a.H) * P, P8));
  }
  for (int s = staged + threadIdx.x; s < n_log; s += blockDim.x) sDt[s] = gDt[int64_t(s) * a.H];
  load_bf_rows(sB + staged * N4, gB + int64_t(staged) * a.G * N, n_log - staged, N, int64_t(a.G) * N, N4);
  load_bf_rows(sX + staged * P4, gX + int64_t(staged) * a.H * P, n_log - staged, P, int64_t(a.H) * P, P4);
  load_bf_rows(sC, a.Cm + (int64_t(b) * T * a.G + g) * N, T, N, int64_t(a.G) * N, N4);
  for (int t = threadIdx.x; t < T; t += blockDim.x) sYoff[t] = ((int64_t(b) * T + t) * a.H + h) * P;
  __syncthreads();

  // L_s = Σ_{r≤s} dt_r·A for s = lane and lane + 32, by every warp (the
  // scan of warp_prefix_sum, in registers).
  const float A = -expf(a.A_log[h]);
  float L0 = lane < n_log ? sDt[lane] * A : 0.0f, L1 = lane + 32 < n_log ? sDt[lane + 32] * A : 0.0f;
  for (int o = 1; o < 32; o <<= 1) {
    const float y0 = __shfl_up_sync(0xffffffffu, L0, o), y1 = __shfl_up_sync(0xffffffffu, L1, o);
    if (lane >= o) L0 += y0, L1 += y1;
  }
  L1 += __shfl_sync(0xffffffffu, L0, 31);
  auto L_at = [&](int s) {  // any s < 64, per lane; every lane must call
    const float x0 = __shfl_sync(0xffffffffu, L0, s & 31), x1 = __shfl_sync(0xffffffffu, L1, s & 31);
    return s < 32 ? x0 : x1;
  };
  // Output weights e^{L_t−L_s}·dt_s·(B_s·C_t): a warp per (token, entry).
  for (int k = w; k < T * n_log; k += nw) {
    const int t = k / n_log, s = k % n_log;
    if (s > base + t) continue;  // warp-uniform
    float d = 0.0f;
    for (int n = lane; n < N; n += 32) d += sB[s * N4 + n] * sC[t * N4 + n];
    d = warp_sum(d);
    const float Lt = L_at(base + t), Ls = L_at(s);
    if (lane == 0) sWt[t * W4 + s] = expf(Lt - Ls) * sDt[s] * d;
  }
  if (w == nw - 1) {  // the decays and fold coefficients: the last warp, the one with fewest dots
    if (lane < n_log) sL[lane] = L0;
    if (lane + 32 < n_log) sL[lane + 32] = L1;
    for (int t0 = 0; t0 < T; t0 += 32) {
      const float Lt = L_at(base + min(t0 + lane, T - 1));
      if (t0 + lane < T) sDecay[t0 + lane] = expf(Lt);
    }
    const float Lf = f > 0 ? L_at(f - 1) : 0.0f;
    for (int s0 = 0; s0 < f; s0 += 32) {
      const float Ls = L_at(min(s0 + lane, f - 1));
      if (s0 + lane < f) sF[s0 + lane] = expf(Lf - Ls) * sDt[s0 + lane];
    }
  }
  __syncthreads();

  // The passes; the lane that writes a row of y sums its log part.
  const float Dh = a.D[h];
  auto ylog = [&](int t, int p) {
    float acc = Dh * sX[(base + t) * P4 + p];
    for (int s = 0; s <= base + t; ++s) acc += sWt[t * W4 + s] * sX[s * P4 + p];
    return acc;
  };
  const ReplayLog lg{sC, sDecay, nullptr, sYoff, T, sL, sF, sX, sB, P4, f};
  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.H + h) * P * N : nullptr;
  for (int p0 = 0; p0 < P; p0 += pass_rows) {
    const int rows = min(pass_rows, P - p0);
    TileT nxt;
    if (p0 + pass_rows < P) nxt.load(S + int64_t(p0 + pass_rows) * N, min(pass_rows, P - p0 - pass_rows), N, N, w, nw, lane);
    replay_pass(a, cur, lg, Sf, p0, rows, nw, w, lane, ylog);
    cur = nxt;
  }
}

}  // namespace

cudaError_t mamba2_replay_wide(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  return with_mamba2_tile(a, [&](auto tag) -> cudaError_t {
    using TileT = decltype(tag);
    const int nw = std::min(kMamba2WideWarps, (a.P + TileT::kRows - 1) / TileT::kRows);
    const size_t shm = sizeof(float) * size_t(wide_layout(a.T, a.W, a.P, a.N).total);
    if (shm > 227 * 1024) return cudaErrorNotSupported;
    if (cudaError_t e = allow_dynamic_smem(mamba2_replay_wide_kernel<TileT>, shm); e != cudaSuccess) return e;
    launch_kernel(mamba2_replay_wide_kernel<TileT>, dim3(a.H, a.batch), 32 * nw, shm, stream, a);
    return cudaGetLastError();
  });
}

}  // namespace replayssm::ops::cuda
