// Mamba2 exact replay (see mamba2_decode.h, `exact`): one block per (head,
// sequence) streams the checkpoint in passes of rows and runs every logged
// token through mamba2_token_rows — the standard step's arithmetic — so
// the new tokens' outputs and the folded state are bit-identical to
// stepping from the checkpoint with the logged dt.
#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_launch.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mamba2_token.cuh"

namespace replayssm::ops::cuda {

namespace {

// kPaged: the log's rows through the block table (Mamba2DecodeArgs::pages).
template <typename TileT, bool kPaged>
__global__ void __launch_bounds__(32 * kMamba2Warps) mamba2_replay_exact_kernel(Mamba2DecodeArgs a) {
  pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, N = a.N, T = a.T, W = a.W, pass_rows = nw * TileT::kRows;
  const int64_t r0 = decode_row0(a.row, b, T);  // this sequence's first row of Cm and y
  if (r0 < 0) return;                           // not in this launch (block-uniform)
  const int n_log = min(max(a.n_log[b], T), W), base = n_log - T;
  const int f = a.fold != nullptr ? min(max(a.fold[b], 0), min(n_log, a.max_fold)) : 0;
  const int W4 = (W + 3) & ~3, P4 = (P + 3) & ~3, N4 = (N + 3) & ~3;
  extern __shared__ float shm[];  // every array a multiple of 4 floats from the start: 16-byte aligned
  float* sC = shm;             // (T, N)
  float* sB = sC + T * N4;     // (W, N) B_s
  float* sX = sB + W * N4;     // (W, P) x_s
  float* sDt = sX + W * P4;    // (W) dt_s
  float* sDA = sDt + W4;       // (W) e^{dt_s·A}

  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * P * N;
  TileT cur;
  cur.load(S, min(pass_rows, P), N, N, w, nw, lane);
  if constexpr (kPaged) {
    const PagedLog pl = paged_log(a.pages, b);
    for (int s = threadIdx.x; s < n_log; s += blockDim.x) {
      const float dt = a.log_dt[pl.row(s) * a.H + h];
      sDt[s] = dt;
      sDA[s] = expf(-expf(a.A_log[h]) * dt);  // as mamba2_step_kernel
    }
    load_bf_rows(sC, a.Cm + (r0 * a.G + g) * N, T, N, int64_t(a.G) * N, N4);
    load_bf_rows_at(sB, a.log_B + int64_t(g) * N, PagedRows{pl, 0}, n_log, N, int64_t(a.G) * N, N4);
    load_bf_rows_at(sX, a.log_x + int64_t(h) * P, PagedRows{pl, 0}, n_log, P, int64_t(a.H) * P, P4);
  } else {
    for (int s = threadIdx.x; s < n_log; s += blockDim.x) {
      const float dt = a.log_dt[(int64_t(b) * W + s) * a.H + h];
      sDt[s] = dt;
      sDA[s] = expf(-expf(a.A_log[h]) * dt);  // as mamba2_step_kernel
    }
    load_bf_rows(sC, a.Cm + (r0 * a.G + g) * N, T, N, int64_t(a.G) * N, N4);
    load_bf_rows(sB, a.log_B + (int64_t(b) * W * a.G + g) * N, n_log, N, int64_t(a.G) * N, N4);
    load_bf_rows(sX, a.log_x + (int64_t(b) * W * a.H + h) * P, n_log, P, int64_t(a.H) * P, P4);
  }
  __syncthreads();

  const float Dh = a.D[h];
  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.H + h) * P * N : nullptr;
  for (int p0 = 0; p0 < P; p0 += pass_rows) {
    const int rows = min(pass_rows, P - p0);
    TileT nxt;
    if (p0 + pass_rows < P)
      nxt.load(S + int64_t(p0 + pass_rows) * N, min(pass_rows, P - p0 - pass_rows), N, N, w, nw, lane);
    for (int s = 0; s < n_log; ++s) {
      const int t = s - base;  // ≥ 0: a new token, whose C is given
      float Bc[TileT::kColChunks][TileT::kVec], Cc[TileT::kColChunks][TileT::kVec], acc[TileT::kRows];
      TileT::columns(sB + s * N4, N, lane, Bc);
      TileT::columns(sC + max(t, 0) * N4, N, lane, Cc);
      mamba2_token_rows(cur, sDA[s], sDt[s], Bc, Cc, sX + s * P4 + p0, rows, nw, w, acc);
      if (s + 1 == f) cur.store(Sf + int64_t(p0) * N, rows, N, N, w, nw, lane);
      if (t < 0) continue;  // block-uniform
      TileT::row_sums(acc, lane);
      const int i = TileT::row(w, nw, TileT::summed_row(lane));
      if (TileT::row_writer(lane) && i < rows)
        put_bf(a.y, ((r0 + t) * a.H + h) * P + p0 + i, acc[0] + Dh * sX[s * P4 + p0 + i]);
    }
    cur = nxt;
  }
}

}  // namespace

// Called by mamba2_replay_cuda for a.exact, arguments already checked.
cudaError_t mamba2_replay_exact(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  return with_mamba2_tile(a, [&](auto tag) {
    using TileT = decltype(tag);
    const int nw = mamba2_warps(a.P, TileT::kRows);
    const int W4 = (a.W + 3) & ~3, P4 = (a.P + 3) & ~3, N4 = (a.N + 3) & ~3;
    const size_t shm = sizeof(float) * (a.T * N4 + a.W * N4 + a.W * P4 + 2 * W4);
    auto go = [&](auto kernel) {
      if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
      launch_kernel(kernel, dim3(a.H, a.batch), 32 * nw, shm, stream, a);
      return cudaGetLastError();
    };
    return a.pages.page != nullptr ? go(mamba2_replay_exact_kernel<TileT, true>)
                                   : go(mamba2_replay_exact_kernel<TileT, false>);
  });
}

}  // namespace replayssm::ops::cuda
