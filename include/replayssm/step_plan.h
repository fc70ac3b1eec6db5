// StepPlan: what the state manager hands a backend for one step — integer
// arrays only. The manager (replayssm/state.h) owns every decision: which
// checkpoint each sequence starts from, which log entries it replays, which
// pages hold its K/V rows and log, where states are written, what storage
// is copied or freed. A backend owns the tensors behind the slot numbers
// and executes the plan; it decides nothing that the manager's statistics
// or a later step depend on.
//
// Storage is addressed by slots, dense non-negative indices into a
// backend's buffers:
//   page slot        — one page's K/V rows of every attention layer
//                      (B = StateOptions::page_size positions);
//   log slot         — one page's log entries of every SSM layer;
//   checkpoint slot  — every SSM layer's state and conv window after some
//                      position.
// A slot's contents are the backend's format (fp32 on the CPU reference,
// bf16 rows and fp32 states on CUDA): the manager only counts them.
//
// A step runs as: `ops` in order (copies and frees of storage since the
// last plan), then the model over the rows, each stateful layer against the
// slices; last, a backend may free each SSM layer's part of `folded_logs`
// once that layer has run (their entries are folded into this step's
// checkpoints and nothing reads them again).
#pragma once

#include <cstdint>
#include <vector>

namespace replayssm {

// A copy or a release of storage. Copies go from a slot that stays valid
// to a fresh one; a freed slot may be handed out again by a later op or by
// the step itself, so ops must run in order.
struct StorageOp {
  enum Kind : int32_t {
    kCopyPage,        // K/V rows of page src into page dst
    kCopyLog,         // log entries of log src into log dst
    kCopyCheckpoint,  // state and conv window of checkpoint src into dst
    kFreePage,
    kFreeLog,
    kFreeCheckpoint,
  };
  Kind kind = kCopyPage;
  int32_t src = -1;  // copies: the source; frees: the slot freed
  int32_t dst = -1;  // copies: the destination
};

// One sequence's part of the step: n tokens at positions [pos, pos+n),
// rows [row, row+n) of the step's activations.
struct PlanSlice {
  int64_t seq = 0;  // the manager's sequence id (errors, tests); backends do not interpret it
  int64_t pos = 0, n = 0, row = 0;
  bool commit = true;    // committed on arrival (informational: the manager tracks cursors)
  // A rebuild re-runs tokens the sequence already holds (a re-prefill from
  // the checkpoint at pos): its K/V rows are read, never written (other
  // sequences may share those pages), and only pages that already have a
  // log get their entries back.
  bool rebuild = false;
  // The SSM layers start from checkpoint slot `base` (−1: the zero state
  // at position 0) at base_pos and replay the log of [base_pos, pos).
  int32_t base = -1;
  int64_t base_pos = 0;
  // The states this step writes: after write_pos[i] tokens into checkpoint
  // slot write_slot[i], for i in [write_begin, write_end), ascending
  // positions in [base_pos, pos + n]. A write may reuse `base` itself
  // (reuse ≥ 0 is its index, relative to write_begin): the backend reads
  // the base before writing it, and the plan orders this slice after every
  // other slice reading that slot.
  int32_t write_begin = 0, write_end = 0;
  int32_t reuse = -1;
  // The block table: page and log slots of positions [i·B, (i+1)·B) for
  // i in [0, ⌈(pos+n)/B⌉), at StepPlan::pages[table_begin + i] and
  // StepPlan::logs[table_begin + i] (log −1: that page has no log).
  int32_t table_begin = 0;
  // Pages wholly below this position get none of the step's entries (they
  // are folded into this step's checkpoint); the kernels read the step's
  // new entries from their own scratch, never back from the pages.
  int64_t fold_below = 0;
};

struct StepPlan {
  std::vector<StorageOp> ops;       // before the step, in order
  std::vector<int32_t> tokens;      // the step's rows' token ids, in row order
  std::vector<PlanSlice> slices;    // in execution order
  std::vector<int64_t> write_pos;   // PlanSlice::write_*
  std::vector<int32_t> write_slot;
  std::vector<int32_t> pages, logs; // PlanSlice::table_begin
  std::vector<int32_t> folded_logs; // log slots this step folds away, layer by layer
  int64_t page_size = 1;            // B
  // Outputs by the sequential recurrence, bit for bit what stepping gives
  // (StateOptions::exact; snapshot and recompute always: their states are
  // stepped), rather than the dual form from the checkpoint and the log.
  bool exact = false;
  int64_t rows() const { return static_cast<int64_t>(tokens.size()); }
};

}  // namespace replayssm
