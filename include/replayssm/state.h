// StateManager: every sequence's state, as bookkeeping only. It holds no
// tensor: it decides, and a backend (replayssm/backend.h) executes the
// plan it emits for each step (replayssm/step_plan.h).
//
// Per sequence it keeps its tokens, a committed cursor, a block table of
// pages and a few refcounted checkpoints. A page covers B positions: the
// K/V rows of every attention layer and, while it has one, the log entries
// of every SSM layer (the small per-token SSM inputs). A checkpoint is
// every SSM layer's state and conv window after some position. The three
// strategies are policies of this one mechanism:
//
//   replay    — a checkpoint and the log since it; the state is written
//               only when a window W of committed entries is folded into
//               a new checkpoint (flush). Forks share pages and
//               checkpoints; a rollback moves a cursor; restore(p) replays
//               the log from the nearest checkpoint at or below p.
//   snapshot  — a state per position that may be needed (each draft's, as
//               today's engines keep them) and a copy per fork.
//   recompute — the live state plus sparse checkpoints; going back re-runs
//               the model over the tokens since one.
//
// Ownership and invariants:
//  - The manager owns every page, log and checkpoint record and the slots
//    it hands out; a backend owns the storage behind those slots and
//    touches it only as a plan says. Slots are dense and reused.
//  - Pages are refcounted and shared by forks of one request; a step that
//    appends into a shared page copies it first (copy-on-write). Pages
//    are never evicted: K/V rows live as long as a sequence holds them.
//  - Checkpoints are refcounted and immutable while shared; a flush writes
//    into its base's own slot only when nothing else holds the base.
//  - Eviction drops a checkpoint's state or a page's log, never tokens or
//    K/V rows: it never loses a sequence, it only makes a later restore
//    slower (a longer replay, or a re-prefill that the caller runs).
//  - A sequence of another request may hold a request's pages and
//    checkpoints (fork_request): a prefix cache keeps such sequences, so
//    what a finished request computed outlives it.
//
// A step is plan_step (validates, reserves memory — evicting under the
// budgets — and allocates; a failure changes nothing), then the backend's
// execution of the plan, then finish_step (appends the tokens, moves
// cursors and checkpoints, trims logs). Between the two no other call may
// be made. Statistics count what the plans make the backend hold and
// write, layer by layer as the backend runs them.
//
// When no checkpoint with a complete log reaches a sequence's length (its
// log was evicted, or it was cut back past its checkpoints under a strategy
// without logs), resume_plan() says kReprefill and the caller steps the
// tokens [from, length) again with SeqSlice{pos = from}: the manager
// recognises the rebuild and writes a checkpoint at its end.
//
// Not thread-safe: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayssm/cache_spec.h"
#include "replayssm/status.h"
#include "replayssm/step_plan.h"

namespace replayssm {

enum class Strategy { kReplay, kSnapshot, kRecompute };
enum class EvictionPolicy { kLru, kCostAware };
const char* strategy_name(Strategy s);
Result<Strategy> parse_strategy(std::string_view name);
const char* eviction_name(EvictionPolicy e);
Result<EvictionPolicy> parse_eviction(std::string_view name);

struct StateOptions {
  // A page is allocated whole (B tokens' K/V rows and log entries for every
  // layer), so B is bounded: 4096 tokens is far past any useful page and
  // keeps a mistyped size a refusal rather than an allocation failure.
  static constexpr int64_t kMaxPageSize = 4096;

