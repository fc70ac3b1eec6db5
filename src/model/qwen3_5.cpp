// Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM (and the text models of
// their ForConditionalGeneration forms): config fields and tensor names.
//
// Layer i is `linear_attention` (Gated DeltaNet) or `full_attention` (gated
// attention with q/k norm and partial RoPE), from `layer_types` or, failing
// that, `full_attention_interval`; each layer is followed by a SwiGLU MLP —
// in Qwen3.5-MoE a mixture of SwiGLU experts (softmax router, top-k
// renormalised) plus a shared expert behind a sigmoid gate — so a layer is
// two blocks. Every RMS norm except the GDN output norm uses zero-centred
// weights, applied as (1 + w).
#include <cmath>
#include <string>

#include "io/config_reader.h"
#include "model/program.h"

namespace replayssm {

namespace {

Status layer_kinds(ConfigReader& r, int64_t n_layers, std::vector<BlockKind>* kinds) {
  if (const nlohmann::json* list = r.raw("layer_types")) {
    if (!list->is_array() || static_cast<int64_t>(list->size()) != n_layers)
      return invalid_argument(r.file() + ": field 'layer_types': expected a list of num_hidden_layers (" +
                              std::to_string(n_layers) + ") entries");
    for (size_t i = 0; i < list->size(); ++i) {
      const nlohmann::json& v = (*list)[i];
      const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
      if (s == "linear_attention") kinds->push_back(BlockKind::kGatedDeltaNet);
      else if (s == "full_attention" || s == "attention") kinds->push_back(BlockKind::kAttention);
      else
        return invalid_argument(r.file() + ": field 'layer_types'[" + std::to_string(i) +
                                "]: unknown layer type '" + s + "'");
    }
    return {};
  }
  // An interval past the last layer leaves every layer linear, as in transformers.
  const int64_t interval = r.integer("full_attention_interval", 4);
  RSSM_RETURN_IF_ERROR(r.status());
  for (int64_t i = 0; i < n_layers; ++i)
    kinds->push_back((i + 1) % interval == 0 ? BlockKind::kAttention : BlockKind::kGatedDeltaNet);
  return {};
}

// Qwen3_5MoeSparseMoeBlock's fields. Qwen3-Next's config names the same
// block's fields alike but adds three of its own; in a Qwen3.5-MoE config,
// which transformers reads without them, a value that would change the
// model there is refused rather than ignored.
void parse_moe(ConfigReader& r, ModelConfig* c) {
  MoeConfig& e = c->moe;
  e.router = MoeConfig::Router::kSoftmax;
  e.n_experts = r.integer("num_experts", 256);
  e.top_k = r.integer("num_experts_per_tok", 8);
  e.intermediate = r.integer("moe_intermediate_size", 512);
  e.shared_intermediate = r.integer("shared_expert_intermediate_size", 512, 0);
  e.gated = true;
  e.act = Activation::kSilu;
  e.shared_gate = true;
  e.shared_bias = false;
  e.norm_topk_prob = true;  // Qwen3_5MoeTopKRouter always renormalises
  if (r.has("norm_topk_prob") && !r.boolean("norm_topk_prob"))
    r.fail("norm_topk_prob", "false is not supported: Qwen3.5-MoE's router always renormalises the chosen weights");
  if (const nlohmann::json* only = r.raw("mlp_only_layers"); only && !(only->is_array() && only->empty()))
    r.fail("mlp_only_layers", "dense layers among the MoE ones (Qwen3-Next's layout) are not supported: every "
                              "Qwen3.5-MoE layer's MLP is a mixture of experts");
  if (r.has("decoder_sparse_step") && r.integer("decoder_sparse_step", 1) != 1)
    r.fail("decoder_sparse_step", "only 1 (an MoE block in every layer) is supported");
  if (r.status().ok() && e.top_k > e.n_experts)
    r.fail("num_experts_per_tok", std::to_string(e.top_k) + " is more than num_experts " +
                                      std::to_string(e.n_experts));
}

}  // namespace

Status parse_qwen3_5(ConfigReader& r, ModelConfig* c, bool moe) {
  c->vocab_size = r.integer("vocab_size", 248320);
  c->hidden_size = r.integer("hidden_size", 4096);
  c->n_layers = r.integer("num_hidden_layers", 32, 1, kMaxLayers);
  c->norm_eps = static_cast<float>(r.number("rms_norm_eps", 1e-6));
  if (!(c->norm_eps > 0.0f && std::isfinite(c->norm_eps))) r.fail("rms_norm_eps", "must be a positive number");
  c->norm_unit_offset = true;
  c->tie_embeddings = r.boolean("tie_word_embeddings", false);
  RSSM_RETURN_IF_ERROR(r.status());
  std::vector<BlockKind> kinds;
  RSSM_RETURN_IF_ERROR(layer_kinds(r, c->n_layers, &kinds));
  for (int64_t i = 0; i < c->n_layers; ++i) {
    c->blocks.push_back(kinds[i]);
    c->block_layer.push_back(i);
    c->blocks.push_back(moe ? BlockKind::kMoe : BlockKind::kMlp);
    c->block_layer.push_back(i);
  }

  AttentionConfig& a = c->attn;
  a.n_heads = r.integer("num_attention_heads", 16);
  a.n_kv_heads = r.integer("num_key_value_heads", 4);
  a.head_dim = r.integer("head_dim", 256);
  a.bias = r.boolean("attention_bias", false);
  a.output_gate = true;
  a.qk_norm = true;
  // RoPE: transformers 5 nests theta and the partial factor in
  // rope_parameters; older configs keep them at the top level. A legacy
  // `rope_scaling` object replaces rope_parameters when it is non-empty
  // (PreTrainedConfig.convert_rope_params_to_dict), and a dict without
  // `rope_type` names it `type`. Only default RoPE is implemented (mRoPE's
  // sections reduce to it for text positions): a scaled RoPE is refused by
  // name rather than run as plain RoPE.
  double theta = r.number("rope_theta", 10000.0);
  double partial = r.number("partial_rotary_factor", 0.25);
  const char* rope_key = "rope_parameters";
  if (const nlohmann::json* rs = r.raw("rope_scaling"); rs && !(rs->is_object() && rs->empty()))
    rope_key = "rope_scaling";
  if (const nlohmann::json* rp = r.raw(rope_key)) {
    if (!rp->is_object()) {
      r.fail(rope_key, "expected an object");
    } else {
      ConfigReader rr(*rp, r.file() + " (" + rope_key + ")");
      theta = rr.number("rope_theta", theta);
      partial = rr.number("partial_rotary_factor", partial);
      const char* type_key = rr.has("rope_type") ? "rope_type" : "type";
      const std::string type = rr.string(type_key, "default");
      if (type != "default" && type != "mrope")
        r.fail(std::string(rope_key) + "." + type_key,
               "'" + type + "' is not supported (only default RoPE; scaled RoPE would change every position)");
      if (!rr.status().ok()) return rr.status();
    }
  }
  if (!(partial > 0.0 && partial <= 1.0)) r.fail("partial_rotary_factor", "must be in (0, 1]");
  if (!(theta > 0.0)) r.fail("rope_theta", "must be positive");
  a.rope_theta = static_cast<float>(theta);
  a.rotary_dim = static_cast<int64_t>(static_cast<double>(a.head_dim) * partial);

  GdnConfig& g = c->gdn;
  g.n_k_heads = r.integer("linear_num_key_heads", 16);
  g.n_v_heads = r.integer("linear_num_value_heads", 32);
  g.k_dim = r.integer("linear_key_head_dim", 128);
  g.v_dim = r.integer("linear_value_head_dim", 128);
  g.conv_width = r.integer("linear_conv_kernel_dim", 4, 1, 64);

  if (const std::string act = r.string("hidden_act", "silu"); act != "silu" && act != "swish")
    r.fail("hidden_act", "unsupported activation '" + act + "' (expected silu)");
  if (moe) {
    parse_moe(r, c);
  } else {
    MlpConfig& f = c->mlp;
    f.intermediate = r.integer("intermediate_size", 12288);
    f.gated = true;
    f.bias = false;
    f.act = Activation::kSilu;
  }
  return r.status();
}

void bind_qwen3_5(const ModelConfig& c, WeightBinder& b, Program* p) {
  const std::string& pre = c.weight_prefix;
  const int64_t D = c.hidden_size;
  b.tensor(pre + "embed_tokens.weight", {c.vocab_size, D}, &p->embed);
  int cache_layer = 0;
  for (size_t bi = 0; bi < c.blocks.size(); ++bi) {
    Block blk;
    blk.kind = c.blocks[bi];
    blk.layer = c.block_layer[bi];
    const std::string l = pre + "layers." + std::to_string(blk.layer) + ".";
    switch (blk.kind) {
      case BlockKind::kGatedDeltaNet: {
        const GdnConfig& g = c.gdn;
        const std::string mx = l + "linear_attn.";
        const int64_t Vd = g.n_v_heads * g.v_dim, C = g.conv_channels();
        b.tensor(l + "input_layernorm.weight", {D}, &blk.norm);
        b.linear(mx + "in_proj_qkv", C, D, false, &blk.gdn.in_qkv);
        b.linear(mx + "in_proj_z", Vd, D, false, &blk.gdn.in_z);
        b.linear(mx + "in_proj_b", g.n_v_heads, D, false, &blk.gdn.in_b);
        b.linear(mx + "in_proj_a", g.n_v_heads, D, false, &blk.gdn.in_a);
        b.tensor(mx + "conv1d.weight", {C, 1, g.conv_width}, &blk.gdn.conv_w);
        b.tensor(mx + "A_log", {g.n_v_heads}, &blk.gdn.A_log);
        b.tensor(mx + "dt_bias", {g.n_v_heads}, &blk.gdn.dt_bias);
        b.tensor(mx + "norm.weight", {g.v_dim}, &blk.gdn.norm_w);
        b.linear(mx + "out_proj", D, Vd, false, &blk.gdn.out_proj);
        blk.cache_layer = cache_layer++;
        break;
      }
      case BlockKind::kAttention: {
        const AttentionConfig& a = c.attn;
        const std::string mx = l + "self_attn.";
        b.tensor(l + "input_layernorm.weight", {D}, &blk.norm);
        b.linear(mx + "q_proj", 2 * a.n_heads * a.head_dim, D, a.bias, &blk.attn.q);
        b.linear(mx + "k_proj", a.n_kv_heads * a.head_dim, D, a.bias, &blk.attn.k);
        b.linear(mx + "v_proj", a.n_kv_heads * a.head_dim, D, a.bias, &blk.attn.v);
        b.linear(mx + "o_proj", D, a.n_heads * a.head_dim, a.bias, &blk.attn.o);
        b.tensor(mx + "q_norm.weight", {a.head_dim}, &blk.attn.q_norm);
        b.tensor(mx + "k_norm.weight", {a.head_dim}, &blk.attn.k_norm);
        blk.cache_layer = cache_layer++;
        break;
      }
      case BlockKind::kMlp: {
        const std::string mx = l + "mlp.";
        b.tensor(l + "post_attention_layernorm.weight", {D}, &blk.norm);
        b.linear(mx + "gate_proj", c.mlp.intermediate, D, false, &blk.mlp.gate);
        b.linear(mx + "up_proj", c.mlp.intermediate, D, false, &blk.mlp.up);
        b.linear(mx + "down_proj", D, c.mlp.intermediate, false, &blk.mlp.down);
        break;
      }
      case BlockKind::kMoe: {
        const MoeConfig& e = c.moe;
        const std::string mx = l + "mlp.";
        const int64_t E = e.n_experts, I = e.intermediate, Is = e.shared_intermediate;
        b.tensor(l + "post_attention_layernorm.weight", {D}, &blk.norm);
        b.linear(mx + "gate", E, D, false, &blk.moe.router);
        // Fused: gate_up_proj (E, 2I, D), each expert's gate rows then its up rows.
        b.experts({mx + "experts.gate_up_proj", {E, 2 * I, D}, false, mx + "experts.",
                   {".gate_proj.weight", ".up_proj.weight"}},
                  &blk.moe.up);
        b.experts({mx + "experts.down_proj", {E, D, I}, false, mx + "experts.", {".down_proj.weight"}}, &blk.moe.down);
        // A shared expert of width 0 adds nothing; its gate is still a
        // parameter of the block (and of transformers' count).
        if (Is > 0) {
          b.linear(mx + "shared_expert.gate_proj", Is, D, false, &blk.moe.shared.gate);
          b.linear(mx + "shared_expert.up_proj", Is, D, false, &blk.moe.shared.up);
          b.linear(mx + "shared_expert.down_proj", D, Is, false, &blk.moe.shared.down);
        }
        b.linear(mx + "shared_expert_gate", 1, D, false, &blk.moe.shared_gate);
        break;
      }
      case BlockKind::kMamba2:
        break;  // not a Qwen3.5 layer type
    }
    p->blocks.push_back(blk);
  }
  b.tensor(pre + "norm.weight", {D}, &p->final_norm);
  p->lm_head.n_out = c.vocab_size;
  p->lm_head.n_in = D;
  if (c.tie_embeddings) p->lm_head.w = p->embed;  // transformers ties: the file omits lm_head
  else b.tensor("lm_head.weight", {c.vocab_size, D}, &p->lm_head.w);
}

}  // namespace replayssm
