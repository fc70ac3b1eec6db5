// DeviceModel: a model's weights on the GPU, laid out for the decode step.
//
// Matrices are bf16; everything else (norm weights, conv taps, A_log, D,
// dt_bias, biases) stays fp32 — a few MB that the kernels read in fp32 as the
// CPU reference does. Projections that read the same input are fused into
// one matrix, so a block makes one GEMM where the checkpoint has several:
//
//   Mamba2     in  = in_proj                        (z | xBC | dt)
//   GDN        in  = [in_proj_qkv; in_proj_z; in_proj_a; in_proj_b]
//   attention  in  = [q_proj; k_proj; v_proj]        (q rows carry the gate, Qwen3.5)
//   MLP        in  = [gate_proj; up_proj] (gated) or up_proj
//   MoE        in  = the shared expert's [gate_proj; up_proj] (gated) or
//                    up_proj, out = its down_proj (none without one); the
//                    routed experts as bf16 stacks (E, rows, cols), their
//                    router and the shared expert's gate fp32 (routing is
//                    fp32, as in transformers)
//
// The values come from a loaded Model; a Model made by
// Model::random_without_matrices has no matrices on the host, and the device
// fills them itself with Model::random's distribution (uniform ±√(3/fan-in),
// embeddings ±√3) — which is how a 27B preset is benchmarked without 108 GB
// of host fp32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "replayssm/model.h"
#include "replayssm/status.h"

namespace replayssm::cuda {

struct DeviceLinear {
  const uint16_t* w = nullptr;  // (n_out, n_in) bf16
  const float* b = nullptr;     // (n_out) or nullptr
  int64_t n_out = 0, n_in = 0;
};

struct DeviceBlock {
  BlockKind kind = BlockKind::kMlp;
  int cache_layer = -1;
  const float* norm = nullptr;  // pre-norm (hidden)
  DeviceLinear in, out;         // fused input projection (above), output projection
  // SSM layers.
  const float* conv_w = nullptr;  // (C, K)
  const float* conv_b = nullptr;  // (C) or nullptr
  const float* A_log = nullptr;
  const float* D = nullptr;
  const float* dt_bias = nullptr;
  const float* norm_w = nullptr;  // gated norm (Mamba2) / per-head norm (GDN)
  // Attention (Qwen3.5).
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  // MoE.
  int moe_index = -1;                      // among the model's MoE blocks
  const float* router = nullptr;           // (E, hidden)
  const float* correction_bias = nullptr;  // (E) or nullptr
  const uint16_t* experts_up = nullptr;    // (E, 2I, hidden) gated ([gate | up] per expert) or (E, I, hidden)
  const uint16_t* experts_down = nullptr;  // (E, hidden, I)
  const float* shared_gate = nullptr;      // (hidden) or nullptr
};

// OK where the process sees a CUDA device; otherwise unsupported, naming
// the CUDA error. Cheap: the CLI asks it before loading anything, so a
// `--device cuda` request on a machine without a GPU fails before any output.
Status device_visible();

// The current CUDA device and its memory now (cudaMemGetInfo). Fails
// (unsupported) naming the CUDA error where no device is usable.
struct DeviceInfo {
  std::string name;
  int64_t free_bytes = 0, total_bytes = 0;
};
Result<DeviceInfo> device_info();

class DeviceModel {
 public:
  // Copies `model` to the current CUDA device. `seed` fills the matrices of a
  // model without them (ignored otherwise). Fails with a message naming
  // the tensor when the device runs out of memory or has no GPU.
  static Result<std::unique_ptr<DeviceModel>> create(const Model& model, uint64_t seed = 0);
  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  const ModelConfig& config() const { return config_; }
  const std::vector<DeviceBlock>& blocks() const { return blocks_; }
  const uint16_t* embed() const { return embed_; }  // (vocab, hidden) bf16
  const float* final_norm() const { return final_norm_; }
  const DeviceLinear& lm_head() const { return lm_head_; }  // may share embed()'s rows (tied)
  int64_t bytes() const { return bytes_; }  // device memory the weights hold

 private:
  DeviceModel() = default;
  class Builder;
  ModelConfig config_;
  std::vector<DeviceBlock> blocks_;
  const uint16_t* embed_ = nullptr;
  const float* final_norm_ = nullptr;
  DeviceLinear lm_head_;
  int64_t bytes_ = 0;
  std::vector<void*> allocations_;
};

}  // namespace replayssm::cuda
