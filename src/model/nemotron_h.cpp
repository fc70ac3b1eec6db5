// NemotronHForCausalLM: config fields and tensor names.
//
// Layers come from `layers_block_type` (transformers 5 writes
// linear_attention / full_attention / mlp / moe; older lists say mamba /
// attention) or from the `hybrid_override_pattern` string of published
// checkpoints (M = Mamba2, * = attention, - = MLP, E = MoE). Every layer is
// one pre-norm block; attention has no positional encoding and no bias;
// the MLP is down(relu²(up(x))). An MoE layer (Nemotron 3 Nano) routes by
// sigmoid scores with a correction bias and group-limited choice to
// experts shaped like the MLP (no gate), plus one ungated shared expert.
// Weights live under `backbone.`.
#include <cmath>
#include <string>

#include "io/config_reader.h"
#include "model/program.h"

namespace replayssm {

namespace {

Status layer_kinds(ConfigReader& r, std::vector<BlockKind>* out) {
  // transformers maps `layer_types` onto `layers_block_type` (attribute_map).
  const char* list_key = r.has("layers_block_type") ? "layers_block_type" : "layer_types";
  if (const nlohmann::json* list = r.raw(list_key)) {
    if (!list->is_array())
      return invalid_argument(r.file() + ": field '" + list_key + "': expected a list");
    for (size_t i = 0; i < list->size(); ++i) {
      const nlohmann::json& v = (*list)[i];
      const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
      const std::string where = "field '" + std::string(list_key) + "'[" + std::to_string(i) + "]";
      if (s == "linear_attention" || s == "mamba") out->push_back(BlockKind::kMamba2);
      else if (s == "full_attention" || s == "attention") out->push_back(BlockKind::kAttention);
      else if (s == "mlp") out->push_back(BlockKind::kMlp);
      else if (s == "moe") out->push_back(BlockKind::kMoe);
      else return invalid_argument(r.file() + ": " + where + ": unknown layer type '" + s + "'");
    }
    return {};
  }
  if (!r.has("hybrid_override_pattern"))
    return invalid_argument(r.file() + ": field 'layers_block_type' (or 'hybrid_override_pattern'): missing");
  const std::string pat = r.string("hybrid_override_pattern");
  RSSM_RETURN_IF_ERROR(r.status());
  for (size_t i = 0; i < pat.size(); ++i) {
    const std::string where = "field 'hybrid_override_pattern'[" + std::to_string(i) + "]";
    switch (pat[i]) {
      case 'M': out->push_back(BlockKind::kMamba2); break;
      case '*': out->push_back(BlockKind::kAttention); break;
      case '-': out->push_back(BlockKind::kMlp); break;
      case 'E': out->push_back(BlockKind::kMoe); break;
      default:
        return invalid_argument(r.file() + ": " + where + ": unknown layer character '" +
                                std::string(1, pat[i]) + "' (expected M, *, - or E)");
    }
  }
  return {};
}

// First present key among aliases (transformers renames legacy names).
const char* pick(ConfigReader& r, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (r.has(k)) return k;
  return *keys.begin();
}

Activation parse_act(ConfigReader& r, const char* key, const std::string& def) {
  const std::string s = r.string(key, def);
  if (s == "relu2") return Activation::kRelu2;
  if (s == "silu" || s == "swish") return Activation::kSilu;
  if (s == "relu") return Activation::kRelu;
  if (s == "gelu_pytorch_tanh" || s == "gelu_new") return Activation::kGeluTanh;
  r.fail(key, "unsupported activation '" + s + "'");
  return Activation::kRelu2;
}

// The MoE fields (NemotronHMoE), read where the layer list has MoE layers:
// without them transformers' defaults describe experts no layer has.
void parse_moe(ConfigReader& r, ModelConfig* c) {
  MoeConfig& e = c->moe;
  e.router = MoeConfig::Router::kSigmoid;
  e.correction_bias = true;  // NemotronHTopkRouter always holds e_score_correction_bias
  e.n_experts = r.integer(pick(r, {"n_routed_experts", "num_local_experts"}), 8);
  e.top_k = r.integer("num_experts_per_tok", 2);
  e.intermediate = r.integer("moe_intermediate_size", 7688);
  // NemotronHMLP(intermediate_size=0) falls back to `intermediate_size`
  // (`width or config.intermediate_size`): transformers always builds the
  // shared expert, so 0 means the dense MLP's width, not none.
  e.shared_intermediate = r.integer("moe_shared_expert_intermediate_size", 7688, 0);
  if (e.shared_intermediate == 0) e.shared_intermediate = c->mlp.intermediate;
  // The experts and the shared expert are NemotronHMLPs: the MLP's
  // activation, no gate; only the shared expert's projections take mlp_bias
  // (the stacked experts are bias-free parameters).
  e.gated = false;
  e.act = c->mlp.act;
  e.shared_bias = c->mlp.bias;
  e.shared_gate = false;
  e.n_group = r.integer("n_group", 1);
  e.topk_group = r.integer("topk_group", 1);
  e.norm_topk_prob = r.boolean("norm_topk_prob", true);
  const double scale = r.number("routed_scaling_factor", 1.0);
  if (!std::isfinite(scale)) r.fail("routed_scaling_factor", "must be a finite number");
  e.routed_scaling_factor = static_cast<float>(scale);
  // transformers builds exactly one shared expert whatever n_shared_experts
  // says; another count would be run as one, so it is refused instead.
  if (r.has("n_shared_experts") && r.integer("n_shared_experts", 1, 0) != 1)
    r.fail("n_shared_experts", "must be 1 (transformers builds exactly one shared expert, whatever this says)");
  if (r.has("moe_latent_size"))
    r.fail("moe_latent_size", "latent expert projections (fc1/fc2_latent_proj) are not supported; null runs the "
                              "experts at hidden_size");
  if (!r.status().ok()) return;
  const int64_t per_group = e.n_experts / e.n_group;
  if (e.top_k > e.n_experts)
    r.fail("num_experts_per_tok", std::to_string(e.top_k) + " is more than n_routed_experts " +
                                      std::to_string(e.n_experts));
  else if (e.n_experts % e.n_group != 0 || per_group < 2)
    r.fail("n_group", std::to_string(e.n_group) + " must divide n_routed_experts " + std::to_string(e.n_experts) +
                          " into groups of at least 2 (each group is scored by its two best experts)");
  else if (e.topk_group > e.n_group || e.topk_group * per_group < e.top_k)
    r.fail("topk_group", std::to_string(e.topk_group) + " groups of " + std::to_string(per_group) +
                             " experts out of n_group " + std::to_string(e.n_group) +
                             " cannot hold num_experts_per_tok " + std::to_string(e.top_k));
}

}  // namespace

Status parse_nemotron_h(ConfigReader& r, ModelConfig* c) {
  c->weight_prefix = "backbone.";
  RSSM_RETURN_IF_ERROR(layer_kinds(r, &c->blocks));
  c->n_layers = static_cast<int64_t>(c->blocks.size());
  if (c->n_layers > kMaxLayers)
    return invalid_argument(r.file() + ": the layer list has " + std::to_string(c->n_layers) + " entries; at most " +
                            std::to_string(kMaxLayers));
  for (int64_t i = 0; i < c->n_layers; ++i) c->block_layer.push_back(i);
  if (r.has("num_hidden_layers") && r.integer("num_hidden_layers", std::nullopt, 1) != c->n_layers)
    r.fail("num_hidden_layers", "is " + std::to_string(r.integer("num_hidden_layers")) +
                                    " but the layer list has " + std::to_string(c->n_layers) + " entries");
  c->vocab_size = r.integer("vocab_size", 131072);
  c->hidden_size = r.integer("hidden_size", 4096);
  // Every NemotronH norm reads layer_norm_epsilon (transformers and the
  // original model alike); an rms_norm_eps beside it is not used there.
  c->norm_eps = static_cast<float>(r.number("layer_norm_epsilon", 1e-5));
  if (!(c->norm_eps > 0.0f && std::isfinite(c->norm_eps))) r.fail("layer_norm_epsilon", "must be a positive number");
  c->norm_unit_offset = false;
  c->tie_embeddings = r.boolean("tie_word_embeddings", false);

  AttentionConfig& a = c->attn;
  a.n_heads = r.integer("num_attention_heads", 32);
  // An explicit null means one KV head per query head (transformers' rule).
  a.n_kv_heads = r.is_null("num_key_value_heads") ? a.n_heads : r.integer("num_key_value_heads", 8);
  const char* head_dim_key = pick(r, {"head_dim", "attention_head_dim"});
  a.head_dim = r.integer(head_dim_key, a.n_heads > 0 ? c->hidden_size / a.n_heads : 128);
  // transformers' default, hidden_size // num_attention_heads, is 0 when
  // the heads outnumber the width: no attention layer can have that.
  if (a.head_dim < 1 && c->count(BlockKind::kAttention) > 0)
    r.fail(head_dim_key, "missing, and hidden_size " + std::to_string(c->hidden_size) + " / num_attention_heads " +
                             std::to_string(a.n_heads) + " leaves no head dimension");
  a.bias = false;  // transformers hard-codes bias-free q/k/v/o for NemotronH

  Mamba2Config& m = c->mamba;
  m.n_heads = r.integer("mamba_num_heads", 128);
  m.head_dim = r.integer("mamba_head_dim", 64);
  m.state_size = r.integer("ssm_state_size", 128);
  m.n_groups = r.integer(pick(r, {"n_groups", "mamba_n_groups"}), 8);
  m.conv_width = r.integer(pick(r, {"conv_kernel", "mamba_d_conv"}), 4, 1, 64);
  m.conv_bias = r.boolean(pick(r, {"use_conv_bias", "mamba_conv_bias"}), true);
  m.proj_bias = r.boolean("use_bias", false);
  const char* limit_key = pick(r, {"time_step_limit", "mamba_dt_limit"});
  if (const nlohmann::json* lim = r.raw(limit_key)) {
    std::optional<double> lo, hi;
    if (lim->is_array() && lim->size() == 2) {
      lo = ConfigReader::as_number((*lim)[0]);
      hi = ConfigReader::as_number((*lim)[1]);
    }
    if (!lo || !hi || !(*lo >= 0) || !(*hi >= *lo))  // NaN fails both
      r.fail(limit_key, "expected [min, max] with 0 <= min <= max, got " + lim->dump());
    else {
      m.dt_min = static_cast<float>(*lo);
      m.dt_max = static_cast<float>(*hi);
    }
  }
  if (const std::string act = r.string("mamba_hidden_act", "silu"); act != "silu" && act != "swish")
    r.fail("mamba_hidden_act", "unsupported activation '" + act + "' (expected silu)");

  MlpConfig& f = c->mlp;
  f.intermediate = r.integer("intermediate_size", 21504);
  f.act = parse_act(r, "mlp_hidden_act", "relu2");
  f.gated = false;
  f.bias = r.boolean("mlp_bias", false);
  if (c->count(BlockKind::kMoe) > 0) parse_moe(r, c);
  return r.status();
}

void bind_nemotron_h(const ModelConfig& c, WeightBinder& b, Program* p) {
  const std::string& pre = c.weight_prefix;
  const int64_t D = c.hidden_size;
  b.tensor(pre + "embeddings.weight", {c.vocab_size, D}, &p->embed);
  int cache_layer = 0;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    Block blk;
    blk.kind = c.blocks[i];
    blk.layer = i;
    const std::string l = pre + "layers." + std::to_string(i) + ".";
    const std::string mx = l + "mixer.";
    b.tensor(l + "norm.weight", {D}, &blk.norm);
    switch (blk.kind) {
      case BlockKind::kMamba2: {
        const Mamba2Config& m = c.mamba;
        const int64_t I = m.n_heads * m.head_dim, C = m.conv_channels();
        b.linear(mx + "in_proj", I + C + m.n_heads, D, m.proj_bias, &blk.mamba.in_proj);
        b.tensor(mx + "conv1d.weight", {C, 1, m.conv_width}, &blk.mamba.conv_w);
        if (m.conv_bias) b.tensor(mx + "conv1d.bias", {C}, &blk.mamba.conv_b);
        b.tensor(mx + "A_log", {m.n_heads}, &blk.mamba.A_log);
        b.tensor(mx + "D", {m.n_heads}, &blk.mamba.D);
        b.tensor(mx + "dt_bias", {m.n_heads}, &blk.mamba.dt_bias);
        b.tensor(mx + "norm.weight", {I}, &blk.mamba.norm_w);
        b.linear(mx + "out_proj", D, I, m.proj_bias, &blk.mamba.out_proj);
        blk.cache_layer = cache_layer++;
        break;
      }
      case BlockKind::kAttention: {
        const AttentionConfig& a = c.attn;
        b.linear(mx + "q_proj", a.n_heads * a.head_dim, D, false, &blk.attn.q);
        b.linear(mx + "k_proj", a.n_kv_heads * a.head_dim, D, false, &blk.attn.k);
        b.linear(mx + "v_proj", a.n_kv_heads * a.head_dim, D, false, &blk.attn.v);
        b.linear(mx + "o_proj", D, a.n_heads * a.head_dim, false, &blk.attn.o);
        blk.cache_layer = cache_layer++;
        break;
      }
      case BlockKind::kMlp:
        b.linear(mx + "up_proj", c.mlp.intermediate, D, c.mlp.bias, &blk.mlp.up);
        b.linear(mx + "down_proj", D, c.mlp.intermediate, c.mlp.bias, &blk.mlp.down);
        break;
      case BlockKind::kMoe: {
        const MoeConfig& e = c.moe;
        const int64_t E = e.n_experts, I = e.intermediate, Is = e.shared_intermediate;
        b.linear(mx + "gate", E, D, false, &blk.moe.router);
        b.tensor(mx + "gate.e_score_correction_bias", {E}, &blk.moe.correction_bias);
        b.experts({mx + "experts.up_proj", {E, I, D}, false, mx + "experts.", {".up_proj.weight"}}, &blk.moe.up);
        b.experts({mx + "experts.down_proj", {E, D, I}, false, mx + "experts.", {".down_proj.weight"}},
                  &blk.moe.down);
        if (Is > 0) {
          b.linear(mx + "shared_experts.up_proj", Is, D, e.shared_bias, &blk.moe.shared.up);
          b.linear(mx + "shared_experts.down_proj", D, Is, e.shared_bias, &blk.moe.shared.down);
        }
        break;
      }
      case BlockKind::kGatedDeltaNet:
        break;  // not a NemotronH layer type; parse_nemotron_h never yields it
    }
    p->blocks.push_back(blk);
  }
  b.tensor(pre + "norm_f.weight", {D}, &p->final_norm);
  // transformers never ties NemotronH's head; a checkpoint that omits it but
  // declares tying falls back to the embeddings rather than failing.
  p->lm_head.n_out = c.vocab_size;
  p->lm_head.n_in = D;
  b.tensor("lm_head.weight", {c.vocab_size, D}, &p->lm_head.w, /*optional=*/c.tie_embeddings);
  if (p->lm_head.w == nullptr && c.tie_embeddings) p->lm_head.w = p->embed;
}

}  // namespace replayssm
