// Causal depthwise conv1d + SiLU on CUDA, carrying each sequence's conv
// window: the math of ops/cpu/conv1d.h,
//   y[t,c] = silu(bias[c] + Σ_j weight[c·K + j]·row[t−K+1+j, c]),
// where rows before a segment come from the window (oldest first) and
// afterwards the window holds the last K−1 pre-conv rows.
//
//   conv1d_step_cuda    — decode: one new row per sequence (row b of x is
//                         sequence b), one thread per (channel, sequence),
//                         the window shifted in place;
//   conv1d_prefill_cuda — segments of any length (ragged, cu_rows), one
//                         thread per (channel, chunk of 16 rows, sequence),
//                         then a second launch updates the windows (in place,
//                         so it must run after every chunk has read them) —
//                         unless keep_window (a speculative verify: which of
//                         its rows stay is only known after the pass);
//   conv1d_window_cuda  — that window update alone, over the first n_rows[b]
//                         rows of each segment (the accepted prefix of a
//                         verify, from pre-conv rows the caller kept);
//   conv1d_gather_window_cuda — a paged log's window at a position (below).
//
// With a paged log (Conv1dArgs::log_rows) there is no mutable window: the
// rows before a sequence's new ones are its log's pre-conv rows and its
// checkpoint's window, read where they are (the step and prefill kernels,
// and mamba2_conv_append_cuda), and a checkpoint's window is gathered from
// them when the checkpoint is written (conv1d_gather_window_cuda).
//
// Shapes: B sequences, C channels, K conv width (1..8). Pre-conv rows and
// the window are bf16 (the window only ever holds pre-conv rows, which
// arrive as bf16: storing it in bf16 loses nothing); weights fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/log_pages.h"

namespace replayssm::ops::cuda {

constexpr int kConvMaxK = 8;

// The window path's fields. Conv1dArgs adds the paged window's; the window
// path's kernels take these alone, so that their parameter is the one they
// had before the paged fields (nvcc loads a larger one differently, after
// the PDL wait rather than before it).
struct Conv1dWindowArgs {
  int batch = 0, C = 0, K = 0;
  const float* weight = nullptr;   // (C, K); weight[c·K + K−1] multiplies the newest row
  const float* bias = nullptr;     // (C) or nullptr
  uint16_t* window = nullptr;      // (slots, K−1, C) bf16, updated in place (K = 1: none, may be nullptr)
  const int32_t* slot = nullptr;   // (B) window slot of each sequence (K = 1: may be nullptr)
  const uint16_t* x = nullptr;     // (rows, C) bf16 pre-conv, row stride ldx
  int64_t ldx = 0;
  uint16_t* y = nullptr;           // (rows, C) bf16 post-conv, row stride ldy
  int64_t ldy = 0;                 // step: y may alias x; prefill: must not
  // Prefill: sequence b's rows are [cu_rows[b], cu_rows[b+1]) of x and y.
  const int32_t* cu_rows = nullptr;  // (B + 1), ascending, cu_rows[0] = 0
  int max_rows = 0;                  // host bound on cu_rows[b+1] − cu_rows[b]
  bool keep_window = false;          // prefill: leave the windows as they were
  // Window update: rows of segment b that go in (≤ its length); nullptr: all.
  const int32_t* n_rows = nullptr;   // (B)
};

struct Conv1dArgs : Conv1dWindowArgs {
  // Paged window (log_rows != nullptr, K > 1): the K−1 rows before sequence
  // b's first new row are not read from `window` (which is neither read nor
  // written, and may be nullptr, as may slot): rows at positions ≥ the
  // sequence's base come from its log's pre-conv rows (log_rows, addressed
  // by `pages`, log_pages.h; entry s = the s-th position after the base),
  // earlier ones from its base checkpoint's conv window (ckpt_window +
  // ckpt_slot[b]·(K−1)·C, oldest row first; ckpt_slot[b] < 0: zeros, the
  // state at position 0). n_logged[b] = entries logged before the new rows
  // (position − base). The step, the prefill (the rows before segment b;
  // the segment's own come from x, and no window update follows) and
  // mamba2_conv_append_cuda take it, with the bits of the window path on
  // the same rows; conv1d_window_cuda, whose job is the window, refuses it.
  const uint16_t* log_rows = nullptr;     // (slots·page_size, ldlog) bf16 pre-conv rows
  int64_t ldlog = 0;                      // row stride of log_rows (0: C)
  LogPages pages;                         // the log's rows; pages.page required
  const int32_t* n_logged = nullptr;      // (B)
  const uint16_t* ckpt_window = nullptr;  // (slots, K−1, C) bf16
  const int32_t* ckpt_slot = nullptr;     // (B), −1: zeros
};

// Decode: rows = B.
cudaError_t conv1d_step_cuda(const Conv1dArgs& a, cudaStream_t stream);
// Prefill (or any segment lengths, verify drafts included).
cudaError_t conv1d_prefill_cuda(const Conv1dArgs& a, cudaStream_t stream);
// Windows ← the last K−1 rows of [window; first n_rows[b] rows of segment b]
// (reads x, cu_rows, n_rows; y unused and may be nullptr).
cudaError_t conv1d_window_cuda(const Conv1dArgs& a, cudaStream_t stream);

// The paged window at a position: for each sequence b with out_slot[b] ≥ 0,
// out_window + out_slot[b]·(K−1)·C ← the K−1 pre-conv rows before position
// base + n_upto[b], oldest first, from a's paged sources (log rows at
// positions ≥ the base, its checkpoint's window before; n_logged unused) —
// what a checkpoint written at that position stores as its conv window.
// n_upto[b] ≤ the entries logged. No slot written may be one this launch
// reads (a ckpt_slot[·] of the same buffer). Reads log_rows, pages,
// ckpt_window and ckpt_slot of a; K = 1 (no window) and batch 0 do nothing.
// Shapes: n_upto, out_slot (B); out_window (slots, K−1, C) bf16.
cudaError_t conv1d_gather_window_cuda(const Conv1dArgs& a, const int32_t* n_upto, uint16_t* out_window,
                                      const int32_t* out_slot, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
