// config.json parsing: both NemotronH layer-list forms, Qwen3.5 flat and
// nested, transformers' special floats, and errors that name the field.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "io/config_reader.h"
#include "replayssm/model.h"
#include "test_util.h"

namespace replayssm {
namespace {

using test::TempDir;

Result<ModelConfig> load_json(const TempDir& dir, const std::string& text) {
  std::ofstream(dir.file("config.json")) << text;
  return load_model_config(dir.path());
}

// Nemotron-H-8B shape, in both the published and the transformers-5 form.
TEST(Config, NemotronH8BInBothForms) {
  for (const char* name : {"nemotron_h_8b_config", "nemotron_h_8b_config_v5"}) {
    auto c = load_model_config(test::data_dir(name));
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->count(BlockKind::kMamba2), 24) << name;
    EXPECT_EQ(c->count(BlockKind::kAttention), 4) << name;
    EXPECT_EQ(c->count(BlockKind::kMlp), 24) << name;
    EXPECT_EQ(c->mamba.conv_channels(), 8192 + 2 * 8 * 128);
    EXPECT_TRUE(std::isinf(c->mamba.dt_max));
    // 24 × (128·64·128 fp32 state + 3 conv rows × 10240 channels × bf16).
    EXPECT_EQ(ssm_state_bytes_per_sequence(*c, 2), 24 * (128 * 64 * 128 * 4 + 3 * 10240 * 2));
    EXPECT_EQ(kv_bytes_per_token(*c, 2), 4 * 2 * 8 * 128 * 2);
    EXPECT_EQ(parameter_count(*c), 8100852736);
  }
}

TEST(Config, SpecialFloatsInBothForms) {
  TempDir dir;
  const std::string base = R"({"architectures": ["NemotronHForCausalLM"], "hybrid_override_pattern": "M*",
    "hidden_size": 16, "vocab_size": 10, "mamba_num_heads": 2, "mamba_head_dim": 4,
    "n_groups": 1, "ssm_state_size": 4, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
    "note": "Infinity stays a string", "time_step_limit": )";
  for (const std::string lim : {"[0.001, Infinity]", R"([0.001, {"__float__": "Infinity"}])"}) {
    auto c = load_json(dir, base + lim + "}");
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_FLOAT_EQ(c->mamba.dt_min, 0.001f);
    EXPECT_TRUE(std::isinf(c->mamba.dt_max));
  }
  auto j = ConfigReader::parse_config_text(R"({"s": "NaN -Infinity \"Infinity\"", "x": -Infinity})");
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["s"], "NaN -Infinity \"Infinity\"");
  EXPECT_EQ(*ConfigReader::as_number(j["x"]), -INFINITY);
}

struct BadCase {
  std::string json;
  StatusCode code;
  std::string needle;
};

