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
};

// The tensors an architecture expects for `c` (tied heads are listed once).
std::vector<TensorSpec> expected_tensors(const ModelConfig& c);
int64_t parameter_count(const ModelConfig& c);

// Bytes a sequence needs in the standard layout: SSM state in fp32 plus the
// conv window in `act_bytes`-byte elements, and K+V per token at `act_bytes`.
int64_t ssm_state_bytes_per_sequence(const ModelConfig& c, int64_t act_bytes);
int64_t kv_bytes_per_token(const ModelConfig& c, int64_t act_bytes);

// What the cache must hold for this model.
CacheSpec cache_spec(const ModelConfig& c);

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& dir);
  ~Model();

  const ModelConfig& config() const { return config_; }

  // Runs one step over `step` (slices of consecutive rows; slice i covers
  // tokens[row .. row+n)). Writes logits (vocab floats) for each row listed
  // in `logit_rows`, in order, into `logits`. Token ids are checked here.
  Status forward(std::span<const SeqSlice> step, std::span<const int32_t> tokens,
                 StateCache& cache, std::span<const int64_t> logit_rows, float* logits) const;

 private:
  Model() = default;
  ModelConfig config_;
  std::unique_ptr<Program> program_;
  std::vector<std::vector<float>> storage_;  // fp32 copies of every tensor
};

}  // namespace replayssm
