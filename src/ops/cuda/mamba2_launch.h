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
constexpr int kMamba2WideWarps = 16;  // the one-kernel replay's blocks when they are few (mamba2_replay.cu)
constexpr int kMamba2Rows = 4;  // default; Mamba2DecodeArgs::tile_rows = 2 halves it

// Warps for P rows of kR per warp: fewer when P is small (no idle warps).
inline int mamba2_warps(int P, int kR) {
  const int w = (P + kR - 1) / kR;
  return w < kMamba2Warps ? w : kMamba2Warps;
}

// Rows of a head per block in the standard step: all P, unless the (head,
// sequence) blocks are fewer than 4 per SM — then slices of whole passes,
// as many as bring them there (batch 1 at H = 128, P = 64: 4 slices of one
// 16-row pass each, 9.6 → 6.6 µs on the H200; docs/perf). Slices repeat the
// block's prologue (the token's B, C and x), which is small next to a pass.
// The replay kernel does not slice: at batch 1 its log prologue, not the
// state stream, sets its time (8.2 µs either way), and the slice bounds
// cost its one-kernel path 8 registers and 7–20% at batch ≥ 8. (Where the
// blocks are no more than the SMs the replay takes wide blocks instead:
// mamba2_replay_wide.cu.)
inline int mamba2_slice_rows(int64_t blocks, int P, int pass_rows, int sms) {
  const int passes = (P + pass_rows - 1) / pass_rows;
  const int64_t want = (4 * int64_t(sms) + blocks - 1) / blocks;
  const int slices = int(want < passes ? want : passes);
  return (passes + slices - 1) / slices * pass_rows;
}

// Calls f(TileT{}) with the tile for a.N and a.tile_rows.
template <typename Args, typename F>
cudaError_t with_mamba2_tile(const Args& a, F&& f) {
  if (a.tile_rows == 2) return with_row_slice_tile<2>(a.N, f);
  if (a.tile_rows == 0 || a.tile_rows == kMamba2Rows) return with_row_slice_tile<kMamba2Rows>(a.N, f);
  return cudaErrorInvalidValue;
}

}  // namespace replayssm::ops::cuda
