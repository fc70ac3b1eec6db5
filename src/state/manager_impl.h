// StateManager internals shared by its translation units: the page,
// checkpoint and sequence records, the slot pools, and the step under
// construction. See replayssm/state.h for the model and docs/state.md for
// the invariants.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "replayssm/state.h"

namespace replayssm {

// Dense slots, reused last-freed first, so a backend's buffers stay as
// small as the most slots ever in use at once (high).
struct SlotAllocator {
  std::vector<int32_t> free;
  int32_t next = 0, live = 0, high = 0;
  int32_t take();
  void give(int32_t slot);
};

// One page: B positions. Its K/V rows live in page slot `kv`; its log, if
// any, in log slot `log`. Log entries are valid for positions [log_lo,
// log_hi) of the page: those written since the log was allocated (for
// positions below a sharer's length they hold the same tokens' entries for
// every sharer). The log's per-layer parts held are [log_first, log_end):
// between steps all of them or none; inside a step a fresh log gains each
// layer's part as that layer appends, and a folded one loses each layer's
// part once that layer's kernels have folded it (the statistics follow the
// backend's storage layer by layer).
struct Page {
  int refs = 0;
  std::vector<int64_t> holders;  // the sequences holding it (refs of them), all at the same block index
  int32_t kv = -1;
  int32_t log = -1;
  int64_t log_lo = 0, log_hi = 0;
  int log_first = 0, log_end = 0;
  uint64_t last_use = 0;
  bool has_log() const { return log >= 0; }
};

// State + conv window of every SSM layer after `pos`, in checkpoint slot
// `slot`. An evicted checkpoint keeps its record (holders drop it lazily)
// but no slot. One that a step writes gains each layer's part when that
// layer runs (parts: the layers held, a prefix).
struct Ckpt {
  int refs = 0;
  int64_t pos = 0;
  int32_t slot = -1;
  int parts = 0;
  uint64_t last_use = 0;
  bool evicted() const { return slot < 0; }
};

struct Seq {
  int64_t id = 0;
  int64_t request = 0;
  std::vector<int32_t> tokens;
  int64_t committed = 0;
  std::vector<int64_t> pages;  // block table: page of positions [i·B, (i+1)·B)
  std::vector<int64_t> ckpts;  // ascending by position
  // Position of the base the next step is expected to start from; a step
  // that must start lower (its checkpoint was evicted or cut away) counts
  // as a log-replay restore.
  int64_t expect_base = 0;
  // Pages below this index hold no log (trim_log's cursor, so a step does
  // not rescan the whole block table).
  int64_t trim_from = 0;
  // Where the last step's rebuild ended (−1: the last step was none): a
  // re-prefill split over several steps counts as one restore.
  int64_t rebuilt_to = -1;
  // A position whose checkpoint the sequence keeps beside its interval
  // ones (keep_checkpoint_at; −1: none): the next replay step passing it
  // writes it, and forks at or past it keep it too.
  int64_t keep_at = -1;
};

struct Request {
  int64_t budget = 0;
  std::set<int64_t> seqs;  // the root and its forks
  Retention keep;          // what its sequences keep of their past
};

// Where one cache layer's parts sit among the manager's units.
struct LayerLayout {
  CacheLayerSpec spec;
  int ssm = -1;  // SSM: index of its part in a checkpoint and a log
};

// The host's decision for one slice of a step; every layer runs against it.
struct SlicePlan {
  SeqSlice s;
  bool rebuild = false;
  int64_t base = -1;       // checkpoint id; -1 = the zero state at position 0
  int64_t base_pos = 0;
  std::vector<int64_t> write_pos, write_ckpt;
  int64_t committed_after = 0;
  // The write that reuses the base's slot (-1: none). Such a slice runs
  // after every other slice reading that base: plan_step orders the plan.
  int reuse = -1;
  std::vector<int64_t> leave_base;  // other holders of a reused base: they drop it
  // Per write: the other sequences that move onto it (forks on the same
  // base holding the same prefix; family.cpp). Empty: a private write.
  std::vector<std::vector<int64_t>> share_with;
  std::vector<int32_t> tokens;  // the slice's token ids, appended at finish_step
  // Pages wholly below this position get no log in this step (fold_below):
  // their entries are folded into the step's own checkpoint and would be
  // trimmed at finish_step.
  int64_t fold_below = 0;
  bool folds(int64_t pi, int64_t B) const { return (pi + 1) * B <= fold_below; }
};

// A sentinel checkpoint id: the zero state at position 0, never stored.
constexpr int64_t kZeroCkpt = -1;

struct StateManager::Impl {
  Impl(CacheSpec spec, StateOptions opt, StateUnits units);