  Strategy strategy = Strategy::kReplay;
  int64_t window = 16;               // W: flush when committed − checkpoint ≥ W (replay)
  int64_t checkpoint_interval = 0;   // K: keep one older checkpoint per K tokens (0: none);
                                     // recompute's sparse interval (0: W)
  int64_t page_size = 1;             // B tokens per page (bounds log waste: ≤ 2(B−1) entries)
  int64_t log_retention = 0;         // log tokens kept below the live checkpoint (-1: all)
  int64_t state_budget = 0;          // bytes for checkpoints + logs, all sequences (0: unlimited)
  int64_t replay_limit = 0;          // most log entries a fork's step replays before a flush
                                     // (0: 4·W; else >= W)
  EvictionPolicy eviction = EvictionPolicy::kCostAware;
  bool exact = false;                // outputs by the sequential recurrence (bit-identical)
  Status validate() const;
};

// What a request keeps of its past beyond what its next step needs: one
// older checkpoint per `checkpoint_interval` tokens (0: none) and
// `log_retention` log tokens below its live checkpoint (−1: all).
// StateOptions' fields of the same names are the default; a request may
// keep more (a prefix cache keeps what makes a later hit cheap) or less.
struct Retention {
  int64_t checkpoint_interval = 0;
  int64_t log_retention = 0;
};

// Bytes held by a set of sequences and by nothing else: what releasing
// them all would free now.
struct HeldBytes {
  int64_t state = 0;  // checkpoints + logs
  int64_t kv = 0;     // K/V pages
};

// How a sequence gets back to a steppable state at its length.
enum class RestorePath {
  kCheckpoint,  // a checkpoint sits exactly there
  kLogReplay,   // a checkpoint below it, and the log since: replayed by the next step
  kReprefill,   // the caller must re-run tokens [from, to) through the model
};
const char* restore_path_name(RestorePath p);

struct RestorePlan {
  RestorePath path = RestorePath::kCheckpoint;
  int64_t from = 0;  // the checkpoint position the path starts from
  int64_t to = 0;    // the sequence length
};

// Counters since construction, in the backend's bytes (StateUnits).
struct StateStats {
  int64_t state_bytes = 0, state_bytes_peak = 0;  // checkpoints + logs
  int64_t checkpoint_bytes = 0, log_bytes = 0;    // state_bytes by kind, now
  int64_t kv_bytes = 0, kv_bytes_peak = 0;
  int64_t state_writes_bytes = 0;                 // checkpoint data written (flush, snapshot, fork copy)
  int64_t replayed_tokens = 0;                    // log entries read back by steps
  int64_t restores_checkpoint = 0, restores_log_replay = 0, restores_reprefill = 0;
  int64_t evictions = 0, evicted_bytes = 0;
  int64_t shared_flushes = 0;                     // one checkpoint written for a family of forks
};

// The sizes the manager counts, as a backend stores them, per SSM layer
// (in CacheSpec order among the SSM layers) and per token.
struct StateUnits {
  std::vector<int64_t> checkpoint_part;  // bytes of one checkpoint's part (state + conv window)
  std::vector<int64_t> log_entry;        // bytes of one token's log entry
  int64_t kv_row = 0;                    // bytes of one token's K/V rows, all attention layers
};

// A state read back for inspection (Backend::read_state): the sequence's
// base checkpoint slot and the block table that reaches its length.
struct StateRead {
  int32_t base = -1;
  int64_t base_pos = 0, length = 0;
  int64_t page_size = 1;
  std::vector<int32_t> logs;  // log slot per page (−1: none)
};

class StateManager {
 public:
  // `opt` must pass StateOptions::validate() (callers check it and return
  // its Status): a constructor has no Status to return, so options that
  // fail it abort with validate()'s message — a bug in the caller.
  StateManager(CacheSpec spec, StateOptions opt, StateUnits units);
  ~StateManager();
  StateManager(const StateManager&) = delete;
  StateManager& operator=(const StateManager&) = delete;

