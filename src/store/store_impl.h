// ReplayStore internals shared by its translation units: the page,
// checkpoint and sequence records, per-layer layouts, and the step plan.
// See replay_store.h for the model and docs/store.md for the invariants.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "replayssm/replay_store.h"

namespace replayssm {

// One page: B token slots. kv holds every attention layer's K/V rows,
// log every SSM layer's entries, one allocation per SSM layer (B × entry
// floats); log may be absent (evicted or never allocated). Log entries are
// valid for slots [log_lo, log_hi): slots written since the log was
// allocated (for positions below a sharer's length they hold the same
// tokens' entries for every sharer). Between steps a page's log holds
// every layer or none; inside a step a layer's part may be empty: not yet
// written (allocated when that layer appends the step's entries) or folded
// away (the step's new checkpoint holds it; Impl::step_folded).
struct Page {
  int refs = 0;
  std::vector<float> kv;
  std::vector<std::vector<float>> log;  // [SSM layer] (B, entry)
  int64_t log_lo = 0, log_hi = 0;
  uint64_t last_use = 0;
};

// State + conv window of every SSM layer after `pos` tokens, one
// allocation per SSM layer (window (K-1, C), then state). Evicted
// checkpoints keep their record (holders drop it lazily) but no data. A
// checkpoint a step writes gets each layer's part when that layer runs.
struct Ckpt {
  int refs = 0;
  int64_t pos = 0;
  std::vector<std::vector<float>> data;  // [SSM layer]
  uint64_t last_use = 0;
  bool evicted() const { return data.empty(); }
};

struct Seq {
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
};

struct Request {
  int64_t budget = 0;
  std::set<int64_t> seqs;  // the root and its forks
};

// Where one cache layer lives inside a page and a checkpoint.
struct LayerLayout {
  CacheLayerSpec spec;
  int64_t kv_off = 0, kv_width = 0;      // attention: Hkv·D per K (and per V) row
  int ssm = -1;                          // SSM: index of its part in Page::log, Ckpt::data
  int64_t entry = 0;                     // SSM: entry floats per token
  int64_t win_off = 0, win_floats = 0;   // SSM: (K-1)·C, at the start of its checkpoint part
  int64_t state_off = 0, state_floats = 0;
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
  // after every other slice reading that base: begin_step orders the plan.
  int reuse = -1;
  std::vector<int64_t> leave_base;  // other holders of a reused base: they drop it
  // Per write: the other sequences that move onto it (forks on the same
  // base holding the same prefix; store_flush.cpp). Empty: a private write.
  std::vector<std::vector<int64_t>> share_with;
  std::vector<int32_t> tokens;  // the slice's token ids, appended at end_step
  // Pages wholly below this position get no log in this step (Impl::fold_below):
  // their entries are folded into the step's own checkpoint and would be
  // trimmed at end_step; the kernels read new entries from the step's
  // scratch, never from the pages they write.
  int64_t fold_below = 0;
  bool folds(int64_t pi, int64_t B) const { return (pi + 1) * B <= fold_below; }
};

// A sentinel checkpoint id: the zero state at position 0, never stored.
constexpr int64_t kZeroCkpt = -1;

struct ReplayStore::Impl {
  Impl(CacheSpec spec, StoreOptions opt);

  CacheSpec spec;
  StoreOptions opt;
  StoreStats stats;
  std::vector<LayerLayout> layers;
  int64_t B = 16;
  int64_t page_kv_floats = 0, page_log_floats = 0, ckpt_floats = 0;
  double replay_flops = 0.0, prefill_flops = 0.0;  // per token, cost model
  bool logs = true;                                // strategy keeps an input log

  std::map<int64_t, Page> pages;
  std::map<int64_t, Ckpt> ckpts;
  std::map<int64_t, Seq> seqs;
  std::map<int64_t, Request> requests;
  int64_t next_page = 0, next_ckpt = 0, next_seq = 0;
  uint64_t clock = 0;
  std::vector<SlicePlan> plan;
  std::set<int64_t> pinned;
  // Pages whose log this step folds away layer by layer (plan_step_folds):
  // page → (a sequence holding it, its index there).
  std::map<int64_t, std::pair<int64_t, int64_t>> step_folded;
  std::vector<float> entries, scratch;
  std::vector<const float*> ptrs_a, ptrs_b;

  // Accounting.
  void add_state(int64_t bytes);
  void add_kv(int64_t bytes);
  int64_t ckpt_bytes() const { return ckpt_floats * 4; }
  int64_t log_bytes() const { return page_log_floats * 4; }
  int n_ssm = 0;
  std::vector<int64_t> ssm_log_floats, ssm_ckpt_floats;  // per SSM layer: one page's log, one checkpoint part
  static int64_t held_bytes(const std::vector<std::vector<float>>& parts);

  // Pages and checkpoints (refcounted; freed at zero).
  int64_t new_page(bool with_log);
  int64_t copy_page(int64_t id);
  // Gives the page a log; each layer's part is allocated when that layer
  // appends the step's entries (entries become valid as end_step records them).
  void alloc_log(Page& p);
  void drop_log(Page& p);  // frees whatever parts it holds
  void unref_page(int64_t id);
  // A checkpoint record; with `data` every layer's part is allocated now,
  // else each when its layer writes it in the step (alloc_ckpt_part).
  int64_t new_ckpt(int64_t pos, bool data = true);
  void alloc_ckpt_part(Ckpt& c, int ssm);
  void drop_ckpt_data(Ckpt& c);
  void unref_ckpt(int64_t id);
  // Inside a step: which pages end_step will trim (a lower bound: every
  // sharer's expected base after the step), so that each SSM layer frees
  // its part of their log as soon as its kernels have folded it into the
  // step's new checkpoints (ReplayStore::mamba2, gated_deltanet).
  void plan_step_folds();
  // One SSM layer of a step: before its kernels, allocate its part of the
  // step's new checkpoints; after them, free its part of the folded pages'
  // log, then append the step's new entries (from `entries`, by batch row).
  void begin_layer(const LayerLayout& L);
  void finish_layer(const LayerLayout& L);

  Seq* find(int64_t id);
  const Seq* find(int64_t id) const;
  int64_t ckpt_pos(int64_t id) const { return id == kZeroCkpt ? 0 : ckpts.at(id).pos; }
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
  // The most log entries a step should replay (StoreOptions::replay_limit).
  int64_t replay_limit() const { return opt.replay_limit > 0 ? opt.replay_limit : 4 * opt.window; }
  // Replay's state writes for every slice of a step (store_flush.cpp):
  // lone sequences flush every W; families of forks get checkpoints at
  // the nodes of their token tree. Sets write_pos, share_with and reuse.
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

  // Eviction (store_evict.cpp). protect: ids that must survive.
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
  Status reserve(int64_t need, const std::map<int64_t, int64_t>& need_by_request,
                 const Protected& p);
};

}  // namespace replayssm
