// Block shape of the Mamba2 decode kernels: one block per (head, sequence)
// of kMamba2Warps warps streams the head's (P, N) state in passes of
// kMamba2Warps·kMamba2Rows rows, the next pass loading while the current
// one computes, and the first pass loading before the latency-bound
// prologue (token inputs, log). Measured on the H200 (docs/perf): blocks
// that load a whole slice, compute and exit, and persistent blocks with a
// deep shared-memory ring, both streamed worse than this steady loop.
#pragma once

#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

constexpr int kMamba2Warps = 4;
constexpr int kMamba2Rows = 4;  // default; Mamba2DecodeArgs::tile_rows = 2 halves it

// Warps for P rows of kR per warp: fewer when P is small (no idle warps).
inline int mamba2_warps(int P, int kR) {
  const int w = (P + kR - 1) / kR;
  return w < kMamba2Warps ? w : kMamba2Warps;
}

// Calls f(TileT{}) with the tile for a.N and a.tile_rows.
template <typename Args, typename F>
cudaError_t with_mamba2_tile(const Args& a, F&& f) {
  if (a.tile_rows == 2) return with_row_slice_tile<2>(a.N, f);
  if (a.tile_rows == 0 || a.tile_rows == kMamba2Rows) return with_row_slice_tile<kMamba2Rows>(a.N, f);
  return cudaErrorInvalidValue;
}

}  // namespace replayssm::ops::cuda
