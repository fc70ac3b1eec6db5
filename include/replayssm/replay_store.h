// ReplayStore: replay-first storage of per-sequence state (DESIGN.md §1, §3).
//
// Per sequence the store keeps its tokens, a block table of pages and a few
// refcounted checkpoints. A page holds B tokens: the K/V rows of every
// attention layer and the log entries of every SSM layer (the small per-token
// SSM inputs). A checkpoint holds, for every SSM layer, the state and conv
// window after some position. A step's SSM outputs come from the sequence's
// base checkpoint and the log since it; the state is written only when a
// window of committed entries is folded into a new checkpoint (flush).
//
// fork, truncate, commit, restore and release are bookkeeping on pages and
// checkpoint refcounts, never a state copy (under Strategy::kReplay). The
// other strategies exist for honest comparison: kSnapshot keeps a state per
// position that may be needed and copies state on fork; kRecompute keeps the
// live state plus sparse checkpoints and re-runs the model to go back.
//
// The store never runs the model. When no checkpoint with a complete log
// reaches a sequence's length (its log pages were evicted, or it was cut
// back past its checkpoints under a strategy without logs), resume_plan()
// says kReprefill and the caller runs one step over tokens [from, length)
// with SeqSlice{pos = from}: the store recognises the rebuild, recomputes
// the log and writes a checkpoint at the end (decode/session.h does this).
//
// Not thread-safe. Ownership: the store owns all pages and checkpoints;
// sequence ids stay valid until release().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replayssm/state_cache.h"
#include "replayssm/status.h"

namespace replayssm {

enum class Strategy { kReplay, kSnapshot, kRecompute };
enum class EvictionPolicy { kLru, kCostAware };
const char* strategy_name(Strategy s);
Result<Strategy> parse_strategy(std::string_view name);
const char* eviction_name(EvictionPolicy e);
Result<EvictionPolicy> parse_eviction(std::string_view name);

struct StoreOptions {
  // A page is allocated whole (B tokens' KV rows and log entries for every
  // layer), so B is bounded: 4096 tokens is far past any useful page and
  // keeps a mistyped size a refusal rather than an allocation failure.
  static constexpr int64_t kMaxPageSize = 4096;

  Strategy strategy = Strategy::kReplay;
  int64_t window = 16;               // W: flush when committed − checkpoint ≥ W (replay)
  int64_t checkpoint_interval = 0;   // K: keep one older checkpoint per K tokens (0: none);
                                     // kRecompute's sparse interval (0: W)
  int64_t page_size = 1;             // B tokens per page (bounds log waste: ≤ 2(B−1) entries)
  int64_t log_retention = 0;         // log tokens kept below the live checkpoint (-1: all)
  int64_t state_budget = 0;          // bytes for checkpoints + logs, all sequences (0: unlimited)
  int64_t replay_limit = 0;          // most log entries a fork's step replays before a flush
                                     // (0: 4·W; else >= W)
  EvictionPolicy eviction = EvictionPolicy::kCostAware;
  bool exact = false;                // outputs by the sequential recurrence (bit-identical)
  Status validate() const;
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

// Counters since construction. Bytes are real allocations.
struct StoreStats {
  int64_t state_bytes = 0, state_bytes_peak = 0;  // checkpoints + logs
  int64_t kv_bytes = 0, kv_bytes_peak = 0;
  int64_t state_writes_bytes = 0;                 // checkpoint data written (flush, snapshot, fork copy)
  int64_t replayed_tokens = 0;                    // log entries read back by steps
  int64_t restores_checkpoint = 0, restores_log_replay = 0, restores_reprefill = 0;
  int64_t evictions = 0, evicted_bytes = 0;
  int64_t shared_flushes = 0;                     // one checkpoint written for a family of forks
};

class ReplayStore final : public StateCache {
 public:
  // `opt` must pass StoreOptions::validate() (Session::create and the CLI
  // check it and return its Status): a constructor has no Status to return,
  // so options that fail it abort here with validate()'s message — a bug in
  // the caller, not a division by a zero page size later.
  ReplayStore(CacheSpec spec, StoreOptions opt);
  ~ReplayStore() override;
  ReplayStore(const ReplayStore&) = delete;
  ReplayStore& operator=(const ReplayStore&) = delete;

