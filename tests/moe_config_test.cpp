// Reading mixture-of-experts configs as transformers 5.17 does: NemotronH's
// `E` layers and router fields, Qwen3.5-MoE in both of its forms, the
// tensor list with its two expert layouts, and refusals that name the field.
#include <gtest/gtest.h>

#include "moe_test_util.h"
#include "replayssm/model.h"

namespace replayssm {
namespace {

Result<ModelConfig> parse(const std::string& text) { return parse_model_config(text, "test config"); }

TEST(MoeConfig, NemotronHExpertLayersAndRouter) {
  auto c = parse(test::nemotron_moe_config());
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::vector<BlockKind> want = {BlockKind::kMamba2, BlockKind::kMoe,    BlockKind::kAttention,
                                       BlockKind::kMoe,    BlockKind::kMlp,    BlockKind::kMamba2,
                                       BlockKind::kMoe};
  EXPECT_EQ(c->blocks, want);
  const MoeConfig& e = c->moe;
  EXPECT_EQ(e.router, MoeConfig::Router::kSigmoid);
  EXPECT_TRUE(e.correction_bias);
  EXPECT_EQ(e.n_experts, 9);
  EXPECT_EQ(e.top_k, 3);
  EXPECT_EQ(e.intermediate, 10);
  EXPECT_EQ(e.shared_intermediate, 14);
  EXPECT_FALSE(e.gated);
  EXPECT_FALSE(e.shared_gate);
  EXPECT_EQ(e.act, Activation::kRelu2);
  EXPECT_EQ(e.n_group, 3);
  EXPECT_EQ(e.topk_group, 2);
  EXPECT_TRUE(e.norm_topk_prob);
  EXPECT_FLOAT_EQ(e.routed_scaling_factor, 2.5f);
  // transformers 5's list form, with its num_local_experts alias.
  auto v5 = parse(R"({"architectures": ["NemotronHForCausalLM"], "hidden_size": 16, "vocab_size": 10,
      "layers_block_type": ["linear_attention", "moe"], "mamba_num_heads": 2, "mamba_head_dim": 4, "n_groups": 1,
      "ssm_state_size": 4, "num_local_experts": 5, "num_experts_per_tok": 2, "moe_intermediate_size": 6,
      "moe_shared_expert_intermediate_size": 0, "norm_topk_prob": false})");
  ASSERT_TRUE(v5.ok()) << v5.status().message();
  EXPECT_EQ(v5->count(BlockKind::kMoe), 1);
  EXPECT_EQ(v5->moe.n_experts, 5);
  // Width 0: transformers' NemotronHMLP falls back to intermediate_size.
  EXPECT_EQ(v5->moe.shared_intermediate, v5->mlp.intermediate);
  EXPECT_FALSE(v5->moe.norm_topk_prob);
}

TEST(MoeConfig, NemotronHExpertTensorsInBothForms) {
  auto c = parse(test::nemotron_moe_config());
  ASSERT_TRUE(c.ok());
  bool up = false, shared = false, bias = false;
  for (const TensorSpec& t : expected_tensors(*c)) {
    if (t.name == "backbone.layers.1.mixer.experts.up_proj") {
      up = true;
      EXPECT_EQ(t.shape, (std::vector<int64_t>{9, 10, 24}));
      EXPECT_EQ(t.expert_prefix, "backbone.layers.1.mixer.experts.");
      EXPECT_EQ(t.expert_parts, (std::vector<std::string>{".up_proj.weight"}));
    }
    shared |= t.name == "backbone.layers.1.mixer.shared_experts.down_proj.weight";
    bias |= t.name == "backbone.layers.1.mixer.gate.e_score_correction_bias";
  }
  EXPECT_TRUE(up && shared && bias);
}

TEST(MoeConfig, Qwen35MoeInBothForms) {
  for (bool vl : {false, true}) {
    auto c = parse(test::qwen_moe_config(vl));
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->weight_prefix, vl ? "model.language_model." : "model.");
    ASSERT_EQ(c->blocks.size(), 6u);  // 3 layers × (token mixer, experts)
    for (size_t i = 1; i < 6; i += 2) EXPECT_EQ(c->blocks[i], BlockKind::kMoe);
    const MoeConfig& e = c->moe;
    EXPECT_EQ(e.router, MoeConfig::Router::kSoftmax);
    EXPECT_FALSE(e.correction_bias);
    EXPECT_TRUE(e.gated && e.shared_gate && e.norm_topk_prob);
    EXPECT_EQ(e.act, Activation::kSilu);
    EXPECT_EQ(e.n_experts, 7);
    EXPECT_EQ(e.top_k, 3);
    EXPECT_EQ(e.intermediate, 9);
    EXPECT_EQ(e.shared_intermediate, 12);
    EXPECT_FLOAT_EQ(e.routed_scaling_factor, 1.0f);
    bool gate_up = false;
    for (const TensorSpec& t : expected_tensors(*c))
      if (t.name == c->weight_prefix + "layers.0.mlp.experts.gate_up_proj") {
        gate_up = true;
        EXPECT_EQ(t.shape, (std::vector<int64_t>{7, 18, 20}));
        EXPECT_EQ(t.expert_parts, (std::vector<std::string>{".gate_proj.weight", ".up_proj.weight"}));
      }
    EXPECT_TRUE(gate_up);
  }
  // Qwen3-Next's fields at values that change nothing are accepted.
  auto next_names = parse(R"({"architectures": ["Qwen3_5MoeForCausalLM"], "num_hidden_layers": 4,
      "mlp_only_layers": [], "decoder_sparse_step": 1, "norm_topk_prob": true})");
  ASSERT_TRUE(next_names.ok()) << next_names.status().message();
  EXPECT_EQ(next_names->count(BlockKind::kMoe), 4);
}

