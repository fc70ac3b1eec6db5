// `replayssm bench --workload prefix` (see bench_prefix.h).
#include "cli/bench_prefix.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/prefix_bench.h"
#include "bench/presets.h"
#include "cli/common.h"
#include "replayssm/make_backend.h"
#include "replayssm/model.h"

namespace replayssm::cli {

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t c = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, c - at));
    at = c + 1;
  }
  return out;
}

}  // namespace

void add_prefix_bench_options(CLI::App& app, PrefixBenchArgs* a) {
  app.add_option("--prefix-scenarios", a->scenarios, "prefix: comma list of chat, system, fewshot")
      ->capture_default_str();
  app.add_option("--prefix-rules", a->modes,
                 "prefix: comma list of cache rules: none, block (512-token states), node (a state per radix node), "
                 "any (any token)")
      ->capture_default_str();
  app.add_option("--prefix-scale", a->scale, "prefix: request counts (and the system prompt) × this")
      ->capture_default_str();
  app.add_option("--prefix-in-flight", a->in_flight, "prefix: requests submitted at once")->capture_default_str();
  app.add_option("--prefix-reply", a->reply, "prefix: tokens per reply")->capture_default_str();
  app.add_option("--prefix-cache-bytes", a->cache_bytes, "prefix: the cache's byte cap (0: none of its own)")
      ->capture_default_str()
      ->check(non_negative());
  app.add_option("--prefix-replay-limit", a->replay_limit, "prefix: most log entries a hit replays")
      ->capture_default_str();
  app.add_option("--prefix-probes", a->probes, "prefix: hits timed alone against their cold suffix")
      ->capture_default_str();
}

Status run_bench_prefix(const PrefixBenchArgs& a, const PrefixBenchTarget& t) {
  bench::PrefixBenchOptions o;
  o.scenarios = split(a.scenarios);
  o.modes = split(a.modes);
  o.scale = a.scale;
  o.in_flight = a.in_flight;
  o.reply = a.reply;
  o.cache_bytes = a.cache_bytes;
  o.replay_limit = a.replay_limit;
  o.probes = a.probes;
  o.seed = t.seed;
  o.state.page_size = t.page_size;
  o.state.window = t.window;
  RSSM_RETURN_IF_ERROR(bench::check_prefix_bench_options(o));
  if (t.out.empty()) return invalid_argument("--out: missing (the directory for prefix.json and table.txt)");
  if (!t.preset.empty() && !t.model.empty()) return invalid_argument("--preset and --model cannot be combined");
  std::unique_ptr<Model> model;
  if (!t.model.empty()) {
    RSSM_ASSIGN_OR_RETURN(model, Model::load(t.model));
  } else {
    RSSM_ASSIGN_OR_RETURN(ModelConfig cfg, bench::preset_config(t.preset.empty() ? "tiny" : t.preset));
    if (device_fills_matrices(t.device)) {  // no host copy of a preset's matrices
      RSSM_ASSIGN_OR_RETURN(model, Model::random_without_matrices(cfg, t.seed));
    } else {
      RSSM_ASSIGN_OR_RETURN(model, Model::random(cfg, t.seed));
    }
  }
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, make_backend(t.device, *model, t.seed));
  RSSM_ASSIGN_OR_RETURN(std::vector<bench::PrefixBenchRow> rows, bench::run_prefix_bench(*backend, o));
  std::error_code ec;
  std::filesystem::create_directories(t.out, ec);
  if (ec) return io_error("--out: cannot create '" + t.out + "': " + ec.message());
  nlohmann::json j = nlohmann::json::array();
  for (const bench::PrefixBenchRow& r : rows)
    j.push_back({{"scenario", r.scenario},
                 {"rule", r.mode},
                 {"requests", r.requests},
                 {"prompt_tokens", r.prompt_tokens},
                 {"reused_tokens", r.reused_tokens},
                 {"ideal_tokens", r.ideal_tokens},
                 {"hits", r.hits},
                 {"hit_rate", r.hit_rate},
                 {"of_ideal", r.ideal_ratio},
                 {"ttft_p50_ms", r.ttft_p50 * 1e3},
                 {"ttft_p95_ms", r.ttft_p95 * 1e3},
                 {"cache_state_bytes", r.cache_state_bytes},
                 {"cache_kv_bytes", r.cache_kv_bytes},
                 {"cache_entries", r.cache_entries},
                 {"replayed_per_hit", r.replayed_per_hit},
                 {"rerun_per_hit", r.rerun_per_hit},
                 {"probe_hit_over_cold_suffix", r.probe_ratio},
                 {"seconds", r.seconds}});
  const std::string table = bench::prefix_bench_table(rows);
  std::ofstream(std::filesystem::path(t.out) / "prefix.json") << j.dump(2) << "\n";
  std::ofstream tf(std::filesystem::path(t.out) / "table.txt");
  if (!(tf << table)) return io_error("--out: cannot write " + t.out + "/table.txt");
  std::printf("%s", table.c_str());
  std::printf("wrote %s/prefix.json, %s/table.txt\n", t.out.c_str(), t.out.c_str());
  return {};
}

}  // namespace replayssm::cli
