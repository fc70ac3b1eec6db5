// Gated DeltaNet decode kernels on CUDA, the same two families and plan as
// mamba2_decode.h:
//
//   standard — read the state, apply T tokens (S ← e^g·S; u = β(v − Sᵀk);
//              S ← S + k·uᵀ; o = Sᵀq), write one state per token;
//   replay   — outputs for the last T log entries from the checkpoint and
//              the log (dual form), writing the new tokens' u into the log;
//              optionally folding the first `fold` entries (fold ≤ n_log − T:
//              a new token's u is only known after this step's state read)
//              into a new checkpoint in the same pass.
//              With `exact`, the sequential recurrence instead: the log
//              applied entry by entry, the new tokens by the standard
//              step's arithmetic (its kernels, gdn_step.cu), so outputs, u
//              and folds have stepping's bits.
//
// Shapes: B batch, Hk key heads, Hv value heads (a multiple of Hk; value
// head h reads key head h/(Hv/Hk)), W ≤ 64, T ≤ 8; standard: dk ≤ 512, any dv;
// replay: any dk, dv ≤ 256. q and k are already L2-normalised (q also scaled), g is
// the log-decay −exp(A_log)·softplus(a + dt_bias), β = sigmoid(b):
// ops/cpu/gdn_scan.h gdn_prepare.
//
// The log is contiguous — sequence b's entry s at row b·W + s of each log
// array — or paged (GdnDecodeArgs::pages, log_pages.h): entry s at
// row(b, s), the arrays then (slots·page_size, …).
//
// Launched with PDL (launch.cuh), the kernels may read their index arrays
// — slot, out_slot, n_log, fold, fold_slot, row, group_start, seq, the
// pages' table and offsets — before
// they wait for the launch before theirs: those must not be written by
// the kernel launched just before (a step's plan is copied from the
// host; a copy in the stream is not overlapped).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/log_pages.h"

namespace replayssm::ops::cuda {

constexpr int kGdnMaxW = 64;
constexpr int kGdnMaxT = 8;
constexpr int kGdnMaxGroupRows = 16;  // a fork group's members × T (its sums' vectors, two each, in registers)
constexpr int kGdnStepWarpsMaxDk = 128;  // the register-resident standard step (variant 3): rows a warp holds

struct GdnDecodeArgs {
  int batch = 0, Hk = 0, Hv = 0, dk = 0, dv = 0, T = 1;
  float* state = nullptr;         // (slots, Hv, dk, dv) fp32
  const int32_t* slot = nullptr;  // (B) slot read by each sequence
  const uint16_t* q = nullptr;    // (B, T, Hk, dk) bf16
  const uint16_t* v = nullptr;    // (B, T, Hv, dv) bf16
  const float* beta = nullptr;    // (B, T, Hv)
  uint16_t* o = nullptr;          // (B, T, Hv, dv) bf16

  // Standard: the new tokens' keys and decays, and where each state goes.
  const uint16_t* k = nullptr;        // (B, T, Hk, dk) bf16
  const float* g = nullptr;           // (B, T, Hv)
  const int32_t* out_slot = nullptr;  // (B, T); may equal slot when T = 1

  // Replay: the log since the checkpoint, capacity W; the T new tokens are
  // its last T entries (k and g written by the caller, u by the kernel).
  // Paged (`pages` below), the arrays hold rows row(b, s) instead.
  int W = 0;
  const int32_t* n_log = nullptr;   // (B) entries in use, T..W
  const uint16_t* log_k = nullptr;  // (B, W, Hk, dk) bf16
  float* log_u = nullptr;           // (B, W, Hv, dv) fp32
  const float* log_g = nullptr;     // (B, W, Hv)
  const int32_t* fold = nullptr;       // (B) 0..n_log−T leading entries to fold, or nullptr
  const int32_t* fold_slot = nullptr;  // (B) where the folded checkpoint goes (may be slot)
  int max_fold = 0;                    // host bound on fold[b], sizes shared memory

