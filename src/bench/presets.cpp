// The preset table (see presets.h). Shapes: tiny is the embedded trained
// model's (models/nemotron_h_small) and tiny-qwen3.5 its Gated DeltaNet
// sibling; the large ones follow the published config.json files
// (Nemotron-H-8B as in tests/data/nemotron_h_8b_config; the two mixtures
// of experts as NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 and Qwen3.5-35B-A3B
// publish theirs, the latter's text_config in its causal-LM form).
#include "bench/presets.h"

namespace replayssm::bench {

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"tiny", "NemotronH, 9 layers (5 Mamba2, 1 attention, 3 MLP), hidden 256: the embedded model's shape",
       R"({"architectures": ["NemotronHForCausalLM"], "hidden_size": 256, "vocab_size": 4096,
           "hybrid_override_pattern": "M-M*M-M-M", "num_hidden_layers": 9,
           "mamba_num_heads": 8, "mamba_head_dim": 32, "ssm_state_size": 64, "n_groups": 1, "conv_kernel": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
           "intermediate_size": 640, "mlp_hidden_act": "relu2", "layer_norm_epsilon": 1e-5,
           "eos_token_id": 0, "dtype": "bfloat16"})"},
      {"tiny-qwen3.5", "Qwen3.5, 8 layers (6 Gated DeltaNet, 2 attention), hidden 256",
       R"({"architectures": ["Qwen3_5ForCausalLM"], "hidden_size": 256, "vocab_size": 4096,
           "num_hidden_layers": 8, "full_attention_interval": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
           "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
           "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4, "intermediate_size": 640,
           "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "eos_token_id": 0, "dtype": "bfloat16"})"},
      {"nemotron-h-4b", "NVIDIA Nemotron-H-4B: hidden 3136, 42 layers (21 Mamba2, 4 attention, 17 MLP)",
       R"({"architectures": ["NemotronHForCausalLM"], "hidden_size": 3136, "vocab_size": 131072,
           "hybrid_override_pattern": "M-M-M-MM-M-M*-M-M*-M-M-M*-M-M-MM*-MMM-M-M-", "num_hidden_layers": 42,
           "mamba_num_heads": 96, "mamba_head_dim": 80, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
           "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
           "intermediate_size": 12544, "mlp_hidden_act": "relu2", "layer_norm_epsilon": 1e-5,
           "time_step_limit": [0.0, Infinity], "eos_token_id": 2, "dtype": "bfloat16"})"},
      {"nemotron-h-8b", "NVIDIA Nemotron-H-8B: hidden 4096, 52 layers (24 Mamba2, 4 attention, 24 MLP)",
       R"({"architectures": ["NemotronHForCausalLM"], "hidden_size": 4096, "vocab_size": 131072,
           "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
           "num_hidden_layers": 52, "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128,
           "n_groups": 8, "conv_kernel": 4, "num_attention_heads": 32, "num_key_value_heads": 8,
           "attention_head_dim": 128, "intermediate_size": 21504, "mlp_hidden_act": "relu2",
           "layer_norm_epsilon": 1e-5, "time_step_limit": [0.0, Infinity], "eos_token_id": 2,
           "dtype": "bfloat16"})"},
      {"qwen3.5-27b", "Qwen3.5-27B: hidden 5120, 64 layers (48 Gated DeltaNet, 16 attention)",
       R"({"architectures": ["Qwen3_5ForCausalLM"], "hidden_size": 5120, "vocab_size": 248320,
           "num_hidden_layers": 64, "full_attention_interval": 4,
           "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
           "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "intermediate_size": 17408,
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25},
           "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "eos_token_id": 248044, "dtype": "bfloat16"})"},
      {"nemotron-3-nano-30b-a3b",
       "NVIDIA Nemotron 3 Nano 30B-A3B: hidden 2688, 52 layers (23 Mamba2, 23 MoE of 128 experts, 6 per token, "
       "6 attention)",
       R"({"architectures": ["NemotronHForCausalLM"], "hidden_size": 2688, "vocab_size": 131072,
           "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
           "num_hidden_layers": 52, "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128,
           "n_groups": 8, "conv_kernel": 4, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128,
           "intermediate_size": 1856, "mlp_hidden_act": "relu2", "n_routed_experts": 128, "n_shared_experts": 1,
           "num_experts_per_tok": 6, "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712,
           "n_group": 1, "topk_group": 1, "norm_topk_prob": true, "routed_scaling_factor": 2.5,
           "layer_norm_epsilon": 1e-5, "eos_token_id": 2, "dtype": "bfloat16"})"},
      {"qwen3.5-35b-a3b",
       "Qwen3.5-35B-A3B: hidden 2048, 40 layers (30 Gated DeltaNet, 10 attention), each with an MoE of 256 "
       "experts, 8 per token",
       R"({"architectures": ["Qwen3_5MoeForCausalLM"], "hidden_size": 2048, "vocab_size": 248320,
           "num_hidden_layers": 40, "full_attention_interval": 4,
           "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
           "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
           "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
           "shared_expert_intermediate_size": 512, "mlp_only_layers": [],
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25},
           "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "eos_token_id": 248044, "dtype": "bfloat16"})"},
  };
  return table;
}

std::string preset_names() {
  std::string s;
  for (const Preset& p : presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

Result<ModelConfig> preset_config(std::string_view name) {
  for (const Preset& p : presets()) {
    if (p.name != name) continue;
    RSSM_ASSIGN_OR_RETURN(ModelConfig c, parse_model_config(p.config_json, "preset " + p.name));
    c.dir = "preset:" + p.name;
    return c;
  }
  return invalid_argument("--preset: unknown preset '" + std::string(name) + "' (expected one of: " +
                          preset_names() + ")");
}

}  // namespace replayssm::bench
