// Gated DeltaNet chunk scan on CUDA: a prompt chunk of T tokens per
// sequence (any T) through the sequential delta rule of ops/cpu/gdn_scan.h,
// the state held in registers for the whole chunk — read once, written
// once, every token's output on the way. What a long prompt's GDN layers
// run (the decode kernels take T ≤ 8: gdn_decode.h).
//
//   α = e^g;  u = β·(v − (αS)ᵀk);  S ← αS + k·uᵀ;  o = Sᵀq = α·(Sᵀ_old q) + u·(k·q)
//
// (the read and the output taken from the state before the token, as
// gdn_step_cuda's streaming kernel does, so one pass over the rows serves
// both). Replay: each sequence's log since its checkpoint (n_log[b]
// entries of k, u, g — the logged form S ← αS + k·uᵀ) is applied first —
// the fold a long chunk makes — and the state after the chunk goes to
// out_slot[b] as the new checkpoint.
//
// Shapes: B batch, Hk key heads, Hv value heads (value head h reads key
// head h/(Hv/Hk)), dk ≤ 512, any dv, W log capacity. q and k are
// gdn_prepare's (L2-normalised, q scaled). Rows r = b·T + t, dense, or
// ragged (cu_rows: sequence b's rows cu_rows[b] + t, its own count).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/log_pages.h"

namespace replayssm::ops::cuda {

struct GdnScanArgs {
  int batch = 0, Hk = 0, Hv = 0, dk = 0, dv = 0, T = 0;
  float* state = nullptr;             // (slots, Hv, dk, dv) fp32
  const int32_t* slot = nullptr;      // (B) slot each sequence reads
  const int32_t* out_slot = nullptr;  // (B) where its state after the chunk goes (may equal slot)
  const uint16_t* q = nullptr;        // (B·T, Hk·dk) bf16
  const uint16_t* k = nullptr;        // (B·T, Hk·dk) bf16
  const uint16_t* v = nullptr;        // (B·T, Hv·dv) bf16
  const float* g = nullptr;           // (B·T, Hv) log-decay
  const float* beta = nullptr;        // (B·T, Hv)
  uint16_t* o = nullptr;              // (B·T, Hv·dv) bf16
  // Ragged (nullptr: every sequence T rows): sequence b's rows are
  // cu_rows[b] .. cu_rows[b+1]−1 (at most T). A sequence with none is not
  // touched: state neither read nor written, log not applied.
  const int32_t* cu_rows = nullptr;   // (B + 1), ascending
  // With cu_rows: sequence b takes only its first n_rows[b] rows, at most
  // cu_rows[b+1] − cu_rows[b] (as Mamba2ScanArgs::n_rows). nullptr: all of them.
  const int32_t* n_rows = nullptr;    // (B)
  // As Mamba2ScanArgs::apply_log_alone: a sequence with no rows and
  // n_log[b] > 0 applies its log and writes out_slot[b].
  bool apply_log_alone = false;
  // Each chunk token's u = β·(v − (αS)ᵀk), the value its log entry keeps
  // (gdn_decode.h's log_u), as this scan computed it; nullptr: not
  // written. Replaying those entries (S ← αS + k·uᵀ, gdn_token.cuh) gives
  // the bits of the state the scan writes.
  float* u = nullptr;                 // (B·T, Hv·dv) fp32, rows as o's

  // Replay (n_log nullptr: none): sequence b's log entries 0..n_log[b]−1,
  // applied before the chunk's tokens (gdn_decode.h's layout).
  int W = 0;
  const int32_t* n_log = nullptr;   // (B) 0..W (paged: any count)
  const uint16_t* log_k = nullptr;  // (B, W, Hk·dk) bf16
  const float* log_u = nullptr;     // (B, W, Hv·dv) fp32
  const float* log_g = nullptr;     // (B, W, Hv)

  // Paged log (pages.page == nullptr: sequence b's entry s is row b·W + s,
  // as above): entry s of log_k, log_u and log_g at row(b, s) of
  // log_pages.h, the arrays (slots·page_size, …), with the bits of the
  // contiguous log. W is then ignored: n_log[b] may be any count of
  // entries (a log longer than the decode kernels' kGdnMaxW, applied
  // before a chunk).
  LogPages pages;
};

// T ≥ 1 (ragged: the most rows a sequence has); batch = 0 is a no-op. A bad shape is cudaErrorInvalidValue before
// anything reaches the device.
cudaError_t gdn_scan_cuda(const GdnScanArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
