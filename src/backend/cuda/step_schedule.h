// StepSchedule: how the CUDA backend runs one StepPlan — which kernel takes
// each slice of each kind of SSM layer, the index arrays every launch reads,
// and the order of the launches. Host code only (no CUDA): built once per
// step and uploaded in one copy, then replayed by every layer of a kind, so
// that the arrays a kernel may read before its PDL wait are never written
// by a kernel of the step (launch.cuh).
//
// The storage it addresses (slot_storage.h): a log slot holds B positions'
// entries, row slot·B + p % B of each log array; new tokens whose page has
// no log slot in the plan (−1: a strategy without logs, or a page the step
// folds) get a scratch log slot after the plan's slots, so every kernel
// finds every entry of [base_pos, pos + n) through one block table per
// slice (the plan's log slots from the page of base_pos on, with
// `first` = base_pos % B: entry s is position base_pos + s).
//
// Each SSM kind runs its slices in two passes:
//   outputs — the new tokens' outputs (and GDN's u, which the log keeps):
//     decode  the replay kernels (mamba2_replay_cuda, gdn_replay_cuda) for
//             slices of ≤ decode_tokens tokens whose log, new tokens
//             included, is ≤ decode_log entries; one launch per token count
//             (the kernels take one T a launch). One of the slice's writes
//             folds in the same pass where the kernel can fold it (Mamba2:
//             any position in (base, pos + n]; GDN: ≤ pos, since a new
//             token's u is known only after the pass);
//     step    GDN's standard step (gdn_step_cuda) for a slice with no log
//             to replay (base at pos) whose entries no log keeps (snapshot,
//             recompute): its states after each token are the plan's
//             writes (stepping's bits);
//     scan    the chunk scans for everything else: the log applied, then
//             the tokens, the state after them written where the plan
//             writes it at pos + n (else to a scratch checkpoint slot).
//   writes — every planned state not written by the first pass, in
//     ascending order a slice: the chunk scan with no rows over the log
//     entries from the nearest state below it (the base or an earlier
//     write), apply_log_alone; a state at that very position is a copy.
//   The windows of all writes are gathered last (conv1d_gather_window_cuda)
//   into a staging area, then copied to their slots.
// Slices whose write reuses their base's slot (PlanSlice::reuse) run both
// passes after every other slice (the plan's order guarantee, kept across
// batched launches); such a slice with several writes folds none in its
// first pass, so its chain reads the base before the reused write lands.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "replayssm/status.h"
#include "replayssm/step_plan.h"

namespace replayssm::cuda {

// What the kernels take in one launch, and which paths a model allows.
struct ScheduleLimits {
  int decode_tokens = 8;   // kMamba2MaxT, kGdnMaxT
  int decode_log = 64;     // kMamba2MaxW, kGdnMaxW
  bool gdn_step = true;    // the standard GDN step for slices without a log
};

// Where the schedule's slot indices point beyond the plan's (slot_storage.h).
struct ScheduleSlots {
  int32_t log_scratch = 0;   // the first scratch log slot
  int32_t zero = 0;          // a checkpoint slot of zeros (base −1: the state at position 0)
  int32_t ckpt_scratch = 0;  // the first scratch checkpoint slot
};

// An array in StepSchedule::buf: offset and length (−1: absent).
struct Span32 {
  int64_t at = -1, n = 0;
  bool present() const { return at >= 0; }
};

// One launch of an SSM kind's pass. Arrays are per sequence of the launch
// (b < batch) unless named per row (rows of the step).
struct SsmLaunch {
  enum Kind { kDecode, kStep, kScan, kCopy } kind = kDecode;
  int batch = 0;
  int T = 0;             // decode, step: tokens a sequence; scan: the most rows a sequence has (≥ 1)
  int max_fold = 0;      // decode: the largest fold (0: no fold array)
  bool log_alone = false;  // scan: the writes pass (no rows, apply_log_alone)
  int page_stride = 0;   // entries of `page` a sequence
  Span32 slot;           // (batch) the state read
  Span32 n_log;          // decode: entries incl. the T new; scan: entries before the rows
  Span32 row;            // decode, step: each sequence's first row
  Span32 cu_rows;        // scan: (batch + 1) each sequence's first row
  Span32 n_rows;         // scan: (batch) rows taken
  Span32 out_slot;       // scan: (batch); step: per row (rows of the step)
  Span32 fold;           // decode: (batch) entries folded, 0: none
  Span32 fold_slot;      // decode: (batch)
  Span32 page, first;    // (batch, page_stride), (batch): the log's block table (log_pages.h)
  Span32 u_entry;        // GDN scan of the outputs pass: per row, the log row its u goes to (−1: none)
  int32_t copy_src = -1, copy_dst = -1;  // kCopy: checkpoint slots (a state at its source's position)
};

// The window gather of one kind (every write of the step).
struct WindowGather {
  int n = 0;                  // writes
  int page_stride = 0;
  Span32 page, first, ckpt_slot, n_upto, out;  // out[j] = j: the staging index
  Span32 write;                                // write_slot on the device: the scatter from staging
  std::vector<int32_t> write_slot;             // host: the checkpoint slot write j's window goes to
};

// One SSM kind's passes (identical for every layer of the kind).
struct KindSchedule {
  std::vector<SsmLaunch> launches;  // in order
  WindowGather windows;
  int64_t state_reads = 0;          // (statistics) checkpoint reads by the launches
};

struct StepSchedule {
  std::vector<int32_t> buf;  // every array below, uploaded in one copy
  bool exact = false;        // StepPlan::exact: the replay kernels' sequential paths
  int64_t rows = 0;          // R
  int n_seqs = 0;            // S, the slices in row order
  int max_rows = 0;          // the most rows a slice has
  bool all_single = true;    // every slice one token: attention's decode kernel
  int max_len = 0;           // the longest pos + n
  // Per row.
  Span32 tokens, row_pos, entry;  // entry: the log row of the row's new entry (every row has one)
  Span32 kv_seq, kv_pos;          // K/V append: the row's sequence (its page-table row) and position (−1: a rebuild's)
  // Per sequence, in row order.
  Span32 cu_rows;                 // (S + 1) first rows
  Span32 seq_pos, seq_len;        // pos, pos + n
  Span32 conv_logged, conv_ckpt;  // conv: entries logged before the new rows (pos − base_pos); base slot (−1: zeros)
  Span32 conv_page, conv_first;   // conv: the log's block table from base_pos
  int conv_page_stride = 0;
  Span32 kv_table;                // (S, kv_max_pages) page slots
  int kv_max_pages = 0;
  Span32 logit_rows;              // the kept rows
  KindSchedule mamba, gdn;
  int log_scratch = 0;            // scratch log slots used
  int ckpt_scratch = 0;           // scratch checkpoint slots used (besides the zero slot)
  int total_writes = 0;
  const int32_t* at(const Span32& s) const { return buf.data() + s.at; }
};

// The schedule of `plan` (which must already be checked against the
// manager's invariants it relies on: an error names the first one broken,
// before anything runs). has_mamba / has_gdn: the kinds the model has.
Result<StepSchedule> build_schedule(const StepPlan& plan, std::span<const int64_t> logit_rows, bool has_mamba,
                                    bool has_gdn, const ScheduleLimits& limits, const ScheduleSlots& slots);

// The highest slot of each kind a plan (or storage ops alone) names, +1.
struct SlotsNamed {
  int32_t pages = 0, logs = 0, ckpts = 0;
};
SlotsNamed slots_named(const StepPlan& plan);
SlotsNamed slots_named(std::span<const StorageOp> ops);

}  // namespace replayssm::cuda
