// CpuState: a state manager with the CPU reference's storage behind it,
// stepped through the StateCache calls a forward pass makes — what the
// state tests drive directly, with a fake model or the real one
// (Model::forward takes it as its cache). begin_step plans the step,
// end_step finishes it; everything else forwards to the manager.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "backend/cpu/plan_cache.h"
#include "replayssm/state.h"
#include "replayssm/state_cache.h"

namespace replayssm::test {

class CpuState final : public StateCache {
 public:
  CpuState(CacheSpec spec, StateOptions opt)
      : m_(spec, opt, cpu::PlanCache::units(spec)), cache_(spec, opt.page_size) {}

  StateManager& manager() { return m_; }
  int64_t add_sequence(int64_t budget = 0) { return m_.add_sequence(budget); }
  Result<int64_t> fork(int64_t seq, std::optional<int64_t> pos = std::nullopt) { return m_.fork(seq, pos); }
  Status release(int64_t seq) { return m_.release(seq); }
  Status truncate(int64_t seq, int64_t pos) { return m_.truncate(seq, pos); }
  Status commit(int64_t seq, int64_t n) { return m_.commit(seq, n); }
  Result<RestorePlan> restore(int64_t seq, int64_t pos) { return m_.restore(seq, pos); }
  Result<RestorePlan> resume_plan(int64_t seq) const { return m_.resume_plan(seq); }
  int64_t evict(int64_t bytes) { return m_.evict(bytes); }
  int64_t length(int64_t seq) const { return m_.length(seq); }
  int64_t committed(int64_t seq) const { return m_.committed(seq); }
  std::span<const int32_t> tokens(int64_t seq) const { return m_.tokens(seq); }
  const StateStats& stats() const { return m_.stats(); }
  const StateOptions& options() const { return m_.options(); }
  void pin(std::span<const int64_t> seqs) { m_.pin(seqs); }
  void unpin_all() { m_.unpin_all(); }
  int64_t n_sequences() const { return m_.n_sequences(); }
  int64_t n_pages() const { return m_.n_pages(); }
  int64_t n_checkpoints() const { return m_.n_checkpoints(); }
  int64_t checkpoint_bytes() const { return m_.checkpoint_bytes(); }
  int64_t page_log_bytes() const { return m_.page_log_bytes(); }
  // What the storage holds now (after the manager's pending ops).
  int64_t storage_state_bytes() {
    cache_.apply(m_.take_ops());
    return cache_.state_bytes();
  }

  // The conv window and state of SSM layer `layer` at the sequence's length.
  Status materialize_mamba2(int64_t seq, int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p,
                            std::vector<float>* window, std::vector<float>* state) {
    RSSM_ASSIGN_OR_RETURN(StateRead r, m_.read_plan(seq));
    cache_.apply(m_.take_ops());
    cache_.read_state(r, layer, conv, &p, nullptr, window, state);
    return {};
  }
  Status materialize_gdn(int64_t seq, int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                         std::vector<float>* window, std::vector<float>* state) {
    RSSM_ASSIGN_OR_RETURN(StateRead r, m_.read_plan(seq));
    cache_.apply(m_.take_ops());
    cache_.read_state(r, layer, conv, nullptr, &p, window, state);
    return {};
  }

  Status begin_step(std::span<const SeqSlice> step, std::span<const int32_t> tokens) override {
    auto plan = m_.plan_step(step, tokens);
    if (!plan.ok()) return plan.status();
    plan_ = std::move(plan).value();
    cache_.set_plan(&plan_);
    return cache_.begin_step(step, tokens);
  }
  void attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice> step, const float* q,
                 int64_t ldq, const float* k, const float* v, int64_t ldkv, float* out, int64_t ldo) override {
    cache_.attention(layer, p, step, q, ldq, k, v, ldkv, out, ldo);
  }
  void mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p, std::span<const SeqSlice> step,
              const float* xbc, int64_t ldxbc, const float* dt, int64_t lddt, float* y, int64_t ldy) override {
    cache_.mamba2(layer, conv, p, step, xbc, ldxbc, dt, lddt, y, ldy);
  }
  void gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                      std::span<const SeqSlice> step, const float* qkv, int64_t ldqkv, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float* o, int64_t ldo) override {
    cache_.gated_deltanet(layer, conv, p, step, qkv, ldqkv, a, lda, b, ldb, o, ldo);
  }
  void end_step(std::span<const SeqSlice> step) override {
    cache_.end_step(step);
    m_.finish_step(plan_);
  }

 private:
  StateManager m_;
  cpu::PlanCache cache_;
  StepPlan plan_;
};

}  // namespace replayssm::test
