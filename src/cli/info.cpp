// `replayssm info`: architecture, parameter counts (total, and the active
// ones a token runs through, which differ for mixtures of experts) and
// per-sequence memory. Needs only config.json, so it works on a config-only
// directory.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "replayssm/model.h"

namespace replayssm::cli {

namespace {

struct InfoArgs {
  std::string model;
  bool json = false;
};

int64_t dtype_bytes(const std::string& dtype) {
  return (dtype == "float32" || dtype == "float") ? 4 : 2;
}

Status run_info(const InfoArgs& a) {
  RSSM_ASSIGN_OR_RETURN(ModelConfig c, load_model_config(a.model));
  const int64_t act = dtype_bytes(c.dtype);
  const int64_t params = parameter_count(c), active = active_parameter_count(c);
  const int64_t state = ssm_state_bytes_per_sequence(c, act);
  const int64_t kv = kv_bytes_per_token(c, act);
  const int64_t n_m = c.count(BlockKind::kMamba2), n_g = c.count(BlockKind::kGatedDeltaNet);
  const int64_t n_a = c.count(BlockKind::kAttention), n_f = c.count(BlockKind::kMlp);
  const int64_t n_e = c.count(BlockKind::kMoe);
  if (a.json) {
    std::string experts;
    if (n_e > 0)
      experts = ", \"experts\": {\"routed\": " + std::to_string(c.moe.n_experts) +
                ", \"per_token\": " + std::to_string(c.moe.top_k) +
                ", \"width\": " + std::to_string(c.moe.intermediate) +
                ", \"shared_width\": " + std::to_string(c.moe.shared_intermediate) + "}";
    std::printf(
        "{\"architecture\": \"%s\", \"layers\": %lld, \"blocks\": {\"mamba2\": %lld, "
        "\"gated_deltanet\": %lld, \"attention\": %lld, \"mlp\": %lld, \"moe\": %lld}%s, "
        "\"parameters\": %lld, \"active_parameters\": %lld, "
        "\"dtype\": \"%s\", \"ssm_state_bytes_per_sequence\": %lld, \"kv_bytes_per_token\": %lld}\n",
        c.arch_name.c_str(), (long long)c.n_layers, (long long)n_m, (long long)n_g, (long long)n_a,
        (long long)n_f, (long long)n_e, experts.c_str(), (long long)params, (long long)active, c.dtype.c_str(),
        (long long)state, (long long)kv);
    return {};
  }
  std::printf("architecture      %s\n", c.arch_name.c_str());
  std::printf("layers            %lld (hidden %lld, vocab %lld)\n", (long long)c.n_layers,
              (long long)c.hidden_size, (long long)c.vocab_size);
  if (n_m) std::printf("  mamba2          %lld\n", (long long)n_m);
  if (n_g) std::printf("  gated_deltanet  %lld\n", (long long)n_g);
  if (n_a) std::printf("  attention       %lld\n", (long long)n_a);
  if (n_f) std::printf("  mlp             %lld\n", (long long)n_f);
  if (n_e)
    std::printf("  moe             %lld (%lld experts, %lld per token, width %lld; shared width %lld)\n",
                (long long)n_e, (long long)c.moe.n_experts, (long long)c.moe.top_k, (long long)c.moe.intermediate,
                (long long)c.moe.shared_intermediate);
  std::printf("parameters        %lld\n", (long long)params);
  if (active != params) std::printf("  active / token  %lld\n", (long long)active);
  std::printf("dtype             %s\n", c.dtype.c_str());
  std::printf("ssm state / seq   %lld bytes (fp32 state + %s conv window)\n", (long long)state,
              c.dtype.c_str());
  std::printf("kv / token        %lld bytes (%s)\n", (long long)kv, c.dtype.c_str());
  return {};
}

}  // namespace

Runner add_info(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  app.add_option("--model", a->model, "Model directory (config.json is enough)")->required();
  app.add_flag("--json", a->json, "Print one JSON object");
  return [a] { return run_info(*a); };
}

}  // namespace replayssm::cli
