// `replayssm generate`: tokens after a prompt, greedy by default.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "decode/generate.h"

namespace replayssm::cli {

namespace {

struct GenerateArgs {
  std::string model, prompt_ids, device = "cpu";
  int64_t max_new_tokens = 16;
  float temperature = 0.0f, top_p = 1.0f;
  uint64_t seed = 0;
  bool json = false, ignore_eos = false;
  StoreArgs store;
};

Status run_generate(const GenerateArgs& a) {
  RSSM_RETURN_IF_ERROR(check_device(a.device));
  if (a.max_new_tokens < 0) return invalid_argument("--max-new-tokens: must be >= 0");
  if (!(a.temperature >= 0.0f)) return invalid_argument("--temperature: must be >= 0");
  if (!(a.top_p > 0.0f && a.top_p <= 1.0f)) return invalid_argument("--top-p: must be in (0, 1]");
  RSSM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, parse_ids(a.prompt_ids, "--prompt-ids"));
  RSSM_ASSIGN_OR_RETURN(StoreOptions sopt, store_options(a.store));
  RSSM_ASSIGN_OR_RETURN(auto model, Model::load(a.model));
  for (int32_t t : ids)
    if (t >= model->config().vocab_size)
      return invalid_argument("--prompt-ids: token id " + std::to_string(t) + " >= vocab size " +
                              std::to_string(model->config().vocab_size));
  GenerateOptions opt;
  opt.max_new_tokens = a.max_new_tokens;
  opt.sampling = {a.temperature, a.top_p, a.seed};
  opt.stop_at_eos = !a.ignore_eos;
  opt.store = sopt;
  // Plain mode streams ids as they come; --json prints one object at the end.
  std::function<void(int32_t)> stream;
  if (!a.json)
    stream = [](int32_t t) {
      std::printf("%d ", t);
      std::fflush(stdout);
    };
  RSSM_ASSIGN_OR_RETURN(GenerateResult r, generate(*model, ids, opt, stream));
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  const int64_t steps = n > 1 ? n - 1 : 0;  // the first token comes from the prefill
  const double tpot = steps ? r.decode_s / steps : 0.0;
  if (!a.json) {
    std::printf("\n");
    std::fprintf(stderr, "%lld tokens; prefill %.2f ms; decode %.3f ms/token (%.1f tokens/s)\n",
                 (long long)n, r.prefill_s * 1e3, tpot * 1e3, tpot > 0 ? 1.0 / tpot : 0.0);
    return {};
  }
  std::string out = "{\"tokens\": [";
  for (int64_t i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(r.tokens[i]);
  const StoreStats& st = r.store;
  char stats[1024];
  std::snprintf(stats, sizeof stats,
                "], \"stats\": {\"prompt_tokens\": %zu, \"new_tokens\": %lld, \"prefill_ms\": %.3f, "
                "\"decode_ms\": %.3f, \"time_per_output_token_ms\": %.4f, \"tokens_per_s\": %.2f, "
                "\"strategy\": \"%s\", \"state_bytes_peak\": %lld, \"kv_bytes_peak\": %lld, "
                "\"state_writes_bytes\": %lld, \"replayed_tokens\": %lld, "
                "\"restores\": {\"checkpoint\": %lld, \"log_replay\": %lld, \"reprefill\": %lld}, "
                "\"evictions\": %lld}}\n",
                ids.size(), (long long)n, r.prefill_s * 1e3, r.decode_s * 1e3, tpot * 1e3,
                tpot > 0 ? 1.0 / tpot : 0.0, strategy_name(sopt.strategy), (long long)st.state_bytes_peak,
                (long long)st.kv_bytes_peak, (long long)st.state_writes_bytes, (long long)st.replayed_tokens,
                (long long)st.restores_checkpoint, (long long)st.restores_log_replay,
                (long long)st.restores_reprefill, (long long)st.evictions);
  out += stats;
  std::fwrite(out.data(), 1, out.size(), stdout);
  return {};
}

}  // namespace

Runner add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  app.add_option("--model", a->model, "Model directory")->required();
  app.add_option("--prompt-ids", a->prompt_ids, "Comma-separated token ids, e.g. 3,17,5")->required();
  app.add_option("--max-new-tokens", a->max_new_tokens, "Tokens to generate")->capture_default_str();
  app.add_option("--temperature", a->temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-p", a->top_p, "Nucleus sampling mass")->capture_default_str();
  app.add_option("--seed", a->seed, "Sampling seed")->capture_default_str();
  app.add_flag("--ignore-eos", a->ignore_eos, "Do not stop at the config's EOS token");
  app.add_flag("--json", a->json, "Print {\"tokens\": [...], \"stats\": {...}}");
  app.add_option("--device", a->device, "Device: cpu (this build has no CUDA backend)")->capture_default_str();
  add_store_options(app, &a->store);
  return [a] { return run_generate(*a); };
}

}  // namespace replayssm::cli