TEST(Config, ErrorsNameTheField) {
  const std::string nh = R"("architectures": ["NemotronHForCausalLM"], "hidden_size": 16, "vocab_size": 10,
    "mamba_num_heads": 2, "mamba_head_dim": 4, "n_groups": 1, "ssm_state_size": 4,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8)";
  const std::vector<BadCase> cases = {
      {R"({"architectures": ["LlamaForCausalLM"]})", StatusCode::kUnsupported, "unknown architecture 'LlamaForCausalLM'"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*X"})", StatusCode::kInvalidArgument, "'X'"},
      {"{" + nh + R"(, "layers_block_type": ["linear_attention", "conv"]})", StatusCode::kInvalidArgument, "'conv'"},
      // MoE layers named by the `layer_types` alias reach the experts' checks (moe_config_test has the rest).
      {"{" + nh + R"(, "layer_types": ["linear_attention", "moe"], "moe_latent_size": 4})", StatusCode::kInvalidArgument, "'moe_latent_size'"},
      {"{" + nh + "}", StatusCode::kInvalidArgument, "layers_block_type"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "mamba_num_heads": 0})", StatusCode::kInvalidArgument, "'mamba_num_heads': value 0 out of range"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "ssm_state_size": "big"})", StatusCode::kInvalidArgument, "'ssm_state_size': expected an integer"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "n_groups": 3, "mamba_num_heads": 4})", StatusCode::kInvalidArgument, "not a multiple of n_groups"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "num_attention_heads": 3, "num_key_value_heads": 2})", StatusCode::kInvalidArgument, "num_key_value_heads"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "num_hidden_layers": 5})", StatusCode::kInvalidArgument, "'num_hidden_layers'"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "time_step_limit": [1, 0]})", StatusCode::kInvalidArgument, "'time_step_limit'"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "time_step_limit": [NaN, Infinity]})", StatusCode::kInvalidArgument, "'time_step_limit'"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "eos_token_id": 10})", StatusCode::kInvalidArgument, "'eos_token_id': 10 is outside the vocabulary (10)"},
      // Checked before narrowing to a token id, which would wrap it to 1.
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "eos_token_id": [4294967297]})", StatusCode::kInvalidArgument, "'eos_token_id': 4294967297 is outside"},
      // transformers' head_dim default, hidden_size // num_attention_heads, would be 0.
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "head_dim": null, "num_attention_heads": 32, "num_key_value_heads": 32})", StatusCode::kInvalidArgument, "'head_dim': missing, and hidden_size 16 / num_attention_heads 32 leaves no head dimension"},
      // Sizes whose products would overflow, and layer counts that would
      // list millions of tensors, are refused before anything multiplies them.
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "hidden_size": 16777217})", StatusCode::kInvalidArgument, "'hidden_size': value 16777217 out of range [1, 16777216]"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "mamba_num_heads": 16777216, "mamba_head_dim": 16777216, "n_groups": 1})", StatusCode::kInvalidArgument, "tensor 'backbone.layers.0.mixer.in_proj.weight' of shape [562949970198536, 16] would hold more than 2^48 elements"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M-", "hidden_size": 16777216, "intermediate_size": 16777216})", StatusCode::kInvalidArgument, "the model's parameters would number more than 2^48"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M", "mamba_num_heads": 16777216, "mamba_head_dim": 1024, "ssm_state_size": 16777216, "n_groups": 1})", StatusCode::kInvalidArgument, "cache layer 0 (SSM): a sequence's state or a token's K and V would hold more than 2^48 elements"},
      {"{" + nh + R"(, "hybrid_override_pattern": ")" + std::string(4097, 'M') + R"("})", StatusCode::kInvalidArgument, "the layer list has 4097 entries; at most 4096"},
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "num_hidden_layers": 1099511627776})", StatusCode::kInvalidArgument, "'num_hidden_layers': value 1099511627776 out of range [1, 4096]"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "dtype": "int8"})", StatusCode::kInvalidArgument, "'dtype'"},
      {R"({"architectures": ["Qwen3_5ForConditionalGeneration"]})", StatusCode::kInvalidArgument, "'text_config': missing"},
      {R"({"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": "x"})", StatusCode::kInvalidArgument, "'text_config': expected an object, got \"x\""},
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "num_hidden_layers": 2, "layer_types": ["full_attention"]})", StatusCode::kInvalidArgument, "'layer_types'"},
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "rope_parameters": {"rope_type": "yarn"}})", StatusCode::kInvalidArgument, "yarn"},
      // A legacy rope_scaling replaces rope_parameters; `type` stands for rope_type.
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "rope_scaling": {"rope_type": "linear", "factor": 8}})", StatusCode::kInvalidArgument, "'rope_scaling.rope_type': 'linear' is not supported"},
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "rope_parameters": {"rope_type": "default"}, "rope_scaling": {"type": "dynamic", "factor": 2}})", StatusCode::kInvalidArgument, "'rope_scaling.type': 'dynamic'"},
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "rope_parameters": {"type": "linear", "factor": 8}})", StatusCode::kInvalidArgument, "'rope_parameters.type': 'linear'"},
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "rope_scaling": [1, 2]})", StatusCode::kInvalidArgument, "'rope_scaling': expected an object"},
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "rms_norm_eps": 0})", StatusCode::kInvalidArgument, "'rms_norm_eps': must be a positive number"},
      {"{" + nh + R"(, "hybrid_override_pattern": "M*", "layer_norm_epsilon": -1e-5})", StatusCode::kInvalidArgument, "'layer_norm_epsilon': must be a positive number"},
      {R"({"architectures": ["Qwen3_5ForCausalLM"], "linear_num_key_heads": 3, "linear_num_value_heads": 4})", StatusCode::kInvalidArgument, "linear_num_key_heads"},
      {R"({"model": 1})", StatusCode::kInvalidArgument, "'architectures'"},
      {"[1, 2]", StatusCode::kCorrupt, "not a JSON object"},
      {"{\"architectures\": ", StatusCode::kCorrupt, "not a JSON object"},
  };
  for (const BadCase& bc : cases) {
    TempDir dir;
    auto c = load_json(dir, bc.json);
    ASSERT_FALSE(c.ok()) << bc.json;
    EXPECT_EQ(c.status().code(), bc.code) << c.status().message();
    EXPECT_NE(c.status().message().find(bc.needle), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(dir.file("config.json")), std::string::npos) << c.status().message();
  }
}