  CacheSpec spec;
  StateOptions opt;
  StateUnits units;
  StateStats stats;
  std::vector<LayerLayout> layers;
  int64_t B = 16;
  int n_ssm = 0;
  // Bytes: one page's log part and one checkpoint's part per SSM layer,
  // and their totals; one page's K/V rows.
  std::vector<int64_t> log_part, ckpt_part;
  int64_t log_total = 0, ckpt_total = 0, page_kv = 0;
  double replay_flops = 0.0, prefill_flops = 0.0;  // per token, cost model
  bool logs = true;                                // strategy keeps an input log

  // Hashed, not ordered: every step looks up each page of each sequence
  // (its block table), and a tree's pointer chase was most of a step's host
  // time at batch 256. Nothing depends on their order (eviction sorts its
  // candidates by id first).
  std::unordered_map<int64_t, Page> pages;
  std::unordered_map<int64_t, Ckpt> ckpts;
  std::unordered_map<int64_t, Seq> seqs;
  std::map<int64_t, Request> requests;
  int64_t next_page = 0, next_ckpt = 0, next_seq = 0;
  SlotAllocator page_slots, log_slots, ckpt_slots;
  std::vector<StorageOp> ops;  // queued for the next plan
  uint64_t clock = 0;
  std::set<int64_t> pinned;

  // The step between plan_step and finish_step.
  bool in_step = false;
  std::vector<SlicePlan> plan;
  // Pages whose log this step folds away layer by layer (plan_step_folds):
  // page → (a sequence holding it, its index there).
  std::map<int64_t, std::pair<int64_t, int64_t>> step_folded;

  // Accounting.
  enum StateKind { kCheckpoints, kLogs };
  void add_state(int64_t bytes, StateKind kind);
  void add_kv(int64_t bytes);
  int64_t ckpt_bytes() const { return ckpt_total; }
  int64_t log_bytes() const { return log_total; }
  int64_t log_held(const Page& p) const;  // bytes of its log's parts held

  // Pages and checkpoints (refcounted; freed at zero).
  int64_t new_page(int64_t holder, bool with_log);
  // The holder's private copy of shared page `id` (copy-on-write), with its
  // log; the holder leaves the original.
  int64_t copy_page(int64_t id, int64_t holder);
  // Gives the page a fresh log; each layer's part is counted when that
  // layer appends the step's entries (entries become valid as finish_step
  // records them).
  void alloc_log(Page& p);
  void drop_log(Page& p);
  void unref_page(int64_t id, int64_t holder);
  void ref_page(int64_t id, int64_t holder);
  // A checkpoint record with a slot; with `data` every layer's part is
  // counted now (a copy), else each when its layer writes it in the step.
  int64_t new_ckpt(int64_t pos, bool data = true);
  void drop_ckpt_data(Ckpt& c);
  void unref_ckpt(int64_t id);
  // Inside a step: which pages finish_step will trim (a lower bound: every
  // sharer's expected base after the step), so that each SSM layer frees
  // its part of their log as soon as its kernels have folded it into the
  // step's new checkpoints.
  void plan_step_folds();
  // The layer-by-layer accounting of a step that ran: checkpoint parts
  // gained, folded log parts lost, fresh log parts gained, in the order a
  // backend holds them (account_layer per SSM layer).
  void account_step();

