// Model: a loaded hybrid model and its fp32 CPU reference forward pass.
//
// Loading validates config.json and every tensor (name, shape, dtype, bounds)
// before anything runs; a Model that loaded is complete. forward() is
// const and keeps no per-sequence state: all history lives in the
// StateCache passed to it, so one Model serves any number of caches.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "replayssm/model_config.h"
#include "replayssm/state_cache.h"
#include "replayssm/status.h"

namespace replayssm {

struct Program;

// One entry of a model's tensor list.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool optional = false;
  // A stack of MoE expert matrices (E, rows, cols) only: the per-expert form
  // a checkpoint may hold instead of `name` — for expert e the tensors
  // expert_prefix + e + expert_parts[i], each rows / expert_parts.size()
  // rows of expert e's matrix, in part order. Empty for other tensors.
  std::string expert_prefix;
  std::vector<std::string> expert_parts;
};

// The tensors an architecture expects for `c` (tied heads are listed once;
// expert stacks in their fused form).
std::vector<TensorSpec> expected_tensors(const ModelConfig& c);
// Every parameter of the model.
int64_t parameter_count(const ModelConfig& c);
// The parameters one token runs through: all but the routed experts it does
// not choose (n_experts − top_k per MoE block). Embeddings and the LM head
// count whole, as the published "A3B" figures including embeddings do; equal
// to parameter_count for a dense model.
int64_t active_parameter_count(const ModelConfig& c);

// Bytes a sequence needs in the standard layout: SSM state in fp32 plus the
// conv window in `act_bytes`-byte elements, and K+V per token at `act_bytes`.
int64_t ssm_state_bytes_per_sequence(const ModelConfig& c, int64_t act_bytes);
int64_t kv_bytes_per_token(const ModelConfig& c, int64_t act_bytes);

// What the cache must hold for this model.
CacheSpec cache_spec(const ModelConfig& c);

class Model {
 public:
  // Refused (out of budget) before anything is read when the fp32 weights
  // do not fit in the host memory left (core/host_memory.h).
  static Result<std::unique_ptr<Model>> load(const std::string& dir);
  // A model of `config` with pseudo-random weights from `seed`, no files
  // (benchmark presets). Every value lies in its parameter's valid domain —
  // decays in (0, 1), softplus(dt_bias) in [1e-3, 1e-1], unit norms,
  // projections scaled by 1/sqrt(fan-in) — so activations stay finite and
  // logits O(1). The same (config, seed) gives the same weights on every
  // machine, whatever the thread count. Allocates 4 bytes per parameter
  // (parameter_count): refused (out of budget) before allocating when the
  // host has not that much left.
  static Result<std::unique_ptr<Model>> random(const ModelConfig& config, uint64_t seed);
  // random() without its matrices (projections, expert stacks, embedding,
  // LM head): their pointers are null and no host memory is spent on them
  // — for a device that fills its own (backend/cuda/device_model.h) at a
  // 27B model's shapes. forward() refuses such a model.
  static Result<std::unique_ptr<Model>> random_without_matrices(const ModelConfig& config, uint64_t seed);
  ~Model();

  const ModelConfig& config() const { return config_; }
  bool has_matrices() const { return has_matrices_; }
  // The bound weights, block by block (model/program.h), for backends that
  // copy them (the CUDA runtime).
  const Program& program() const { return *program_; }

  // Runs one step over `step` (slices of consecutive rows; slice i covers
  // tokens[row .. row+n)). Writes logits (vocab floats) for each row listed
  // in `logit_rows`, in order, into `logits`. Token ids are checked here.
  Status forward(std::span<const SeqSlice> step, std::span<const int32_t> tokens,
                 StateCache& cache, std::span<const int64_t> logit_rows, float* logits) const;

 private:
  Model() = default;
  static Result<std::unique_ptr<Model>> make_random(const ModelConfig& config, uint64_t seed, bool matrices);
  ModelConfig config_;
  std::unique_ptr<Program> program_;
  std::vector<std::vector<float>> storage_;  // fp32 copies of every tensor
  bool has_matrices_ = true;
};

}  // namespace replayssm
