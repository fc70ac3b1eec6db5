// Mamba2 replay decode at small batch: one kernel of wide blocks that
// replays the log by the sequential recurrence — mamba2_token_rows, the
// standard step's arithmetic, so outputs and folds are bit-identical to
// stepping (as the `exact` kernel, mamba2_replay_exact.cu). The
// launcher's choice when (head, sequence) blocks are no more than the
// SMs — batch 1 at H = 128 — where a kernel is bound by its chain of
// dependent latencies, not by bandwidth, and n_log × a step's FLOPs cost
// nothing (at batch 2 the fused kernel is faster: mamba2_replay.cu).
//
// Why it beats the standard step there (H200, batch 1, AR over a window of
// 16: 4.7 µs against 5.5; verify of 4 drafts 6.6 against 10.0; docs/perf):
//   - a block of up to kMamba2WideWarps warps takes a head's rows at once
//     (P ≤ kMamba2WideWarps·kRows; longer heads take the other kernels),
//     in at most 64 registers a thread, so that two blocks fit an SM: the
//     next kernel's blocks become resident while this one runs (with 128
//     registers, one block per SM: 6.1 µs; with 64: 5.2);
//   - with Mamba2DecodeArgs::early, the entries older than this step's
//     tokens (earlier steps wrote them) are copied in with cp.async and
//     applied to the checkpoint's rows in registers before the PDL wait,
//     while the kernel before still runs. After the wait only the new
//     tokens remain: the standard step's chain, without its state write
//     (a fold writes one, once per window);
//   - with release_early the next launch is not held back by that early
//     part (5.2 → 4.7 µs).
// The dual form in these blocks (outputs from the checkpoint and the
// log's B·C dots, no recurrence) measured 6.0 µs: its dots need the new
// token's C, so all of them wait.
#include <algorithm>

#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_launch.h"
#include "ops/cuda/mamba2_token.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

// Shared memory, in floats from the start; every array a multiple of 4
// floats from there, so 16-byte aligned.
struct WideLayout {
  int C, B, X, Dt, DA, stage, total;
};
__host__ __device__ __forceinline__ WideLayout wide_layout(int T, int W, int P, int N) {
  const int W4 = (W + 3) & ~3, P4 = (P + 3) & ~3, N4 = (N + 3) & ~3, N8 = (N + 7) & ~7, P8 = (P + 7) & ~7;
  WideLayout l{};
  l.C = 0;              // (T, N4) C of each new token
  l.B = l.C + T * N4;   // (W, N4) B_s
  l.X = l.B + W * N4;   // (W, P4) x_s
  l.Dt = l.X + W * P4;  // (W4) dt_s
  l.DA = l.Dt + W4;     // (W4) e^{dt_s·A}
  l.stage = l.DA + W4;  // (W, N8) then (W, P8) bf16: the early entries as copied
  l.total = l.stage + W * (N8 + P8) / 2;
  return l;
}

