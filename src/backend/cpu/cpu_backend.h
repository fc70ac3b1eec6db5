// The CPU reference backend: the model's fp32 forward pass (src/model,
// src/ops/cpu — the numerical specification every other backend is tested
// against) over the state manager's plans, its storage in host memory
// (PlanCache), and the reads of a step's logits rows by the host functions
// of ops/cpu/sampling.h.
#pragma once

#include <memory>
#include <vector>

#include "backend/cpu/plan_cache.h"
#include "replayssm/backend.h"
#include "replayssm/model.h"

namespace replayssm::cpu {

class CpuBackend final : public Backend {
 public:
  // The model must outlive the backend; it is never changed.
  static Result<std::unique_ptr<CpuBackend>> create(const Model& model);

  const char* name() const override { return "cpu"; }
  const ModelConfig& config() const override { return model_.config(); }
  const CacheSpec& cache_spec() const override { return spec_; }
  StateUnits units(const StateOptions& opt) const override;
  Status check_options(const StateOptions& opt) const override;
  // The CPU forward sizes its scratch per step: no fixed bound but memory.
  int64_t max_step_rows() const override { return int64_t{1} << 20; }
  Status execute(const StepPlan& plan, std::span<const int64_t> logit_rows) override;
  Status apply(std::span<const StorageOp> ops) override;
  Status logits(std::span<const int64_t> rows, float* out) override;
  Status argmax(std::span<const int64_t> rows, int32_t* out) override;
  Status top_logprobs(std::span<const int64_t> rows, int64_t k, TokenLogprob* out) override;
  Status sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp) override;
  Status logprobs_of(std::span<const int64_t> rows, std::span<const int32_t> tokens, double* out) override;
  Status read_state(const StateRead& read, int layer, std::vector<float>* window,
                    std::vector<float>* state) override;
  BackendMemory memory() const override;

  const Model& model() const { return model_; }

 protected:
  Status reset_storage(const StateOptions& opt) override;

 private:
  explicit CpuBackend(const Model& model);
  Status check_rows(std::span<const int64_t> rows) const;
  std::span<const float> row(int64_t i) const;

  const Model& model_;
  CacheSpec spec_;
  std::unique_ptr<PlanCache> cache_;  // laid out by the claiming session's page size
  std::vector<float> logits_;  // the kept rows, vocabulary floats each
  int64_t kept_ = 0;
};

}  // namespace replayssm::cpu
