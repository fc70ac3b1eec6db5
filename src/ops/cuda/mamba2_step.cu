// Mamba2 standard decode (see mamba2_decode.h). One block per (head,
// sequence), or per slice of a head's rows when those blocks are too few
// for the GPU, streams the state in passes of rows (mamba2_launch.h); each of
// the T tokens updates a pass's rows, writes them to that token's slot and
// reduces y = S·C + D·x per row.
#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_launch.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mamba2_token.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

template <typename TileT>
__global__ void __launch_bounds__(32 * kMamba2Warps) mamba2_step_kernel(Mamba2DecodeArgs a, int slice_rows) {
  if (a.release_early) pdl_release();  // Mamba2DecodeArgs::release_early
  if (!a.early) pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, N = a.N, T = a.T, pass_rows = nw * TileT::kRows;
  const int p_lo = blockIdx.z * slice_rows, p_hi = min(P, p_lo + slice_rows);  // this block's rows
  const int64_t r0 = decode_row0(a.row, b, T);  // this sequence's first row of x, B, C, dt, out_slot, y
  if (r0 < 0) return pdl_leave();               // not in this launch (block-uniform)
  extern __shared__ float shm[];
  float* sB = shm;          // (T, N)
  float* sC = sB + T * N;   // (T, N)
  float* sX = sC + T * N;   // (T, P) x
  float* sDt = sX + T * P;  // (T) dt, then
  float* sDA = sDt + T;     // (T) e^{dt·A}

  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * P * N;
  TileT cur;
  cur.load(S + int64_t(p_lo) * N, min(pass_rows, p_hi - p_lo), N, N, w, nw, lane);
  // One token: passes stream one ahead in registers, and L2 is asked for
  // the pass after that too (rows contiguous). H200: 1–1.5% faster at batch
  // 64–512; with T = 4 (four state writes a pass) 5% slower, so not there.
  const bool pf = T == 1 && N % 4 == 0;
  auto prefetch_pass = [&](int p0) {
    if (pf && threadIdx.x == 0 && p0 < p_hi) prefetch_l2(S + int64_t(p0) * N, 4u * unsigned(min(pass_rows, p_hi - p0) * N));
  };
  prefetch_pass(p_lo + pass_rows);
  if (a.early) pdl_begin();  // the token's inputs come from the kernel before

  load_bf_rows(sB, a.Bm + (r0 * a.G + g) * N, T, N, int64_t(a.G) * N);
  load_bf_rows(sC, a.Cm + (r0 * a.G + g) * N, T, N, int64_t(a.G) * N);
  load_bf_rows(sX, a.x + (r0 * a.H + h) * P, T, P, int64_t(a.H) * P);
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    const int64_t bt = (r0 + t) * a.H + h;
    const float dt =
        a.dt != nullptr ? a.dt[bt] : fminf(fmaxf(softplus_f(a.dt_raw[bt] + a.dt_bias[h]), a.dt_min), a.dt_max);
    sDt[t] = dt;
    sDA[t] = expf(-expf(a.A_log[h]) * dt);
  }
  __syncthreads();

  const float Dh = a.D[h];
  for (int p0 = p_lo; p0 < p_hi; p0 += pass_rows) {
    const int rows = min(pass_rows, p_hi - p0);
    TileT nxt;
    if (p0 + pass_rows < p_hi) {
      nxt.load(S + int64_t(p0 + pass_rows) * N, min(pass_rows, p_hi - p0 - pass_rows), N, N, w, nw, lane);
      prefetch_pass(p0 + 2 * pass_rows);
    }
    for (int t = 0; t < T; ++t) {
      const float dA = sDA[t], dt = sDt[t];
      float Bc[TileT::kColChunks][TileT::kVec], Cc[TileT::kColChunks][TileT::kVec], acc[TileT::kRows];
      TileT::columns(sB + t * N, N, lane, Bc);
      TileT::columns(sC + t * N, N, lane, Cc);
      mamba2_token_rows(cur, dA, dt, Bc, Cc, sX + t * P + p0, rows, nw, w, acc);
      cur.store(a.state + (int64_t(a.out_slot[r0 + t]) * a.H + h) * P * N + int64_t(p0) * N, rows, N, N, w, nw, lane);
      TileT::row_sums(acc, lane);
      const int i = TileT::row(w, nw, TileT::summed_row(lane));
      if (TileT::row_writer(lane) && i < rows)
        put_bf(a.y, ((r0 + t) * a.H + h) * P + p0 + i, acc[0] + Dh * sX[t * P + p0 + i]);
    }
    cur = nxt;
  }
}

}  // namespace

cudaError_t mamba2_step_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  const size_t shm = sizeof(float) * (2 * size_t(a.T) * a.N + size_t(a.T) * a.P + 2 * size_t(a.T));
  if (a.batch < 0 || a.G <= 0 || a.H % a.G != 0 || a.P <= 0 || a.T < 1 || a.T > kMamba2MaxT || a.N < 1 ||
      a.N > kMaxTileCols || (a.tile_rows != 0 && a.tile_rows != 2 && a.tile_rows != kMamba2Rows) || shm > 48 * 1024)
    return cudaErrorInvalidValue;  // every refusal before the device is asked anything
  int sms = 0;
  if (cudaError_t e = device_sms(&sms); e != cudaSuccess) return e;
  return with_mamba2_tile(a, [&](auto tag) {
    using TileT = decltype(tag);
    const int nw = mamba2_warps(a.P, TileT::kRows);
    const int slice_rows = mamba2_slice_rows(int64_t(a.H) * a.batch, a.P, nw * TileT::kRows, sms);
    launch_kernel(mamba2_step_kernel<TileT>, dim3(a.H, a.batch, (a.P + slice_rows - 1) / slice_rows), 32 * nw, shm,
                  stream, a, slice_rows);
    return cudaGetLastError();
  });
}

}  // namespace replayssm::ops::cuda