// kPaged: the log's rows through the block table (Mamba2DecodeArgs::pages).
template <typename TileT, bool kPaged>
__global__ void __launch_bounds__(32 * kMamba2WideWarps, 2) mamba2_replay_wide_kernel(Mamba2DecodeArgs a) {
  if (a.release_early) pdl_release();  // Mamba2DecodeArgs::release_early
  if (!a.early) pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, N = a.N, T = a.T, W = a.W;  // P ≤ nw·kRows: one pass
  const int64_t r0 = decode_row0(a.row, b, T);  // this sequence's first row of Cm and y
  if (r0 < 0) return pdl_leave();               // not in this launch (block-uniform)
  const int n_log = min(max(a.n_log[b], T), W), base = n_log - T;
  const int f = a.fold != nullptr ? min(max(a.fold[b], 0), min(n_log, a.max_fold)) : 0;
  const int P4 = (P + 3) & ~3, N4 = (N + 3) & ~3, N8 = (N + 7) & ~7, P8 = (P + 7) & ~7;
  const WideLayout l = wide_layout(T, W, P, N);
  extern __shared__ float shm[];
  float *sC = shm + l.C, *sB = shm + l.B, *sX = shm + l.X, *sDt = shm + l.Dt, *sDA = shm + l.DA;
  uint16_t* stB = reinterpret_cast<uint16_t*>(shm + l.stage);
  uint16_t* stX = stB + W * N8;

  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * P * N;
  TileT cur;
  cur.load(S, P, N, N, w, nw, lane);
  // The log's columns of this block: entry s at gB + s·G·N (…), or paged
  // at gB + row(s)·G·N.
  const uint16_t* gB = kPaged ? a.log_B + int64_t(g) * N : a.log_B + (int64_t(b) * W * a.G + g) * N;
  const uint16_t* gX = kPaged ? a.log_x + int64_t(h) * P : a.log_x + (int64_t(b) * W * a.H + h) * P;
  const float* gDt = kPaged ? a.log_dt + h : a.log_dt + int64_t(b) * W * a.H + h;
  const PagedLog pl = paged_log_if<kPaged>(a.pages, b);
  const float A = -expf(a.A_log[h]);  // dA = e^{A·dt} as mamba2_step_kernel makes it
  // Before the wait: the older entries, applied to the rows up to the fold
  // point when it lies among them (its state is stored after the wait).
  const int staged = a.early ? base : 0;                        // block-uniform
  const int pre = staged > 0 && f > 0 && f <= staged ? f : staged;  // entries applied before the wait
  if (staged > 0) {
    if constexpr (kPaged) {
      for (int s = threadIdx.x; s < staged; s += blockDim.x) cp_async<4>(sDt + s, gDt + pl.row(s) * a.H);
      copy_async_bf_rows_at(stB, gB, PagedRows{pl, 0}, staged, N, int64_t(a.G) * N, N8);
      copy_async_bf_rows_at(stX, gX, PagedRows{pl, 0}, staged, P, int64_t(a.H) * P, P8);
    } else {
      for (int s = threadIdx.x; s < staged; s += blockDim.x) cp_async<4>(sDt + s, gDt + int64_t(s) * a.H);
      copy_async_bf_rows(stB, gB, staged, N, int64_t(a.G) * N, N8);
      copy_async_bf_rows(stX, gX, staged, P, int64_t(a.H) * P, P8);
    }
    cp_async_commit();
    cp_async_wait<0>();  // a thread converts what it copied itself, then one barrier
    for (int s = threadIdx.x; s < staged; s += blockDim.x) sDA[s] = expf(A * sDt[s]);
    unstage_bf_rows(sB, N4, stB, N8, staged, N, bf_rows_chunk(stB, gB, N, int64_t(a.G) * N, N8));
    unstage_bf_rows(sX, P4, stX, P8, staged, P, bf_rows_chunk(stX, gX, P, int64_t(a.H) * P, P8));
    __syncthreads();
    for (int s = 0; s < pre; ++s) {  // no outputs: the state update alone
      float Bc[TileT::kColChunks][TileT::kVec], acc[TileT::kRows];
      TileT::columns(sB + s * N4, N, lane, Bc);
      mamba2_token_rows<TileT, false>(cur, sDA[s], sDt[s], Bc, Bc, sX + s * P4, P, nw, w, acc);
    }
  }

  if (a.early) pdl_begin();  // the new tokens' entries and C come from the kernel before
  if constexpr (kPaged) {
    for (int s = staged + threadIdx.x; s < n_log; s += blockDim.x) {
      const float dt = gDt[pl.row(s) * a.H];
      sDt[s] = dt;
      sDA[s] = expf(A * dt);
    }
    load_bf_rows_at(sB + staged * N4, gB, PagedRows{pl, staged}, n_log - staged, N, int64_t(a.G) * N, N4);
    load_bf_rows_at(sX + staged * P4, gX, PagedRows{pl, staged}, n_log - staged, P, int64_t(a.H) * P, P4);
  } else {
    for (int s = staged + threadIdx.x; s < n_log; s += blockDim.x) {
      const float dt = gDt[int64_t(s) * a.H];
      sDt[s] = dt;
      sDA[s] = expf(A * dt);
    }
    load_bf_rows(sB + staged * N4, gB + int64_t(staged) * a.G * N, n_log - staged, N, int64_t(a.G) * N, N4);
    load_bf_rows(sX + staged * P4, gX + int64_t(staged) * a.H * P, n_log - staged, P, int64_t(a.H) * P, P4);
  }
  load_bf_rows(sC, a.Cm + (r0 * a.G + g) * N, T, N, int64_t(a.G) * N, N4);
  __syncthreads();

  const float Dh = a.D[h];
  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.H + h) * P * N : nullptr;
  if (pre > 0 && pre == f) cur.store(Sf, P, N, N, w, nw, lane);  // the fold point came before the wait
  for (int s = pre; s < n_log; ++s) {
    const int t = s - base;  // ≥ 0: a new token, whose C is given
    float Bc[TileT::kColChunks][TileT::kVec], Cc[TileT::kColChunks][TileT::kVec], acc[TileT::kRows];
    TileT::columns(sB + s * N4, N, lane, Bc);
    TileT::columns(sC + max(t, 0) * N4, N, lane, Cc);
    mamba2_token_rows(cur, sDA[s], sDt[s], Bc, Cc, sX + s * P4, P, nw, w, acc);
    if (s + 1 == f) cur.store(Sf, P, N, N, w, nw, lane);
    if (t < 0) continue;  // block-uniform
    TileT::row_sums(acc, lane);
    const int i = TileT::row(w, nw, TileT::summed_row(lane));
    if (TileT::row_writer(lane) && i < P)
      put_bf(a.y, ((r0 + t) * a.H + h) * P + i, acc[0] + Dh * sX[s * P4 + i]);
  }
}

}  // namespace

cudaError_t mamba2_replay_wide(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  return with_mamba2_tile(a, [&](auto tag) -> cudaError_t {
    using TileT = decltype(tag);
    const int nw = (a.P + TileT::kRows - 1) / TileT::kRows;
    const size_t shm = sizeof(float) * size_t(wide_layout(a.T, a.W, a.P, a.N).total);
    if (nw > kMamba2WideWarps || shm > 227 * 1024) return cudaErrorNotSupported;
    auto go = [&](auto kernel) {
      if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
      launch_kernel(kernel, dim3(a.H, a.batch), 32 * nw, shm, stream, a);
      return cudaGetLastError();
    };
    return a.pages.page != nullptr ? go(mamba2_replay_wide_kernel<TileT, true>)
                                   : go(mamba2_replay_wide_kernel<TileT, false>);
  });
}

}  // namespace replayssm::ops::cuda
