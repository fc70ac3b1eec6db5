// Mamba2 chunk scan on CUDA: a prompt chunk of T tokens per sequence (any
// T) through the sequential recurrence of ops/cpu/mamba2_scan.h, the state
// held in registers for the whole chunk — read once, written once, every
// token's y on the way. What a long prompt's Mamba2 layers run (the decode
// kernels take T ≤ 8: mamba2_decode.h).
//
//   S[h] ← e^{dt·A[h]}·S[h] + B_t ⊗ (dt·x_t[h]);  y_t[h] = S[h]·C_t + D[h]·x_t[h]
//   dt = clamp(softplus(dt_raw + dt_bias), dt_min, dt_max)
//
// The per-token arithmetic is mamba2_step_cuda's (mamba2_token.cuh, the
// same register tile), so T tokens here give the bits of T one-token
// steps. Replay: each sequence's log since its checkpoint (n_log[b]
// entries) is applied first — the fold a long chunk makes, since the chunk
// does not fit the log — and the state after the chunk goes to out_slot[b]
// as the new checkpoint.
//
// Shapes: B batch, H heads, P head dim, N state size (≤ 256), G groups
// (head h reads group h/(H/G)), W log capacity. Rows of the chunk are
// r = b·T + t, or ragged (cu_rows: sequence b's rows cu_rows[b] + t, its
// own count of them — a step in which prompts and decoding sequences take
// different numbers of tokens), at explicit row strides (the post-conv
// rows x | B | C of a projection, unsplit).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/log_pages.h"

namespace replayssm::ops::cuda {

struct Mamba2ScanArgs {
  int batch = 0, H = 0, P = 0, N = 0, G = 0, T = 0;
  const float* A_log = nullptr;    // (H)
  const float* D = nullptr;        // (H)
  const float* dt_bias = nullptr;  // (H)
  float dt_min = 0.0f, dt_max = 3.4e38f;
  float* state = nullptr;              // (slots, H, P, N) fp32
  const int32_t* slot = nullptr;       // (B) slot each sequence reads
  const int32_t* out_slot = nullptr;   // (B) where its state after the chunk goes (may equal slot)
  const uint16_t* x = nullptr;         // (B·T, H·P) bf16 post-conv, row stride ldx
  int64_t ldx = 0;
  const uint16_t* Bm = nullptr;        // (B·T, G·N) bf16, row stride ldbc
  const uint16_t* Cm = nullptr;        // (B·T, G·N) bf16, row stride ldbc
  int64_t ldbc = 0;
  const uint16_t* dt_raw = nullptr;    // (B·T, H) bf16 before softplus, row stride lddt
  int64_t lddt = 0;
  uint16_t* y = nullptr;               // (B·T, H·P) bf16 (incl. D·x), row stride ldy
  int64_t ldy = 0;
  // Ragged (nullptr: every sequence T rows, r = b·T + t): sequence b's rows
  // are cu_rows[b] .. cu_rows[b+1]−1 (at most T of them). A sequence with
  // none is not touched: its state is neither read nor written, its log
  // not applied.
  const int32_t* cu_rows = nullptr;  // (B + 1), ascending
  // With cu_rows: sequence b takes only its first n_rows[b] rows, at most
  // cu_rows[b+1] − cu_rows[b] (the caller's bound: a ragged step whose
  // decoding sequences take the decode kernels, n_rows 0, while the
  // others' chunks take the scan). nullptr: all of them.
  const int32_t* n_rows = nullptr;  // (B)
  // A sequence that takes no rows but has log entries (n_log[b] > 0) still
  // applies them and writes the state after them to out_slot[b]: a
  // checkpoint at a position inside the log, for a caller that keeps every
  // entry of a step in its log (the backend of src/backend/cuda). false:
  // such a sequence is not touched, as above (a step's sequences without rows).
  bool apply_log_alone = false;

  // Replay (n_log nullptr: none): sequence b's log entries 0..n_log[b]−1,
  // applied before the chunk's tokens, without outputs (mamba2_decode.h's layout).
  int W = 0;
  const int32_t* n_log = nullptr;     // (B) 0..W (paged: any count)
  const uint16_t* log_x = nullptr;    // (B, W, H·P) bf16
  const uint16_t* log_B = nullptr;    // (B, W, G·N) bf16
  const float* log_dt = nullptr;      // (B, W, H) after softplus and clamp

  // Tuning, tests (0: the launcher's choice). The same bits whatever they
  // are: a row's arithmetic and its sum's tree over the lanes do not change.
  int tile_rows = 0;       // state rows a warp, 2 or 4
  int tokens_per_sum = 0;  // tokens whose y rows a warp sums in one transposed butterfly, 1 or 2

  // Paged log (pages.page == nullptr: sequence b's entry s is row b·W + s,
  // as above): entry s of log_x, log_B and log_dt at row(b, s) of
  // log_pages.h, the arrays (slots·page_size, …), with the bits of the
  // contiguous log. W is then ignored: n_log[b] may be any count of
  // entries (a log longer than the decode kernels' kMamba2MaxW, applied
  // before a chunk).
  LogPages pages;
};

// T ≥ 1 (ragged: the most rows a sequence has); batch = 0 is a no-op. A bad shape or stride is
// cudaErrorInvalidValue before anything reaches the device.
cudaError_t mamba2_scan_cuda(const Mamba2ScanArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
