// ModelConfig: an architecture-neutral description of a hybrid model, parsed
// from a Hugging Face config.json.
//
// Each architecture (src/model/nemotron_h.cpp, qwen3_5.cpp) maps its own
// config fields onto this struct; the forward pass and the cache see only
// blocks. A block is one pre-norm residual unit: h += mixer(norm(h)).
// NemotronH layer i is one block; a Qwen3.5 layer is two (token mixer, then
// an MLP, or a mixture of experts in Qwen3.5-MoE).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "replayssm/status.h"

namespace replayssm {

enum class Architecture { kNemotronH, kQwen3_5 };

enum class BlockKind { kMamba2, kGatedDeltaNet, kAttention, kMlp, kMoe };
const char* block_kind_name(BlockKind k);

enum class Activation { kRelu2, kSilu, kGeluTanh, kRelu };

struct AttentionConfig {
  int64_t n_heads = 0;      // Hq
  int64_t n_kv_heads = 0;   // Hkv
  int64_t head_dim = 0;     // D
  bool bias = false;        // q/k/v/o projections carry a bias
  bool output_gate = false; // q_proj also yields a per-element sigmoid gate (Qwen3.5)
  bool qk_norm = false;     // per-head RMS norm of q and k before RoPE (Qwen3.5)
  int64_t rotary_dim = 0;   // 0 = no RoPE (NemotronH)
  float rope_theta = 10000.0f;
};

struct Mamba2Config {
  int64_t n_heads = 0;     // H
  int64_t head_dim = 0;    // P
  int64_t state_size = 0;  // N
  int64_t n_groups = 0;    // G
  int64_t conv_width = 0;  // K
  bool conv_bias = true;
  bool proj_bias = false;  // in_proj / out_proj bias
  float dt_min = 0.0f;     // time_step_limit
  float dt_max = std::numeric_limits<float>::infinity();
  int64_t conv_channels() const { return n_heads * head_dim + 2 * n_groups * state_size; }
};

struct GdnConfig {
  int64_t n_k_heads = 0;   // Hk
  int64_t n_v_heads = 0;   // Hv
  int64_t k_dim = 0;       // dk
  int64_t v_dim = 0;       // dv
  int64_t conv_width = 0;  // K
  int64_t conv_channels() const { return 2 * n_k_heads * k_dim + n_v_heads * v_dim; }
};

struct MlpConfig {
  int64_t intermediate = 0;
  Activation act = Activation::kSilu;
  bool gated = false;  // down(act(gate(x)) ⊙ up(x)) vs down(act(up(x)))
  bool bias = false;
};

// A mixture-of-experts feed-forward block (DESIGN.md §10): a router picks
// top_k of n_experts routed experts per token and weighs their outputs; a
// shared expert, when there is one, runs on every token.
struct MoeConfig {
  // softmax: Qwen3.5-MoE / Qwen3-Next. sigmoid: NemotronH (DeepSeek-V3 style,
  // with the correction bias and group-limited choice).
  enum class Router { kSoftmax, kSigmoid };
  Router router = Router::kSoftmax;
  int64_t n_experts = 0;            // E routed experts
  int64_t top_k = 0;                // K experts per token
  int64_t intermediate = 0;         // a routed expert's width
  int64_t shared_intermediate = 0;  // the shared expert's width; 0: no shared expert
  bool shared_gate = false;         // shared output ⊙ sigmoid(shared_expert_gate(x))
  bool shared_bias = false;         // the shared expert's projections carry biases
  bool gated = false;               // down(act(gate(x)) ⊙ up(x)) vs down(act(up(x)))
  Activation act = Activation::kSilu;
  int64_t n_group = 1;              // sigmoid: experts in n_group groups of E/n_group
  int64_t topk_group = 1;           // sigmoid: groups a token may choose from
  bool norm_topk_prob = true;       // chosen weights divided by their sum
  float routed_scaling_factor = 1.0f;
  bool correction_bias = false;     // sigmoid: e_score_correction_bias shifts the choice

  // Parameters of one routed expert (its up or gate|up, and down).
  int64_t expert_parameters(int64_t hidden) const { return (gated ? 3 : 2) * intermediate * hidden; }
};

struct ModelConfig {
  Architecture arch = Architecture::kNemotronH;
  std::string arch_name;       // as in config.json "architectures"
  std::string dir;             // the model directory
  std::string weight_prefix;   // e.g. "backbone." or "model.language_model."
  std::string dtype = "float32";  // checkpoint dtype from config.json
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t n_layers = 0;        // HF layers
  float norm_eps = 1e-5f;
  bool norm_unit_offset = false;  // RMS norm weight is applied as (1 + w)
  bool tie_embeddings = false;
  std::vector<int32_t> eos_token_ids;  // generation stops after one of these
  std::vector<BlockKind> blocks;
  std::vector<int64_t> block_layer;  // HF layer index of each block
  AttentionConfig attn;
  Mamba2Config mamba;
  GdnConfig gdn;
  MlpConfig mlp;
  MoeConfig moe;

  int64_t count(BlockKind k) const;
  bool is_eos(int32_t token) const;
};

// Reads `dir`/config.json (top-level, or its nested "text_config").
// Errors name the file and the field at fault.
Result<ModelConfig> load_model_config(const std::string& dir);
// The same from config.json text; `file` names the source in errors (a path,
// or e.g. "preset tiny"). ModelConfig::dir is left empty.
Result<ModelConfig> parse_model_config(const std::string& text, const std::string& file);

}  // namespace replayssm