struct Refusal {
  std::string json, needle;
};

TEST(MoeConfig, UnsupportedFieldsAreRefusedByName) {
  const std::string nh = R"("architectures": ["NemotronHForCausalLM"], "hidden_size": 16, "vocab_size": 10,
    "hybrid_override_pattern": "ME", "mamba_num_heads": 2, "mamba_head_dim": 4, "n_groups": 1, "ssm_state_size": 4)";
  const std::string qw = R"("architectures": ["Qwen3_5MoeForCausalLM"], "num_hidden_layers": 4)";
  const std::vector<Refusal> cases = {
      {"{" + nh + R"(, "moe_latent_size": 8})", "'moe_latent_size'"},
      {"{" + nh + R"(, "n_shared_experts": 2})", "'n_shared_experts'"},
      {"{" + nh + R"(, "n_routed_experts": 8, "num_experts_per_tok": 9})", "'num_experts_per_tok'"},
      {"{" + nh + R"(, "n_routed_experts": 8, "n_group": 3})", "'n_group'"},
      {"{" + nh + R"(, "n_routed_experts": 8, "n_group": 8})", "'n_group'"},  // groups of one
      {"{" + nh + R"(, "n_routed_experts": 8, "n_group": 4, "topk_group": 1, "num_experts_per_tok": 3})",
       "'topk_group'"},
      {"{" + nh + R"(, "n_routed_experts": 8, "n_group": 2, "topk_group": 3})", "'topk_group'"},
      {"{" + nh + R"(, "routed_scaling_factor": Infinity})", "'routed_scaling_factor'"},
      {"{" + nh + R"(, "moe_intermediate_size": 0})", "'moe_intermediate_size'"},
      {"{" + qw + R"(, "norm_topk_prob": false})", "'norm_topk_prob'"},
      {"{" + qw + R"(, "mlp_only_layers": [1]})", "'mlp_only_layers'"},
      {"{" + qw + R"(, "decoder_sparse_step": 2})", "'decoder_sparse_step'"},
      {"{" + qw + R"(, "num_experts": 4, "num_experts_per_tok": 5})", "'num_experts_per_tok'"},
      {R"({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "text_config": {"num_hidden_layers": 2,
          "shared_expert_intermediate_size": -1}})",
       "(text_config): field 'shared_expert_intermediate_size'"},
  };
  for (const Refusal& r : cases) {
    auto c = parse(r.json);
    ASSERT_FALSE(c.ok()) << r.json;
    EXPECT_NE(c.status().message().find(r.needle), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("test config"), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace replayssm
