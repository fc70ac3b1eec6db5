// The CUDA backend: the state manager's plans executed on one GPU.
//
// The model's weights are a DeviceModel (bf16 matrices, fp32 vectors); the
// storage behind the plan's slots is SlotStorage's pools (K/V pages, logs,
// checkpoints; layout and bytes in slot_storage.h); a step is
//   1. the plan checked and scheduled on the host (step_schedule.h: which
//      kernel takes each slice, every index array), the pools grown for its
//      slots — a failure up to here leaves everything as it was;
//   2. its storage ops (device copies; frees are bookkeeping);
//   3. the forward pass over its rows: the embedding, every block — the
//      GEMMs over all rows at once, attention over each slice's pages
//      (attention_decode_cuda when every slice has one token, else
//      attention_prefill_cuda; a rebuild's K/V rows read, never written),
//      each SSM layer's conv over the paged pre-conv log and base windows,
//      its entries appended to the log, then the schedule's launches
//      (replay kernels, GDN's standard step, chunk scans; the states the
//      plan writes, their windows; layer_launches.h) — the final norm and
//      the LM head for the kept rows only, their logits left on the device
//      (DeviceLogits);
//   4. one wait for the stream, so a failure is this step's: after storage
//      was touched the backend refuses further steps.
// Exact plans (StepPlan::exact) take the kernels' exact paths: Mamba2's and
// GDN's sequential replay (stepping's bits, as the decode path's tests
// show); the chunk scans are the sequential recurrence already (Mamba2 with
// stepping's bits; GDN rounds its chunks otherwise, as a prefill may).
//
// Not thread-safe (Backend's contract). Launches are eager: no CUDA graphs
// yet. step_times() says where the steps' time went (host preparation,
// host launches, the wait, the device's own span by events, the reads of
// the kept rows), so a bench can tell host overhead from kernel time.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "backend/cuda/device_logits.h"
#include "backend/cuda/device_model.h"
#include "backend/cuda/forward.h"
#include "backend/cuda/layer_launches.h"
#include "backend/cuda/slot_storage.h"
#include "backend/cuda/step_schedule.h"
#include "ops/cuda/attention_decode.h"
#include "ops/cuda/gemm.h"
#include "replayssm/backend.h"
#include "replayssm/model.h"

namespace replayssm::cuda {

// Cumulative since the last reset_step_times().
struct StepTimes {
  int64_t steps = 0;       // execute() calls that ran
  double prepare_s = 0.0;  // host: checks, the schedule, room for it, its upload
  double launch_s = 0.0;   // host: issuing the storage ops and the forward's launches
  double wait_s = 0.0;     // host: waiting for the step's stream after issuing
  double gpu_s = 0.0;      // device: from the step's first op to its last (CUDA events)
  double read_s = 0.0;     // host: the reads of kept rows (argmax, sample, logits, ...), device work included
};

struct CudaBackendOptions {
  // Rows one step takes at most (the activations' size; max_step_rows()).
  int64_t max_step_rows = 2048;
  // Fills the matrices of a model that has none on the host (presets).
  uint64_t seed = 0;
  // The schedule's paths (tests force the chunk scans with decode_tokens 0).
  ScheduleLimits limits;
  // Keep every MoE block's router logits of the last step (router_logits()):
  // tests find the rows whose choice sits within rounding of its cutoff.
  bool keep_router_logits = false;
};

class CudaBackend final : public Backend {
 public:
  // Copies the model to the current device; the model must outlive the
  // backend. Unsupported where no GPU is visible or the model is past a
  // kernel's limit (named by its config field).
  static Result<std::unique_ptr<CudaBackend>> create(const Model& model, const CudaBackendOptions& opt = {});
  ~CudaBackend() override;

  const char* name() const override { return "cuda"; }
  const ModelConfig& config() const override { return model_.config(); }
  const CacheSpec& cache_spec() const override { return spec_; }
  StateUnits units(const StateOptions& opt) const override;
  Status check_options(const StateOptions& opt) const override;
  int64_t max_step_rows() const override { return opt_.max_step_rows; }
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

  const DeviceModel& device_model() const { return *dm_; }
  // The kept rows and their reads (the parity tests load rows of their own).
  DeviceLogits& kept_logits() { return *logits_; }
  cudaStream_t stream() const { return stream_; }
  // The last step's router logits of the MoE block `moe_index` (rows, E),
  // where the options keep them.
  Status router_logits(int moe_index, std::vector<float>* out);
  const StepTimes& step_times() const { return times_; }
  void reset_step_times() { times_ = {}; }