TEST(Config, MissingDirectoryAndFile) {
  auto c = load_model_config("/nonexistent/model");
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/model"), std::string::npos);
  TempDir dir;
  c = load_model_config(dir.path());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("config.json"), std::string::npos);
}

TEST(Config, Qwen35Forms) {
  auto flat = load_model_config(test::data_dir("qwen3_5_tiny"));
  ASSERT_TRUE(flat.ok()) << flat.status().message();
  EXPECT_EQ(flat->weight_prefix, "model.");
  EXPECT_EQ(flat->attn.rotary_dim, 4);  // 0.25 of 16
  EXPECT_EQ(flat->blocks.size(), 8u);   // 4 layers × (mixer, MLP)
  auto vl = load_model_config(test::data_dir("qwen3_5_vl_tied"));
  ASSERT_TRUE(vl.ok()) << vl.status().message();
  EXPECT_EQ(vl->weight_prefix, "model.language_model.");
  EXPECT_TRUE(vl->tie_embeddings);       // from the top level, as transformers decides
  EXPECT_EQ(vl->attn.rotary_dim, 8);     // rope_parameters wins over the top-level factor
  EXPECT_FLOAT_EQ(vl->attn.rope_theta, 1e6f);
  EXPECT_EQ(vl->count(BlockKind::kGatedDeltaNet), 2);
  EXPECT_EQ(vl->count(BlockKind::kAttention), 1);
}

TEST(Config, QwenLayerTypesFromInterval) {
  TempDir dir;
  auto c = load_json(dir, R"({"architectures": ["Qwen3_5ForCausalLM"], "num_hidden_layers": 8,
      "full_attention_interval": 4})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::vector<BlockKind> mixers;
  for (size_t i = 0; i < c->blocks.size(); i += 2) mixers.push_back(c->blocks[i]);
  const auto G = BlockKind::kGatedDeltaNet, A = BlockKind::kAttention;
  EXPECT_EQ(mixers, (std::vector<BlockKind>{G, G, G, A, G, G, G, A}));
}

// Valid configs transformers reads, read the same way here.
TEST(Config, TransformersReadings) {
  TempDir dir;
  const std::string qwen = R"("architectures": ["Qwen3_5ForCausalLM"], "num_hidden_layers": 4, "head_dim": 16)";
  // An empty rope_scaling falls back to rope_parameters; mRoPE is plain RoPE for text.
  auto c = load_json(dir, "{" + qwen + R"(, "rope_scaling": {}, "rope_parameters": {"rope_type": "default",
      "rope_theta": 5e5, "partial_rotary_factor": 0.5}})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FLOAT_EQ(c->attn.rope_theta, 5e5f);
  EXPECT_EQ(c->attn.rotary_dim, 8);
  // A non-empty rope_scaling wins over rope_parameters.
  c = load_json(dir, "{" + qwen + R"(, "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1],
      "rope_theta": 1e4}, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FLOAT_EQ(c->attn.rope_theta, 1e4f);
  // Legacy "attention" in layer_types; an interval past the last layer.
  c = load_json(dir, "{" + qwen + R"(, "layer_types": ["linear_attention", "attention", "linear_attention",
      "full_attention"]})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->count(BlockKind::kAttention), 2);
  c = load_json(dir, "{" + qwen + R"(, "full_attention_interval": 9})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->count(BlockKind::kAttention), 0);
  EXPECT_EQ(c->count(BlockKind::kGatedDeltaNet), 4);

  const std::string nh = R"("architectures": ["NemotronHForCausalLM"], "hidden_size": 16, "vocab_size": 10,
    "mamba_num_heads": 2, "mamba_head_dim": 4, "n_groups": 1, "ssm_state_size": 4,
    "num_attention_heads": 2, "head_dim": 8)";
  // `layer_types` is transformers' alias of layers_block_type; a null KV
  // head count means one per query head; rms_norm_eps is not NemotronH's.
  c = load_json(dir, "{" + nh + R"(, "layer_types": ["mamba", "attention", "mlp"],
      "num_key_value_heads": null, "rms_norm_eps": 0.5})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->blocks, (std::vector<BlockKind>{BlockKind::kMamba2, BlockKind::kAttention, BlockKind::kMlp}));
  EXPECT_EQ(c->attn.n_kv_heads, 2);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
}

}  // namespace
}  // namespace replayssm