  // A new empty sequence, the root of a new request. budget_bytes > 0 caps
  // the state bytes (checkpoints + logs) the request's sequences reference.
  int64_t add_sequence(int64_t budget_bytes = 0);
  // A child holding the first `pos` tokens (default: all) of `seq`, in the
  // same request. Replay: shares pages and checkpoints. Snapshot/recompute:
  // copies the state at pos (if the parent has it).
  Result<int64_t> fork(int64_t seq, std::optional<int64_t> pos = std::nullopt);
  Status release(int64_t seq);
  // Drops tokens [pos, length). Drafts and committed tokens alike.
  Status truncate(int64_t seq, int64_t pos);
  // The first n uncommitted tokens become committed.
  Status commit(int64_t seq, int64_t n);
  // truncate(pos), then the cheapest way back to a steppable state, by the
  // cost model (docs/store.md); counted in stats by path.
  Result<RestorePlan> restore(int64_t seq, int64_t pos);
  // What the sequence needs before its next step (not counted).
  Result<RestorePlan> resume_plan(int64_t seq) const;
  // Frees at least `bytes` of evictable state (policy order) and returns the
  // bytes freed. Never loses a sequence: only makes later restores slower.
  int64_t evict(int64_t bytes);

  // The conv window (K-1, C) and state of SSM layer `layer` after the
  // sequence's length, rebuilt from its base checkpoint and log (the store
  // is not changed). For inspection and tests; fails if a restore is due.
  Status materialize_mamba2(int64_t seq, int layer, const ops::Conv1dParams& conv,
                            const ops::Mamba2Params& p, std::vector<float>* window,
                            std::vector<float>* state);
  Status materialize_gdn(int64_t seq, int layer, const ops::Conv1dParams& conv,
                         const ops::GdnParams& p, std::vector<float>* window,
                         std::vector<float>* state);

  bool has_sequence(int64_t seq) const;
  int64_t length(int64_t seq) const;     // -1 if unknown
  int64_t committed(int64_t seq) const;  // -1 if unknown
  std::span<const int32_t> tokens(int64_t seq) const;
  const StoreStats& stats() const;
  const StoreOptions& options() const;
  // Pinned sequences keep what their next step needs (the resume base
  // checkpoint and the log since) out of eviction until unpin_all(). A
  // caller preparing a batch pins it so rebuilding one member cannot evict
  // another's state. Sequences in a step are always protected during it.
  void pin(std::span<const int64_t> seqs);
  void unpin_all();
  // Live objects, for leak checks: 0, 0, 0 once every sequence is released.
  int64_t n_sequences() const;
  int64_t n_pages() const;
  int64_t n_checkpoints() const;
  // Sizes of the units the budget counts: one checkpoint (every SSM layer's
  // state + conv window) and one page's log (0 without a log).
  int64_t checkpoint_bytes() const;
  int64_t page_log_bytes() const;

  // StateCache.
  Status begin_step(std::span<const SeqSlice> step, std::span<const int32_t> tokens) override;
  void attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice> step,
                 const float* q, int64_t ldq, const float* k, const float* v, int64_t ldkv,
                 float* out, int64_t ldo) override;
  void mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p,
              std::span<const SeqSlice> step, const float* xbc, int64_t ldxbc, const float* dt,
              int64_t lddt, float* y, int64_t ldy) override;
  void gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                      std::span<const SeqSlice> step, const float* qkv, int64_t ldqkv,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float* o,
                      int64_t ldo) override;
  void end_step(std::span<const SeqSlice> step) override;

  struct Impl;  // opaque; defined in src/store/store_impl.h

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace replayssm
