// Backend: one device that runs a model over the state manager's plans.
//
// The state manager (replayssm/state.h) decides; a backend executes. It
// owns the model's weights on its device and the storage behind every slot
// a plan names (K/V pages, logs, checkpoints), runs a step's forward pass
// over the plan's rows, and keeps the logits rows a caller asked for on the
// device, where the reads below (argmax, top log-probabilities, sampling,
// or the rows themselves) take them without copying every row back. It
// knows no sampling policy, scheduling or request: the workloads above it
// (src/workloads) are written once for every backend.
//
// Two implementations: the CPU reference (src/backend/cpu, the numerical
// specification: fp32, src/ops/cpu) and CUDA (src/backend/cuda: bf16
// weights and activations, fp32 states). make_backend
// (replayssm/make_backend.h) picks one by name; nothing else needs to know
// which runs.
//
// Not thread-safe: one thread drives a backend (and its manager).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "replayssm/model_config.h"
#include "replayssm/sampling.h"
#include "replayssm/state.h"
#include "replayssm/status.h"
#include "replayssm/step_plan.h"

namespace replayssm {

// One draw for Backend::sample: kept row `row` at `params`' temperature and
// top_p, with the uniform r ∈ [0, 1) (the host sampler's rule: the first
// token in id order whose cumulative probability passes r).
struct SampleRequest {
  int64_t row = 0;
  SamplingParams params;
  double r = 0.0;
};

// Bytes a backend holds, by what holds them.
struct BackendMemory {
  int64_t weights_bytes = 0;
  int64_t state_bytes = 0;      // checkpoint and log storage
  int64_t kv_bytes = 0;         // K/V pages
  int64_t workspace_bytes = 0;  // activations, logits, scratch
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;  // "cpu", "cuda"
  virtual const ModelConfig& config() const = 0;
  // The layers the manager keeps state for (cache_spec of the model).
  virtual const CacheSpec& cache_spec() const = 0;
  // What one checkpoint part, one log entry and one token's K/V rows take
  // in this backend's storage under `opt` (the manager's units).
  virtual StateUnits units(const StateOptions& opt) const = 0;
  // Options this backend cannot run, named (e.g. a window over a kernel's
  // limit); checked once, before a manager is made for it.
  virtual Status check_options(const StateOptions& opt) const = 0;
  // The most rows one execute() takes (its activations' size); callers
  // split longer work (a re-prefill, a prompt) into steps of at most this.
  virtual int64_t max_step_rows() const = 0;

  // One step: the plan's storage ops, then the model over its rows. Keeps
  // the logits of the rows listed in `logit_rows` (rows of the step) for
  // the reads below until the next execute(); kept row i is logit_rows[i].
  // A failure before any storage was touched leaves everything as it was
  // (the caller then aborts the manager's step); after that, the backend
  // refuses further steps.
  virtual Status execute(const StepPlan& plan, std::span<const int64_t> logit_rows) = 0;
  // Storage ops outside a step, in order (StateManager::take_ops).
  virtual Status apply(std::span<const StorageOp> ops) = 0;

  // Reads of the last step's kept rows (indices into its logit_rows).
  // logits: rows × vocabulary floats, row-major.
  virtual Status logits(std::span<const int64_t> rows, float* out) = 0;
  // The argmax of each row (lowest id on ties).
  virtual Status argmax(std::span<const int64_t> rows, int32_t* out) = 0;
  // Each row's k largest log-probabilities (log-softmax at temperature 1,
  // in fp64), largest first, lower id on ties: rows × k entries.
  virtual Status top_logprobs(std::span<const int64_t> rows, int64_t k, TokenLogprob* out) = 0;
  // One draw per request; ids[i] gets the token and lp[i] its
  // log-probability at temperature 1.
  virtual Status sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp) = 0;
  // The log-probability (temperature 1) of tokens[i] in row rows[i].
  virtual Status logprobs_of(std::span<const int64_t> rows, std::span<const int32_t> tokens, double* out) = 0;

  // The conv window (K−1, C) and state (H, rows, cols) of SSM layer
  // `layer` (an index into cache_spec().layers) at the length `read`
  // describes, rebuilt from its base checkpoint and log; nothing changes.
  // fp32 whatever the storage. For inspection and tests.
  virtual Status read_state(const StateRead& read, int layer, std::vector<float>* window,
                            std::vector<float>* state) = 0;

  virtual BackendMemory memory() const = 0;

  // One session drives a backend at a time: the slots in its plans are its
  // manager's. A session claims the backend for its lifetime, under its
  // manager's options (which fix the storage's layout: its page size); a
  // claim starts from empty storage. Fails when another session holds it.
  Status claim(const StateOptions& opt) {
    if (claimed_)
      return invalid_argument(std::string("the ") + name() +
                              " backend is driven by another session already (one state manager per backend)");
    RSSM_RETURN_IF_ERROR(reset_storage(opt));
    claimed_ = true;
    return {};
  }
  void unclaim() { claimed_ = false; }

 protected:
  // Drops whatever storage earlier plans filled and lays it out for `opt`.
  virtual Status reset_storage(const StateOptions& opt) = 0;

 private:
  bool claimed_ = false;
};

}  // namespace replayssm
