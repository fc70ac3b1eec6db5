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
//                         verify, from pre-conv rows the caller kept).
//
// Shapes: B sequences, C channels, K conv width (1..8). Pre-conv rows and
// the window are bf16 (the window only ever holds pre-conv rows, which
// arrive as bf16: storing it in bf16 loses nothing); weights fp32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::ops::cuda {

constexpr int kConvMaxK = 8;

struct Conv1dArgs {
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

// Decode: rows = B.
cudaError_t conv1d_step_cuda(const Conv1dArgs& a, cudaStream_t stream);
// Prefill (or any segment lengths, verify drafts included).
cudaError_t conv1d_prefill_cuda(const Conv1dArgs& a, cudaStream_t stream);
// Windows ← the last K−1 rows of [window; first n_rows[b] rows of segment b]
// (reads x, cu_rows, n_rows; y unused and may be nullptr).
cudaError_t conv1d_window_cuda(const Conv1dArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
