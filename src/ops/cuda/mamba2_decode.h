// Mamba2 decode kernels on CUDA, two families over one step plan:
//
//   standard — read the state, apply T tokens, write one state per token
//              (T = 1 in place: plain decoding; T > 1: the per-draft-state
//              speculative verify of vLLM/SGLang);
//   replay   — outputs for the last T entries of a sequence's log from its
//              checkpoint and the log (dual form), the checkpoint only read;
//              optionally folding the first `fold` entries into a new
//              checkpoint in the same pass (the conditional flush: AR decode
//              when the window fills, commit after a verify, restore(p)).
//
// Host header: plain device pointers (bf16 as uint16_t), shapes, and the
// plan arrays the host computed (slots, log lengths, folds). The math is
// DESIGN.md §2 and the CPU reference src/ops/cpu/{ssm_step.h,replay.cpp}.
//
// Shapes: B batch, H heads, P head dim, N state size (≤ 256), G groups
// (head h reads group h/(H/G)), W log capacity per sequence (≤ 64),
// T tokens per sequence this step (≤ 8).
//
// The log is contiguous — sequence b's entry s at row b·W + s of each log
// array — or paged (Mamba2DecodeArgs::pages, log_pages.h): entry s at
// row(b, s), the arrays then (slots·page_size, …).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/log_pages.h"

namespace replayssm::ops::cuda {

constexpr int kMamba2MaxW = 64;
constexpr int kMamba2MaxT = 8;
constexpr int kMamba2MaxGroup = 16;

struct Mamba2DecodeArgs {
  int batch = 0, H = 0, P = 0, N = 0, G = 0, T = 1;
  const float* A_log = nullptr;    // (H)
  const float* D = nullptr;        // (H)
  const float* dt_bias = nullptr;  // (H)
  float dt_min = 0.0f, dt_max = 3.4e38f;
  float* state = nullptr;          // (slots, H, P, N) fp32
  const int32_t* slot = nullptr;   // (B) slot read by each sequence
  // Per-row arrays: (B, T, …) — row b·T + t — or, with a row map (`row`
  // below), rows as the map places them.
  const uint16_t* Cm = nullptr;    // (B, T, G, N) bf16, C of each new token
  uint16_t* y = nullptr;           // (B, T, H, P) bf16 output (incl. D·x)

  // Standard: the new tokens' inputs, and where each token's state goes.
  const uint16_t* x = nullptr;        // (B, T, H, P) bf16 (post-conv)
  const uint16_t* Bm = nullptr;       // (B, T, G, N) bf16
  const float* dt_raw = nullptr;      // (B, T, H) before softplus
  const float* dt = nullptr;          // (B, T, H) after softplus and clamp; when set, used instead of dt_raw
  const int32_t* out_slot = nullptr;  // (B, T); may equal slot when T = 1 (in place)

  // Replay: each sequence's log since its checkpoint, capacity W; the T new
  // tokens are its last T entries (written by whoever produced x, B, dt).
  // Paged (`pages` below), the arrays hold rows row(b, s) instead.
  int W = 0;
  const int32_t* n_log = nullptr;     // (B) entries in use, T..W
  const uint16_t* log_x = nullptr;    // (B, W, H, P) bf16
  const uint16_t* log_B = nullptr;    // (B, W, G, N) bf16
  const float* log_dt = nullptr;      // (B, W, H) after softplus and clamp
  // Conditional flush: fold[b] (0..n_log) leading entries go into the
  // checkpoint written to fold_slot[b] (may be slot[b] itself when no other
  // sequence of the batch reads that slot). nullptr: no folds this step.
  const int32_t* fold = nullptr;       // (B)
  const int32_t* fold_slot = nullptr;  // (B)
  int max_fold = 0;                    // host bound on fold[b], sizes shared memory

  int tile_rows = 0;  // tuning: state rows per warp and pass, 2 or 4 (0: the default, 4)

  // The kernel launched just before this one writes no state and no log
  // entry but this step's T (such as the append). The step's, the
  // one-kernel and the fused replay's first pass of the state, and the
  // wide replay's older log entries, are then read before the PDL wait
  // (launch.cuh), while that kernel still runs. Leave false when the launch before may
  // have written a slot this one reads (a fold, a copy into a slot) or an
  // older entry (a log move).
  bool early = false;
  // The kernel launched just after this one reads, before its PDL wait,
  // nothing that the kernel launched just before this one writes (the
  // decoder's: the gated norm or the log move, which read only weights
  // there). The standard step, the wide and the fused replay and the split
  // replay's per-head pass then release it at their start rather than
  // after their wait, so it is scheduled while their own early part runs
  // (launch.cuh).
  bool release_early = false;

