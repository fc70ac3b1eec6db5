// Helpers for tests that run one workload on two backends: a backend that
// is planned as another would be, and a model's matrices rounded to bf16
// (the CPU reference of a backend that keeps them in bf16).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "model/program.h"
#include "replayssm/backend.h"
#include "replayssm/model.h"

namespace replayssm::test {

// A backend that runs on `inner` but is planned as `like` would be: its
// units, its rows a step, its refusals. Two backends wrapped alike get the
// same plans from their managers, so their outputs compare step for step
// (a budget's evictions and a family's flushes depend on the units).
class PlannedAs final : public Backend {
 public:
  PlannedAs(Backend& inner, const Backend& like) : in_(inner), like_(like) {}
  const char* name() const override { return in_.name(); }
  const ModelConfig& config() const override { return in_.config(); }
  const CacheSpec& cache_spec() const override { return in_.cache_spec(); }
  StateUnits units(const StateOptions& opt) const override { return like_.units(opt); }
  Status check_options(const StateOptions& opt) const override {
    RSSM_RETURN_IF_ERROR(like_.check_options(opt));
    return in_.check_options(opt);
  }
  int64_t max_step_rows() const override { return std::min(in_.max_step_rows(), like_.max_step_rows()); }
  Status execute(const StepPlan& plan, std::span<const int64_t> rows) override { return in_.execute(plan, rows); }
  Status apply(std::span<const StorageOp> ops) override { return in_.apply(ops); }
  Status logits(std::span<const int64_t> rows, float* out) override { return in_.logits(rows, out); }
  Status argmax(std::span<const int64_t> rows, int32_t* out) override { return in_.argmax(rows, out); }
  Status top_logprobs(std::span<const int64_t> rows, int64_t k, TokenLogprob* out) override {
    return in_.top_logprobs(rows, k, out);
  }
  Status sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp) override {
    return in_.sample(requests, ids, lp);
  }
  Status logprobs_of(std::span<const int64_t> rows, std::span<const int32_t> tokens, double* out) override {
    return in_.logprobs_of(rows, tokens, out);
  }
  Status read_state(const StateRead& read, int layer, std::vector<float>* window,
                    std::vector<float>* state) override {
    return in_.read_state(read, layer, window, state);
  }
  BackendMemory memory() const override { return in_.memory(); }

 protected:
  // The inner backend is claimed for as long as this one is.
  Status reset_storage(const StateOptions& opt) override {
    in_.unclaim();
    return in_.claim(opt);
  }

 private:
  Backend& in_;
  const Backend& like_;
};

// The model's matrices rounded to bf16 in place, as DeviceModel stores them
// (the test owns this copy of the model).
inline void round_matrices_to_bf16(const Model& m) {
  const Program& p = m.program();
  const ModelConfig& c = m.config();
  auto rnd = [](const float* w, int64_t n) {
    float* q = const_cast<float*>(w);
    for (int64_t i = 0; w != nullptr && i < n; ++i) q[i] = bf16_to_f32(f32_to_bf16(q[i]));
  };
  rnd(p.embed, c.vocab_size * c.hidden_size);
  if (p.lm_head.w != p.embed) rnd(p.lm_head.w, c.vocab_size * c.hidden_size);
  for (const Block& b : p.blocks) {
    for (const Linear* l : {&b.mamba.in_proj, &b.mamba.out_proj, &b.gdn.in_qkv, &b.gdn.in_z, &b.gdn.in_a, &b.gdn.in_b,
                            &b.gdn.out_proj, &b.attn.q, &b.attn.k, &b.attn.v, &b.attn.o, &b.mlp.gate, &b.mlp.up,
                            &b.mlp.down, &b.moe.shared.gate, &b.moe.shared.up, &b.moe.shared.down})
      rnd(l->w, l->n_out * l->n_in);
    // The expert stacks are bf16 on the device; the router and the shared
    // expert's gate stay fp32 there (routing is fp32).
    if (b.kind == BlockKind::kMoe) {
      const MoeConfig& e = c.moe;
      rnd(b.moe.up, e.n_experts * (e.gated ? 2 : 1) * e.intermediate * c.hidden_size);
      rnd(b.moe.down, e.n_experts * c.hidden_size * e.intermediate);
    }
  }
}

}  // namespace replayssm::test
