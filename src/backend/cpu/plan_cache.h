// PlanCache: the CPU reference's storage behind the state manager's slots,
// and the StateCache that runs one plan's stateful layers on it.
//
// Every slot is fp32: a page slot holds B positions' K and V rows of every
// attention layer; a log slot, per SSM layer, B entries (Mamba2 pre-conv
// xBC | dt, GDN pre-conv qkv | u | g: op_params.h); a checkpoint slot, per
// SSM layer, the conv window (K−1, C) then the state. Parts are allocated
// when a step first writes them and freed as the plan says — a folded
// log's part right after its layer has run — so what this storage holds
// follows the manager's accounting.
//
// Model::forward drives a step through the StateCache calls; each stateful
// layer runs src/ops/cpu against the plan: attention over the block table's
// pages, Mamba2 and Gated DeltaNet through the replay kernels from the base
// checkpoint and the log (ops/cpu/replay.h), writing the new entries and
// the planned checkpoints.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "replayssm/state.h"
#include "replayssm/state_cache.h"
#include "replayssm/step_plan.h"

namespace replayssm::cpu {

class PlanCache final : public StateCache {
 public:
  PlanCache(CacheSpec spec, int64_t page_size);

  // The units the manager counts for this storage.
  static StateUnits units(const CacheSpec& spec);

  // Storage ops, in order (copies and frees).
  void apply(std::span<const StorageOp> ops);
  // Every slot's storage dropped.
  void reset();
  // The plan the next StateCache step runs (kept by pointer until end_step).
  void set_plan(const StepPlan* plan) { plan_ = plan; }

  // What read_state needs: SSM layer `layer`'s window and state at
  // read.length, from its base checkpoint and log.
  void read_state(const StateRead& read, int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params* mp,
                  const ops::GdnParams* gp, std::vector<float>* window, std::vector<float>* state);

  int64_t page_size() const { return B_; }
  int64_t state_bytes() const { return state_bytes_; }
  int64_t kv_bytes() const { return kv_bytes_; }

  // StateCache: the plan set by set_plan; `step` must be its slices.
  Status begin_step(std::span<const SeqSlice> step, std::span<const int32_t> tokens) override;
  void attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice> step, const float* q,
                 int64_t ldq, const float* k, const float* v, int64_t ldkv, float* out, int64_t ldo) override;
  void mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p, std::span<const SeqSlice> step,
              const float* xbc, int64_t ldxbc, const float* dt, int64_t lddt, float* y, int64_t ldy) override;
  void gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                      std::span<const SeqSlice> step, const float* qkv, int64_t ldqkv, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float* o, int64_t ldo) override;
  void end_step(std::span<const SeqSlice> step) override;

 private:
  // Where one cache layer lives inside a page, a log and a checkpoint.
  struct Layout {
    CacheLayerSpec spec;
    int64_t kv_off = 0, kv_width = 0;     // attention: Hkv·D per K (and per V) row
    int ssm = -1;                         // SSM: index of its part
    int64_t entry = 0;                    // SSM: entry floats per token
    int64_t win_floats = 0, state_floats = 0;
  };
  struct SliceArgs;
  using Parts = std::vector<std::vector<float>>;  // [SSM layer]

  std::vector<float>& ckpt_part(int32_t slot, int ssm);  // allocated on first use
  const float* log_part(int32_t slot, int ssm) const;    // nullptr if absent
  SliceArgs slice_args(const PlanSlice& ps, const Layout& L);
  void begin_layer(const Layout& L);
  void finish_layer(const Layout& L);
  void grow(int32_t slot, std::vector<std::vector<float>>* kv);
  void free_parts(Parts* parts);

  CacheSpec spec_;
  std::vector<Layout> layers_;
  int64_t B_ = 1;
  int64_t page_kv_floats_ = 0;
  int n_ssm_ = 0;
  std::vector<std::vector<float>> kv_;  // page slot → (B, Σ 2·kv_width)
  std::vector<Parts> logs_;             // log slot → [SSM layer] (B, entry)
  std::vector<Parts> ckpts_;            // checkpoint slot → [SSM layer] window | state
  int64_t state_bytes_ = 0, kv_bytes_ = 0;
  const StepPlan* plan_ = nullptr;
  std::vector<char> folded_;            // per log slot: folded away by this step
  std::vector<float> entries_, scratch_;
  std::vector<const float*> ptrs_a_, ptrs_b_;
};

}  // namespace replayssm::cpu