  // A new empty sequence, the root of a new request. budget_bytes > 0 caps
  // the state bytes (checkpoints + logs) the request's sequences reference.
  // `retention`: what the request keeps (default: the options' fields).
  int64_t add_sequence(int64_t budget_bytes = 0, std::optional<Retention> retention = std::nullopt);
  // A child holding the first `pos` tokens (default: all) of `seq`, in the
  // same request. Replay: shares pages and checkpoints. Snapshot/recompute:
  // copies the state at pos (if the parent has it).
  Result<int64_t> fork(int64_t seq, std::optional<int64_t> pos = std::nullopt);
  // As fork(), but the child is the root of a new request (its own budget,
  // its own families of forks): an owner outside the parent's request.
  Result<int64_t> fork_request(int64_t seq, std::optional<int64_t> pos = std::nullopt,
                               int64_t budget_bytes = 0, std::optional<Retention> retention = std::nullopt);
  Status release(int64_t seq);
  // Drops tokens [pos, length). Drafts and committed tokens alike.
  Status truncate(int64_t seq, int64_t pos);
  // The first n uncommitted tokens become committed.
  Status commit(int64_t seq, int64_t n);
  // truncate(pos), then the cheapest way back to a steppable state, by the
  // cost model (docs/state.md); counted in stats by path.
  Result<RestorePlan> restore(int64_t seq, int64_t pos);
  // Replay: keeps a checkpoint at `pos` (0 < pos ≤ length) beside the
  // interval ones — written by the next step that passes pos, kept by the
  // sequence and by its forks at or past pos. A prefix-cache hit that
  // replays its log to pos asks for it, so later hits there replay
  // nothing. One position a sequence; other strategies ignore it.
  Status keep_checkpoint_at(int64_t seq, int64_t pos);
  // What the sequence needs before its next step (not counted).
  Result<RestorePlan> resume_plan(int64_t seq) const;
  // Frees at least `bytes` of evictable state (policy order) and returns the
  // bytes freed. Never loses a sequence: only makes later restores slower.
  int64_t evict(int64_t bytes);

  // A step over `step` (slices of consecutive rows of `tokens`): checks
  // each slice against its sequence, reserves room (may fail with
  // kOutOfBudget, evicting nothing then) and returns the plan. Nothing is
  // appended until finish_step(plan); until then no other call may be made.
  Result<StepPlan> plan_step(std::span<const SeqSlice> step, std::span<const int32_t> tokens);
  // The step has run: its tokens become part of each sequence.
  void finish_step(const StepPlan& plan);
  // The step did not run (the backend refused it before touching any
  // storage): the manager forgets it. Storage the plan allocated stays
  // with the sequences that now reference it (its contents undefined until
  // a step writes them), so the only safe use afterwards is release().
  void abort_step(const StepPlan& plan);
  // Storage ops queued since the last plan (forks' copies, releases,
  // evictions), for a backend that frees storage without waiting for a
  // step. plan_step hands them out too.
  std::vector<StorageOp> take_ops();

  // What reading back the state at the sequence's length needs; fails if a
  // restore is due. For inspection and tests (Backend::read_state).
  Result<StateRead> read_plan(int64_t seq) const;

  bool has_sequence(int64_t seq) const;
  int64_t length(int64_t seq) const;     // -1 if unknown
  int64_t committed(int64_t seq) const;  // -1 if unknown
  std::span<const int32_t> tokens(int64_t seq) const;
  const StateStats& stats() const;
  const StateOptions& options() const;
  const StateUnits& units() const;
  const CacheSpec& spec() const;
  // Pinned sequences keep what their next step needs (the resume base
  // checkpoint and the log since) out of eviction until unpin_all(). A
  // caller preparing a batch pins it so rebuilding one member cannot evict
  // another's state. Sequences in a step are always protected during it.
  void pin(std::span<const int64_t> seqs);
  void unpin_all();
  // What releasing every listed sequence would free now (shared storage
  // counted only when no other sequence holds it). Unknown ids are skipped.
  HeldBytes exclusive_bytes(std::span<const int64_t> seqs) const;
  // Live objects, for leak checks: 0, 0, 0 once every sequence is released.
  int64_t n_sequences() const;
  int64_t n_pages() const;
  int64_t n_checkpoints() const;
  // The most slots of each kind in use at once (what a backend's buffers
  // must hold; a backend with fixed pools sizes them from these bounds).
  int32_t page_slots_high() const;
  int32_t log_slots_high() const;
  int32_t checkpoint_slots_high() const;
  // Sizes of the units the budget counts: one checkpoint (every SSM layer's
  // state + conv window) and one page's log (0 without a log).
  int64_t checkpoint_bytes() const;
  int64_t page_log_bytes() const;

  struct Impl;  // opaque; src/state/manager_impl.h

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace replayssm
