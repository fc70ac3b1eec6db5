// Program: the bound weights of a model, block by block, as the forward pass
// executes them. Built by an architecture (nemotron_h.cpp, qwen3_5.cpp)
// through a WeightBinder, so the tensor list that `info` counts, the loader
// checks and the forward reads is written down exactly once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replayssm/model.h"
#include "replayssm/model_config.h"
#include "replayssm/op_params.h"

namespace replayssm {

// An nn.Linear: w (n_out, n_in), optional b (n_out).
struct Linear {
  const float* w = nullptr;
  const float* b = nullptr;
  int64_t n_out = 0, n_in = 0;
};

struct Mamba2Weights {
  Linear in_proj;   // hidden → z (H·P) | xBC (C) | dt (H)
  Linear out_proj;  // H·P → hidden
  const float* conv_w = nullptr;  // (C, 1, K)
  const float* conv_b = nullptr;  // (C) or nullptr
  const float* A_log = nullptr;   // (H)
  const float* D = nullptr;       // (H)
  const float* dt_bias = nullptr; // (H)
  const float* norm_w = nullptr;  // (H·P), gated group norm
};

struct GdnWeights {
  Linear in_qkv;    // hidden → q (Hk·dk) | k (Hk·dk) | v (Hv·dv)
  Linear in_z;      // hidden → z (Hv·dv)
  Linear in_b;      // hidden → b (Hv)
  Linear in_a;      // hidden → a (Hv)
  Linear out_proj;  // Hv·dv → hidden
  const float* conv_w = nullptr;  // (C, 1, K), no bias
  const float* A_log = nullptr;   // (Hv)
  const float* dt_bias = nullptr; // (Hv)
  const float* norm_w = nullptr;  // (dv), per-head RMS norm before the gate
};

struct AttentionWeights {
  Linear q, k, v, o;  // q yields (Hq, 2·D) per head = [query | gate] when output_gate
  const float* q_norm = nullptr;  // (D) when qk_norm
  const float* k_norm = nullptr;
};

struct MlpWeights {
  Linear gate, up, down;  // gate unused unless gated
};

// A mixture-of-experts block (MoeConfig). The routed experts' matrices are
// stacks over the E experts, as transformers holds them.
struct MoeWeights {
  Linear router;                          // (E, hidden), no bias
  const float* correction_bias = nullptr; // (E), sigmoid routers
  const float* up = nullptr;              // (E, 2I, hidden) gated — per expert [gate (I) | up (I)] — or (E, I, hidden)
  const float* down = nullptr;            // (E, hidden, I)
  MlpWeights shared;                      // n_out 0 without a shared expert
  Linear shared_gate;                     // (1, hidden) when MoeConfig::shared_gate
};

struct Block {
  BlockKind kind = BlockKind::kMlp;
  int64_t layer = 0;        // HF layer index
  int cache_layer = -1;     // index into CacheSpec::layers, -1 for MLP blocks
  const float* norm = nullptr;  // pre-norm weight (hidden)
  Mamba2Weights mamba;
  GdnWeights gdn;
  AttentionWeights attn;
  MlpWeights mlp;
  MoeWeights moe;
};

struct Program {
  const float* embed = nullptr;       // (vocab, hidden)
  const float* final_norm = nullptr;  // (hidden)
  Linear lm_head;                     // may alias embed (tied)
  std::vector<Block> blocks;
};

// Visited once per tensor by an architecture's program builder.
class WeightBinder {
 public:
  virtual ~WeightBinder() = default;
  // Binds tensor `name` of `shape` to *ptr. An optional tensor that the
  // checkpoint lacks leaves *ptr null.
  virtual void tensor(const std::string& name, const std::vector<int64_t>& shape,
                      const float** ptr, bool optional = false) = 0;

  // Binds a stack of expert matrices, shape (E, rows, cols), to *ptr.
  // Checkpoints hold it in one of transformers' two forms: fused, one
  // tensor named spec.name; or per expert, the tensors
  // spec.expert_prefix + e + spec.expert_parts[i], each rows /
  // expert_parts.size() rows of expert e's matrix, stacked in part order.
  virtual void experts(const TensorSpec& spec, const float** ptr) = 0;

  void linear(const std::string& name, int64_t n_out, int64_t n_in, bool bias, Linear* l) {
    l->n_out = n_out;
    l->n_in = n_in;
    tensor(name + ".weight", {n_out, n_in}, &l->w);
    if (bias) tensor(name + ".bias", {n_out}, &l->b);
  }
};

// Layers a config may declare: far past any real model (the largest have
// under 200), small enough that the tensor list a hostile config.json
// implies stays small.
inline constexpr int64_t kMaxLayers = 4096;

// Per architecture: config.json fields → ModelConfig (nemotron_h.cpp, qwen3_5.cpp).
class ConfigReader;
Status parse_nemotron_h(ConfigReader& r, ModelConfig* c);
// moe: Qwen3.5-MoE (every layer's MLP a mixture of experts).
Status parse_qwen3_5(ConfigReader& r, ModelConfig* c, bool moe);

// Per architecture: the tensor list and the blocks.
void bind_nemotron_h(const ModelConfig& c, WeightBinder& b, Program* p);
void bind_qwen3_5(const ModelConfig& c, WeightBinder& b, Program* p);

inline void bind_program(const ModelConfig& c, WeightBinder& b, Program* p) {
  if (c.arch == Architecture::kNemotronH) bind_nemotron_h(c, b, p);
  else bind_qwen3_5(c, b, p);
}

// The sizes a parsed config implies (model_sizes.cpp), checked before
// anything multiplies them: every tensor dimension positive, and at most
// kMaxElements in each tensor, in all parameters together, in one
// sequence's state and in one token's K and V. Errors name `file` and the
// tensor or layer.
inline constexpr int64_t kMaxElements = int64_t{1} << 48;
Status check_model_sizes(const ModelConfig& c, const std::string& file);

}  // namespace replayssm
