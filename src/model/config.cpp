// load_model_config: reads config.json, picks the architecture, delegates
// the fields to it (nemotron_h.cpp, qwen3_5.cpp), then checks the invariants
// every architecture shares.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "io/config_reader.h"
#include "io/read_file.h"
#include "model/program.h"
#include "replayssm/model_config.h"

namespace replayssm {

const char* block_kind_name(BlockKind k) {
  switch (k) {
    case BlockKind::kMamba2: return "mamba2";
    case BlockKind::kGatedDeltaNet: return "gated_deltanet";
    case BlockKind::kAttention: return "attention";
    case BlockKind::kMlp: return "mlp";
    case BlockKind::kMoe: return "moe";
  }
  return "?";
}

bool ModelConfig::is_eos(int32_t token) const {
  return std::find(eos_token_ids.begin(), eos_token_ids.end(), token) != eos_token_ids.end();
}

int64_t ModelConfig::count(BlockKind k) const {
  int64_t n = 0;
  for (BlockKind b : blocks) n += b == k;
  return n;
}

namespace {

// EOS ids: an integer or a list of integers; absent or null means none.
Status read_eos(ConfigReader& r, const nlohmann::json& top, ModelConfig* c) {
  const nlohmann::json* e = r.raw("eos_token_id");
  if (e == nullptr && top.contains("eos_token_id") && !top["eos_token_id"].is_null()) e = &top["eos_token_id"];
  if (e == nullptr) return {};
  auto take = [&](const nlohmann::json& v) {
    if (!v.is_number_integer()) {
      r.fail("eos_token_id", "expected an integer or a list of integers, got " + e->dump());
      return;
    }
    // Checked before narrowing, which would wrap 2^32 + 1 to the id 1.
    if (v.is_number_unsigned() ? v.get<uint64_t>() >= static_cast<uint64_t>(c->vocab_size)
                               : (v.get<int64_t>() < 0 || v.get<int64_t>() >= c->vocab_size)) {
      r.fail("eos_token_id", v.dump() + " is outside the vocabulary (" + std::to_string(c->vocab_size) + ")");
      return;
    }
    c->eos_token_ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  };
  if (e->is_array()) for (const auto& v : *e) take(v);
  else take(*e);
  return r.status();
}

Status check_common(const ModelConfig& c, const std::string& file) {
  auto bad = [&](const std::string& what) { return invalid_argument(file + ": " + what); };
  if (c.blocks.empty()) return bad("the model has no layers");
  if (c.count(BlockKind::kAttention) > 0) {
    if (c.attn.n_heads % c.attn.n_kv_heads != 0)
      return bad("num_attention_heads " + std::to_string(c.attn.n_heads) +
                 " is not a multiple of num_key_value_heads " + std::to_string(c.attn.n_kv_heads));
    if (c.attn.rotary_dim % 2 != 0 || c.attn.rotary_dim > c.attn.head_dim)
      return bad("rotary dimension " + std::to_string(c.attn.rotary_dim) +
                 " must be even and at most head_dim " + std::to_string(c.attn.head_dim));
  }
  if (c.count(BlockKind::kMamba2) > 0 && c.mamba.n_heads % c.mamba.n_groups != 0)
    return bad("mamba_num_heads " + std::to_string(c.mamba.n_heads) + " is not a multiple of n_groups " +
               std::to_string(c.mamba.n_groups));
  if (c.count(BlockKind::kGatedDeltaNet) > 0 && c.gdn.n_v_heads % c.gdn.n_k_heads != 0)
    return bad("linear_num_value_heads " + std::to_string(c.gdn.n_v_heads) +
               " is not a multiple of linear_num_key_heads " + std::to_string(c.gdn.n_k_heads));
  return {};
}

}  // namespace

Result<ModelConfig> load_model_config(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string file = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found(dir + ": no such model directory");
  RSSM_ASSIGN_OR_RETURN(const std::string text, read_whole_file(file));
  RSSM_ASSIGN_OR_RETURN(ModelConfig c, parse_model_config(text, file));
  c.dir = dir;
  return c;
}

Result<ModelConfig> parse_model_config(const std::string& text, const std::string& file) {
  const nlohmann::json top = ConfigReader::parse_config_text(text);
  if (top.is_discarded() || !top.is_object()) return corrupt(file + ": not a JSON object");

  std::string arch;
  if (top.contains("architectures") && top["architectures"].is_array() && !top["architectures"].empty() &&
      top["architectures"][0].is_string())
    arch = top["architectures"][0].get<std::string>();
  else if (top.contains("model_type") && top["model_type"].is_string())
    arch = top["model_type"].get<std::string>();
  else
    return invalid_argument(file + ": field 'architectures': missing (and no 'model_type')");

  ModelConfig c;
  c.arch_name = arch;
  if (arch == "NemotronHForCausalLM" || arch == "nemotron_h") {
    c.arch = Architecture::kNemotronH;
    ConfigReader r(top, file);
    RSSM_RETURN_IF_ERROR(parse_nemotron_h(r, &c));
    RSSM_RETURN_IF_ERROR(read_eos(r, top, &c));
  } else if (arch == "Qwen3_5ForCausalLM" || arch == "qwen3_5_text" || arch == "Qwen3_5MoeForCausalLM" ||
             arch == "qwen3_5_moe_text") {
    c.arch = Architecture::kQwen3_5;
    c.weight_prefix = "model.";
    ConfigReader r(top, file);
    RSSM_RETURN_IF_ERROR(parse_qwen3_5(r, &c, /*moe=*/arch == "Qwen3_5MoeForCausalLM" || arch == "qwen3_5_moe_text"));
    RSSM_RETURN_IF_ERROR(read_eos(r, top, &c));
  } else if (arch == "Qwen3_5ForConditionalGeneration" || arch == "qwen3_5" ||
             arch == "Qwen3_5MoeForConditionalGeneration" || arch == "qwen3_5_moe") {
    // The text model of a vision-language checkpoint: fields under
    // text_config, weights under model.language_model., tying decided at the
    // top level (as transformers does).
    if (!top.contains("text_config") || top["text_config"].is_null())
      return invalid_argument(file + ": field 'text_config': missing for " + arch);
    if (!top["text_config"].is_object())
      return invalid_argument(file + ": field 'text_config': expected an object, got " + top["text_config"].dump());
    c.arch = Architecture::kQwen3_5;
    c.weight_prefix = "model.language_model.";
    ConfigReader r(top["text_config"], file + " (text_config)");
    RSSM_RETURN_IF_ERROR(
        parse_qwen3_5(r, &c, /*moe=*/arch == "Qwen3_5MoeForConditionalGeneration" || arch == "qwen3_5_moe"));
    ConfigReader t(top, file);
    c.tie_embeddings = t.boolean("tie_word_embeddings", false);
    RSSM_RETURN_IF_ERROR(t.status());
    RSSM_RETURN_IF_ERROR(read_eos(r, top, &c));
  } else {
    return unsupported(file + ": field 'architectures': unknown architecture '" + arch +
                       "' (supported: NemotronHForCausalLM, Qwen3_5ForCausalLM, "
                       "Qwen3_5ForConditionalGeneration, Qwen3_5MoeForCausalLM, "
                       "Qwen3_5MoeForConditionalGeneration)");
  }
  // The checkpoint dtype: "dtype" (transformers 5) or "torch_dtype" (4.x).
  for (const char* key : {"dtype", "torch_dtype"}) {
    const nlohmann::json* src = &top;
    if (!top.contains(key) && top.contains("text_config") && top["text_config"].is_object()) src = &top["text_config"];
    if (src->contains(key) && (*src)[key].is_string()) {
      c.dtype = (*src)[key].get<std::string>();
      break;
    }
  }
  if (c.dtype != "float32" && c.dtype != "bfloat16" && c.dtype != "float16")
    return invalid_argument(file + ": field 'dtype': unsupported value '" + c.dtype +
                            "' (expected float32, bfloat16 or float16)");
  RSSM_RETURN_IF_ERROR(check_common(c, file));
  RSSM_RETURN_IF_ERROR(check_model_sizes(c, file));
  return c;
}

}  // namespace replayssm