  // Kernel variant, both families: 0 picks by size — for the standard step
  // and exact replay with dk ≤ kGdnStepWarpsMaxDk the register-resident
  // warps (any dv); for the fast replay those warps (the older log
  // entries in the dual form) where their blocks are one wave, else column
  // slices for one token at up to half as many (head, sequence) pairs as
  // SMs; else column slices where batch·Hv is under the SM count (the
  // standard step, exact replay) or the head does not fit a streaming
  // block, streaming blocks per slice of columns, head and sequence
  // otherwise. 1 and 2 force streaming and column slices, 3 the
  // register-resident warps (dk ≤ kGdnStepWarpsMaxDk; in the fast replay
  // exact replay's sequential recurrence), 4 (fast replay only) those warps
  // with the older entries in the dual form on tensor cores (tests, tuning).
  int variant = 0;
  // Streaming blocks' shape (tuning, tests): columns per block (64, 128 or
  // 256; one slice of all dv ≤ 256 where it does not divide dv) and rows
  // per warp per pass (4 or 8); 0: the launcher's choice.
  int slice_cols = 0, tile_rows = 0;
  // A one-token fold's row coefficients precomputed once per block
  // (streaming replay, 128-column slices, T = 1; tuning, tests): 1 always,
  // −1 never, 0 the launcher's choice (where the blocks are ≥ 4 an SM).
  int fold_rows = 0;
  // The passes' two products — S_cᵀ over the new keys and queries, and a
  // fold — on tensor cores at fp32 accuracy (streaming replay, 128-column
  // slices, 4 rows a pass, T ≤ 4; elsewhere it does not apply; tuning,
  // tests): 1 always, −1 never, 0 the launcher's choice (a verify; one
  // token's step stays on FMAs, its fold too: docs/perf).
  int mma = 0;
  // The streaming replay's passes asked of L2 ahead (cp.async.bulk.prefetch.L2,
  // whole rows only; tuning): passes beyond the one in flight in registers,
  // 0..4; −1 the launcher's choice (1 for several tokens, 0 for one: docs/perf).
  int l2_ahead = -1;
  // Ragged steps (decode_rows.cuh): sequence b's T rows of the per-row
  // arrays — q, v, β and o; the standard step's k, g and out_slot — start
  // at row[b] instead of b·T, and a sequence with row[b] < 0 takes no part
  // (its state, log and outputs untouched). nullptr: b·T.
  const int32_t* row = nullptr;
  // Fork-aware replay (as Mamba2DecodeArgs::group_start): sequences that
  // share a checkpoint (beams, best-of-n samples) decode together, one
  // block per (slice of columns, value head, group) reading the shared
  // checkpoint once for all of them (gdn_replay_group.cu). Group k is the
  // sequences at positions group_start[k] .. group_start[k+1] − 1 of the
  // decode order seq (n_groups + 1 entries, non-decreasing; seq nullptr:
  // position v is sequence v); they share slot[], each with its own log,
  // and a group of more than one folds nothing this step. At most
  // max_group members (more are not decoded), max_group·T ≤
  // kGdnMaxGroupRows; an empty group decodes nothing. Needs scratch of
  // gdn_replay_scratch_floats() floats (the checkpoint's sums pass to the
  // log's). Not with `row`, `exact` or a forced variant; the block-shape
  // fields do not apply.
  const int32_t* group_start = nullptr;
  int n_groups = 0;
  int max_group = 0;
  const int32_t* seq = nullptr;
  float* scratch = nullptr;  // (B, T, 2, Hv, dv) S_cᵀk_t, S_cᵀq_t by sequence
  // The groups' sums blocks (tests, tuning): 1 all the rows in blocks of
  // 64 columns, 2 half the rows a warp in blocks of 32; 0 the launcher's
  // choice (halves where whole rows would leave under 4 blocks an SM).
  int group_split = 0;
  // Replay by the sequential recurrence (see above): the standard step's
  // kernel, variant and block shape at this batch (variant, slice_cols,
  // tile_rows as there; fold_rows and mma do not apply); dk ≤ 512, or a
  // slice that fits shared memory.
  bool exact = false;
  // The kernel launched just before this one writes no state and no log
  // entry but this step's T (such as the append). The
  // register-resident step and the streaming replay then read their first
  // state rows before the PDL wait (launch.cuh), while that kernel still
  // runs, and the register-resident replay (exact, or the fast replay's
  // variants 3 and 4) its state and its older log entries, which it applies
  // there up to a fold's point; the other kernels wait first whatever this
  // says. Leave false when the launch before may have written a slot this
  // one reads (a fold, a copy into a slot) or an older entry (a log move).
  bool early = false;

  // Paged log (pages.page == nullptr: sequence b's entry s is row b·W + s,
  // as above): entry s of log_k, log_u and log_g at row(b, s) of
  // log_pages.h, the arrays (slots·page_size, …) — read there and the new
  // tokens' u written there — by every replay kernel, exact and fork
  // groups alike, with the bits of the contiguous log. W is then no
  // stride: it only bounds n_log (≤ kGdnMaxW, which sizes shared memory),
  // and 0 stands for kGdnMaxW.
  LogPages pages;
};

// The arrays every GDN decode call reads or writes, standard or replay.
inline bool gdn_has_common_arrays(const GdnDecodeArgs& a) {
  return a.state != nullptr && a.slot != nullptr && a.q != nullptr && a.v != nullptr && a.beta != nullptr &&
         a.o != nullptr;
}

inline int64_t gdn_replay_scratch_floats(int batch, int T, int Hv, int dv) {
  return int64_t(batch) * T * 2 * Hv * dv;
}

// Both return cudaErrorInvalidValue, before any device work, for a shape
// or knob out of range or a missing array (state, slot, q, v, β, o; the
// standard step's k, g, out_slot; replay's log), and launch asynchronously
// on `stream` otherwise.
cudaError_t gdn_step_cuda(const GdnDecodeArgs& a, cudaStream_t stream);
cudaError_t gdn_replay_cuda(const GdnDecodeArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
