// Tiny mixture-of-experts models for the tests, written as checkpoints in
// the test: the config.json of each family (NemotronH with `E` layers,
// Qwen3.5-MoE in its causal-LM and vision-language forms) and a
// model.safetensors holding every tensor the architecture lists, its
// expert stacks either fused or one tensor per expert, in fp32 or bf16.
// Values are drawn per tensor from its name, in each parameter's valid
// domain (decays in (0, 1), small positive steps, norms near their unit,
// projections at 1/sqrt(fan-in)), so the same config gives the same
// weights in either form.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "replayssm/model.h"

namespace replayssm::test {

// NemotronH: Mamba2, MoE, attention and MLP layers; 9 experts in 3 groups of
// 3, 2 groups a token may choose from, 3 experts per token, scaled by 2.5.
inline std::string nemotron_moe_config(const std::string& pattern = "ME*E-ME") {
  return R"({"architectures": ["NemotronHForCausalLM"], "hybrid_override_pattern": ")" + pattern +
         R"(", "hidden_size": 24, "vocab_size": 61, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 8, "intermediate_size": 20, "mamba_num_heads": 4, "mamba_head_dim": 6, "n_groups": 2,
      "ssm_state_size": 8, "conv_kernel": 4, "layer_norm_epsilon": 1e-5, "mlp_hidden_act": "relu2",
      "n_routed_experts": 9, "num_experts_per_tok": 3, "moe_intermediate_size": 10,
      "moe_shared_expert_intermediate_size": 14, "n_group": 3, "topk_group": 2, "norm_topk_prob": true,
      "routed_scaling_factor": 2.5, "n_shared_experts": 1, "moe_latent_size": null, "eos_token_id": 60,
      "dtype": "float32"})";
}

// Qwen3.5-MoE: 3 layers (GDN, GDN, attention), 7 experts, 3 per token, a
// gated shared expert of width `shared` (0: none). vl: the
// ForConditionalGeneration form, fields under text_config.
inline std::string qwen_moe_config(bool vl, int shared = 12) {
  const std::string text = R"("vocab_size": 53, "hidden_size": 20, "num_hidden_layers": 3,
      "layer_types": ["linear_attention", "linear_attention", "full_attention"], "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
      "linear_key_head_dim": 6, "linear_value_head_dim": 5, "linear_conv_kernel_dim": 4, "rms_norm_eps": 1e-6,
      "num_experts": 7, "num_experts_per_tok": 3, "moe_intermediate_size": 9,
      "shared_expert_intermediate_size": )" +
                           std::to_string(shared) + R"(, "eos_token_id": 52,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})";
  if (!vl) return R"({"architectures": ["Qwen3_5MoeForCausalLM"], )" + text + R"(, "dtype": "float32"})";
  return R"({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "tie_word_embeddings": false,
      "dtype": "float32", "text_config": {)" +
         text + "}}";
}

// The value of element i of tensor `name`, in its parameter's domain.
class TensorFill {
 public:
  explicit TensorFill(const ModelConfig& c) : c_(c) {}
  std::vector<float> values(const TensorSpec& t) const {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    uint32_t h = 2166136261u;  // FNV-1a of the name: a seed per tensor
    for (unsigned char ch : t.name) h = (h ^ ch) * 16777619u;
    std::mt19937 g(h);
    auto u = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(g); };
    std::vector<float> v(static_cast<size_t>(n));
    const std::string& s = t.name;
    auto ends = [&](const std::string& x) { return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0; };
    for (float& x : v) {
      if (ends("A_log")) x = std::log(u(1.0f, 8.0f));
      else if (ends("dt_bias")) {
        const float dt = std::exp(u(std::log(1e-3f), std::log(1e-1f)));
        x = dt + std::log(-std::expm1(-dt));  // softplus⁻¹
      } else if (ends(".D")) x = u(0.5f, 1.5f);
      else if (ends("conv1d.weight")) x = u(-0.5f, 0.5f);
      else if (ends("e_score_correction_bias")) x = u(-0.05f, 0.05f);
      else if (ends("bias")) x = u(-0.1f, 0.1f);
      else if (t.shape.size() == 1 && s.find("norm") != std::string::npos)
        x = c_.norm_unit_offset && !ends("linear_attn.norm.weight") ? u(-0.3f, 0.3f) : u(0.5f, 1.5f);
      else if (t.shape.size() >= 2 && s.find("embed") != std::string::npos) x = u(-1.0f, 1.0f);
      else if (t.shape.size() >= 2) {
        const float k = std::sqrt(3.0f / static_cast<float>(t.shape.back()));
        x = u(-k, k);
      } else x = u(-0.1f, 0.1f);
    }
    return v;
  }

 private:
  const ModelConfig& c_;
};

// Writes `config_json` and a model.safetensors for it into `dir`.
// per_expert: the expert stacks as one tensor per expert and part; bf16:
// every tensor stored as bfloat16; tensors named in `omit` are left out.
inline void write_moe_checkpoint(const std::string& dir, const std::string& config_json, bool per_expert,
                                 bool bf16, const std::vector<std::string>& omit = {}) {
  std::ofstream(dir + "/config.json") << config_json;
  auto c = parse_model_config(config_json, "test config");
  if (!c.ok()) throw std::runtime_error(c.status().message());
  const TensorFill fill(*c);
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  auto put = [&](const std::string& name, const std::vector<int64_t>& shape, const float* v, int64_t n) {
    for (const std::string& o : omit)
      if (o == name) return;
    const size_t begin = data.size();
    for (int64_t i = 0; i < n; ++i) {
      if (bf16) {
        const uint16_t h = f32_to_bf16(v[i]);
        data.append(reinterpret_cast<const char*>(&h), 2);
      } else {
        data.append(reinterpret_cast<const char*>(v + i), 4);
      }
    }
    header[name] = {{"dtype", bf16 ? "BF16" : "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  };
  for (const TensorSpec& t : expected_tensors(*c)) {
    const std::vector<float> v = fill.values(t);
    if (!per_expert || t.expert_parts.empty()) {
      put(t.name, t.shape, v.data(), static_cast<int64_t>(v.size()));
      continue;
    }
    const int64_t E = t.shape[0], rows = t.shape[1], cols = t.shape[2];
    const int64_t parts = static_cast<int64_t>(t.expert_parts.size()), part_rows = rows / parts;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t p = 0; p < parts; ++p)
        put(t.expert_prefix + std::to_string(e) + t.expert_parts[size_t(p)], {part_rows, cols},
            v.data() + (e * rows + p * part_rows) * cols, part_rows * cols);
  }
  header["__metadata__"] = {{"format", "pt"}};
  const std::string h = header.dump();
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << h << data;
}

// One tiny MoE config per family form, named for test parameters: NemotronH,
// Qwen3.5-MoE with and without its shared expert, and (with_vl) the
// vision-language class's text model.
struct MoeFamily {
  std::string name, config;
};

inline std::vector<MoeFamily> moe_families(bool with_vl) {
  std::vector<MoeFamily> f = {{"nemotron_h", nemotron_moe_config()}, {"qwen3_5_moe", qwen_moe_config(false)}};
  if (with_vl) f.push_back({"qwen3_5_moe_vl", qwen_moe_config(true)});
  f.push_back({"qwen3_5_moe_no_shared", qwen_moe_config(false, 0)});
  return f;
}

}  // namespace replayssm::test