 protected:
  Status reset_storage(const StateOptions& opt) override;

 private:
  CudaBackend(const Model& model, const CudaBackendOptions& opt);
  Status init();
  // Steps 3 of the top, on the uploaded schedule.
  Status forward(const StepSchedule& s);
  // A block of each stateful kind: its projections and output around the
  // launches of layer_launches.h.
  Status run_attention(const DeviceBlock& blk, KvStore& kv, const StepSchedule& s, const float* next_norm);
  Status run_ssm(const DeviceBlock& blk, SsmStore& st, const StepSchedule& s, const float* next_norm);
  // A MoE block: the router, the routing and grouping, the chosen experts
  // (two grouped linears around the activation), the shared expert, their
  // sum into the residual stream and the next norm.
  Status run_moe(const DeviceBlock& blk, int64_t rows, const float* next_norm);
  // Whether one-token steps take attention_decode_cuda (its query heads a
  // KV head are at most kAttnMaxRep; past that attention_prefill_cuda,
  // which takes any, runs them).
  bool decode_attention() const {
    return model_.config().attn.n_heads <= ops::cuda::kAttnMaxRep * model_.config().attn.n_kv_heads;
  }
  // The buffers layer_launches.h's launches take for `blk`.
  LayerArgs layer_args(const DeviceBlock& blk) const;
  // Device scratch of at least n elements (grown, never shrunk).
  template <typename T>
  Status grow(T** p, int64_t* cap, int64_t n, const char* what);
  // The device copy of a schedule array.
  const int32_t* dev(const Span32& a) const { return a.present() ? sched_dev_ + a.at : nullptr; }
  Status upload(const std::vector<int32_t>& buf);
  StepBuffers bufs() const;

  const Model& model_;
  CudaBackendOptions opt_;
  CacheSpec spec_;
  std::unique_ptr<DeviceModel> dm_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<ops::cuda::Gemm> gemm_;
  std::unique_ptr<SlotStorage> storage_;  // laid out by the claiming session's page size
  std::unique_ptr<DeviceLogits> logits_;
  bool has_mamba_ = false, has_gdn_ = false, has_attn_ = false, has_moe_ = false;
  bool poisoned_ = false;  // a step failed after touching storage
  StepTimes times_;
  cudaEvent_t ev_begin_ = nullptr, ev_end_ = nullptr;
  // Activations, max_step_rows rows each (see forward.h).
  std::vector<void*> allocs_;
  int64_t workspace_bytes_ = 0;
  float* h_ = nullptr;
  uint16_t *xn_ = nullptr, *d_ = nullptr, *proj_ = nullptr, *y_ = nullptr, *xconv_ = nullptr;
  uint16_t *aq_ = nullptr, *ak_ = nullptr, *av_ = nullptr;
  uint16_t* cC_ = nullptr;                       // Mamba2: C of each row (G·N), the replay kernels' Cm
  float* mamba_scratch_ = nullptr;               // Mamba2 replay's split path
  uint16_t *gq_ = nullptr, *gk_ = nullptr, *gv_ = nullptr;  // GDN: q, k normalised; v (dense rows)
  float *gg_ = nullptr, *gbeta_ = nullptr, *gu_ = nullptr;  // GDN: g, β; the scan's u
  float* inv_freq_ = nullptr;
  // MoE (ops/cuda/moe.h), for max_step_rows rows of K experts each.
  float *moe_logits_ = nullptr, *moe_weights_ = nullptr, *moe_y_ = nullptr, *moe_gate_ = nullptr;
  int32_t *moe_experts_ = nullptr, *moe_first_ = nullptr, *moe_src_row_ = nullptr, *moe_slot_of_ = nullptr;
  int32_t *moe_tiles_ = nullptr, *moe_n_tiles_ = nullptr;
  uint16_t *moe_h_ = nullptr, *moe_shared_ = nullptr;
  float* moe_kept_ = nullptr;  // keep_router_logits: (MoE blocks, max_step_rows, E)
  int64_t last_rows_ = 0;
  // Grown on demand.
  int32_t* sched_dev_ = nullptr;
  int32_t* sched_host_ = nullptr;  // pinned
  int64_t sched_cap_ = 0;
  float* attn_scratch_ = nullptr;
  int64_t attn_scratch_cap_ = 0;
  uint16_t* win_stage_ = nullptr;  // the windows of a step's writes before they go to their slots
  int64_t win_stage_cap_ = 0;
};

}  // namespace replayssm::cuda