  // The retention of a sequence's request.
  const Retention& keep(const Seq& s) const { return requests.at(s.request).keep; }

  Seq* find(int64_t id);
  const Seq* find(int64_t id) const;
  int64_t ckpt_pos(int64_t id) const { return id == kZeroCkpt ? 0 : ckpts.at(id).pos; }
  int32_t ckpt_slot(int64_t id) const { return id == kZeroCkpt ? -1 : ckpts.at(id).slot; }
  // True when log entries of [from, to) are all present.
  bool log_covers(const Seq& s, int64_t from, int64_t to) const;
  // Highest checkpoint ≤ len whose log reaches len (kZeroCkpt counts);
  // nullopt if none. Without logs only a checkpoint at len qualifies.
  std::optional<int64_t> best_log_base(const Seq& s, int64_t len) const;
  // Highest live checkpoint ≤ len (kZeroCkpt if none).
  int64_t best_any_base(const Seq& s, int64_t len) const;
  RestorePlan plan_resume(const Seq& s) const;
  // Drops evicted checkpoint refs and those the strategy no longer needs.
  void prune(Seq& s);
  void drop_tokens(Seq& s, int64_t pos);
  void release_seq(int64_t id);
  void reset_expect(Seq& s);
  // Keeps s.ckpts ascending by position after an insertion.
  void sort_ckpts(Seq& s);
  // After anything that changed a sequence's checkpoints or cursors:
  // prune, recompute the expected base, trim the log.
  void settle(Seq& s);
  // The checkpoint a sequence's next step would start from (kZeroCkpt
  // included); nullopt when it needs a restore.
  std::optional<int64_t> live_base(const Seq& s) const;
  // The most log entries a step should replay (StateOptions::replay_limit).
  int64_t replay_limit() const { return opt.replay_limit > 0 ? opt.replay_limit : 4 * opt.window; }
  // Replay's state writes for every slice of a step (family.cpp): lone
  // sequences flush every W; families of forks get checkpoints at the
  // nodes of their token tree. Sets write_pos, share_with and reuse.
  void plan_replay_step(std::vector<SlicePlan>* plan) const;
  // Where a planned slice's log may start (SlicePlan::fold_below): its
  // highest write minus log_retention — trim_log's limit once the slice
  // stands on that write — or 0 (log everything) for a rebuild, without a
  // write, or with log_retention < 0.
  int64_t fold_below(const SlicePlan& sp) const;
  // Frees log pages wholly below the live checkpoint − log_retention, of
  // every sequence that holds them (a shared page goes when it is below
  // every sharer's limit).
  void trim_log(Seq& s);
  // True when page index pi of s lies below the trim limit of every
  // sequence sharing that page.
  bool log_unneeded(const Seq& s, int64_t pi) const;
  Result<int64_t> fork_into(int64_t seq, std::optional<int64_t> pos, std::optional<int64_t> budget,
                            std::optional<Retention> retention = std::nullopt);

  // Eviction (evict.cpp). protect: ids that must survive.
  struct Protected {
    std::set<int64_t> pages, ckpts;
  };
  void protect_resume(const Seq& s, Protected* p) const;
  struct Candidate {
    bool is_ckpt;
    int64_t id;
    int64_t bytes;
    double cost;  // FLOPs to rebuild
    uint64_t last_use;
  };
  std::vector<Candidate> eviction_candidates(const Protected& p, std::optional<int64_t> request) const;
  int64_t evictable_bytes(const Protected& p, std::optional<int64_t> request) const;
  int64_t evict(int64_t bytes, const Protected& p, std::optional<int64_t> request);
  int64_t request_bytes(int64_t request) const;
  // Makes room for `need` new state bytes (global and, if given, per
  // request); evicts as needed. Fails, evicting nothing, when impossible.
  Status reserve(int64_t need, const std::map<int64_t, int64_t>& need_by_request, const Protected& p);
};

}  // namespace replayssm