  // Replay: the log's part of the outputs can run as a kernel of its own,
  // one block per (group, sequence) — per chunk of a group's heads when a
  // long log of wide heads would not fit — so the B·C dots shared by a
  // group's heads are computed once and the per-head pass only streams the
  // checkpoint, waiting (PDL) for that kernel only at its last pass
  // whatever `early` says (the kernel before it writes only the scratch,
  // which the pass reads last). Needs scratch of
  // mamba2_replay_scratch_floats() floats.
  float* scratch = nullptr;
  // 0 picks: when batch·H ≤ the SM count (exact: twice that), the
  // sequential recurrence in wide blocks, a head per pass (bit-identical
  // to stepping, like `exact`);
  // fork groups on tensor cores where N % 16 == 0 and max_group·T ≤ 8;
  // else the fused kernel (the log's part and the pass in one block) where
  // N is 128 or 256, P a multiple of 16 and T ≤ 4; else split when scratch
  // is given and batch·H ≥ 16 × SMs; else one kernel. 1 one kernel
  // (the dual form, or with `exact` the 4-warp exact kernel); 2 split; 3
  // wide blocks; 4 split on tensor cores (TF32 at fp32 accuracy) where
  // N % 16 == 0 and a block has ≤ 8 outputs, else 2; 5 fused where it
  // applies (no fork groups), else as 0 (tests, tuning).
  int variant = 0;
  // Fork-aware replay: sequences that share a checkpoint (beams, best-of-n
  // samples) are decoded together, one block per head reading the shared
  // checkpoint once for all of them. Group k is the sequences at positions
  // group_start[k] .. group_start[k+1] − 1 of the decode order (n_groups + 1
  // entries, non-decreasing): they share slot[] (each has its own log), and
  // a group of more than one folds nothing this step (a sequence whose
  // window fills goes in a group of its own). At most max_group members
  // (more are not decoded). An empty group decodes nothing: a caller whose
  // count of groups changes from step to step keeps n_groups (the grid) and
  // leaves the groups past its count empty. Needs scratch (the split path
  // runs).
  const int32_t* group_start = nullptr;
  int n_groups = 0;
  int max_group = 0;  // host bound on members per group (1..kMamba2MaxGroup), sizes shared memory
  // The decode order the groups index: position v is sequence seq[v] (a
  // permutation of 0..batch−1), so that a group's members need not be
  // neighbours in the batch. nullptr: position v is sequence v. Only with
  // group_start.
  const int32_t* seq = nullptr;

  // Ragged steps (decode_rows.cuh): sequence b's T rows of the per-row
  // arrays — Cm and y; the standard step's x, Bm, dt or dt_raw and
  // out_slot — start at row[b] instead of b·T, and a sequence with
  // row[b] < 0 takes no part (its state, log and outputs untouched).
  // nullptr: b·T. Not with fork groups.
  const int32_t* row = nullptr;

  // Exact replay: the log replayed by the sequential recurrence — the same
  // per-token arithmetic as mamba2_step_cuda, so outputs and folds are
  // bit-identical to stepping with the logged dt — at n_log × the FLOPs of
  // a step (one kernel: wide blocks or 4 warps, as `variant` picks;
  // scratch is not used).
  bool exact = false;

  // Paged log (pages.page == nullptr: sequence b's entry s is row b·W + s,
  // as above): entry s of every log array at row(b, s) of log_pages.h, the
  // arrays (slots·page_size, …); every replay kernel, all variants, exact
  // and fork groups alike, with the bits of the contiguous log. W is then
  // no stride: it only bounds n_log (≤ kMamba2MaxW, which sizes shared
  // memory), and 0 stands for kMamba2MaxW.
  LogPages pages;
};

inline int64_t mamba2_replay_scratch_floats(int batch, int T, int H, int P) {
  return int64_t(batch) * T * H * (int64_t(P) + 1);
}

// Standard decode: T tokens from state[slot[b]], state after token t written
// to state[out_slot[b·T + t]]; y for every token.
cudaError_t mamba2_step_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream);
// Replay decode: y for the last T log entries; checkpoint read, not written;
// folds where fold[b] > 0.
cudaError_t mamba2_replay_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream);

// Whether a decode step runs faster with one token a sequence at a's batch
// and shape (batch, H) through mamba2_step_cuda — the checkpoint read,
// stepped and written back, every token folded — than through the
// output-only replay: where the (head, sequence) blocks are over the SMs
// and at most twice them. Measured end to end, not on the kernels alone:
// there the output-only kernels lose at 128–256 blocks (H200, P = 64,
// N = 128, each launch its own slots, in CUDA graphs: 0.92–1.03× the
// standard step), yet in a model's step they win at up to the SMs' count
// (Nemotron-H-8B and -4B shapes at batch 1, 128 and 96 blocks: 1.02× and
// 1.01× standard's tokens/s, stepped 1.00×) and lose only past it (8B at
// batch 2, 256 blocks: 0.99×, stepped 1.00×; 4B at batch 2, 192 blocks:
// 1.00× either way; from 288 blocks 1.01–1.07×): H200, 2026-12-04, d14a59a.
// False when the device cannot be asked.
bool mamba2_replay_steps_faster(const Mamba2DecodeArgs& a);

}  // namespace replayssm::ops::cuda
