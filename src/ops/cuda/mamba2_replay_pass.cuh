// The per-pass work of the Mamba2 replay kernels (mamba2_replay.cu,
// mamba2_replay_wide.cu): a pass of a head's checkpoint rows, in
// registers, gives those rows' outputs and, on a fold, their new state.
#pragma once

#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

// What a replay block's passes read, in shared memory: the outputs it
// produces (a token of one sequence each; several sequences when a fork
// group shares the checkpoint) and the log entries it folds.
struct ReplayLog {
  const float* C;        // (n_out, N4) C of each output's token
  const float* decay;    // (n_out) e^{L_t}
  const float* Y;        // (n_out, ld) the log's part of y, with D·x (if computed before the passes)
  const int64_t* yoff;   // (n_out) where output u's row of y starts
  int n_out;
  const float* L;   // (W) L_s of the folding sequence
  const float* F;   // (W) fold coefficients e^{L_{f−1}−L_s}·dt_s
  const float* X;   // (W, ld) x_s
  const float* B;   // (W, N4) B_s
  int ld;           // row stride of Y and X (P rounded up to 4)
  int f;            // entries to fold
};

// One pass of rows [p0, p0 + rows): their outputs, then their fold.
// ylog(t, p): the log's part of output t's row p, with D·x (lg.Y, or
// computed where it is needed).
template <typename TileT, typename YLog>
__device__ __forceinline__ void replay_pass(const Mamba2DecodeArgs& a, TileT& cur, const ReplayLog& lg, float* Sf,
                                            int p0, int rows, int nw, int w, int lane, YLog&& ylog) {
  const int N = a.N, N4 = (N + 3) & ~3;  // C and B rows are N4 apart
  for (int t = 0; t < lg.n_out; ++t) {
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
      put_bf(a.y, lg.yoff[t] + p0 + i, lg.decay[t] * acc[0] + ylog(t, p0 + i));
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

}  // namespace replayssm::ops::cuda
