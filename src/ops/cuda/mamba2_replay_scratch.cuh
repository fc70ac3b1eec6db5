// The Mamba2 split replay's scratch, as its per-head passes read it
// (mamba2_replay.cu, mamba2_replay_mma.cu): written by mamba2_replay_log
// (mamba2_replay_log.cu) by position v of the decode order (sequence
// Mamba2DecodeArgs::seq[v], or v), so that a fork group's outputs are
// neighbours there, as
//   y_log[v, t, h, p] at ((v·T + t)·H + h)·P + p, then
//   decay[v, t, h]    at batch·T·H·P + (v·T + t)·H + h.
// A pass waits for that kernel (PDL) only here, at its last pass, and
// writes y once for the block (launch.cuh, "by construction").
#pragma once

#include "ops/cuda/fork_group.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

// After the PDL wait, the log's part of y (n_out rows of P, row stride P4)
// and the decays of block (h, first position v) into shared memory by
// cp.async, committed. Output u is row v·T + u of the scratch (member
// u / T, token u % T). Every thread of the block calls it once.
__device__ __forceinline__ void request_replay_scratch(const Mamba2DecodeArgs& a, int v, int h, int n_out,
                                                       float* sY, float* sDecay, int P4) {
  pdl_wait();
  if (!a.release_early) pdl_release();
  const int T = a.T, P = a.P;
  copy_async_rows(sY, a.scratch + int64_t(v) * T * a.H * P + int64_t(h) * P, n_out, P, int64_t(a.H) * P, P4);
  const float* dec = a.scratch + int64_t(a.batch) * T * a.H * P + int64_t(v) * T * a.H + h;
  for (int u = threadIdx.x; u < n_out; u += blockDim.x) cp_async<4>(sDecay + u, dec + int64_t(u) * a.H);
  cp_async_commit();
}

// y = e^{L_t}·S_c·C_t + the log's part, a row of each output by the block,
// once the scratch requested above has come.
__device__ __forceinline__ void write_replay_outputs(const Mamba2DecodeArgs& a, const int64_t* sYoff,
                                                     const float* sDecay, const float* sAcc, const float* sY,
                                                     int n_out, int P4) {
  cp_async_wait<0>();
  __syncthreads();
  for (int i = threadIdx.x; i < n_out * a.P; i += blockDim.x) {
    const int u = i / a.P, p = i % a.P;
    put_bf(a.y, sYoff[u] + p, sDecay[u] * sAcc[u * P4 + p] + sY[u * P4 + p]);
  }
}

}  // namespace replayssm::ops::cuda
