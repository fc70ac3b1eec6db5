// Enumerating, running and summarising a sweep (see sweep.h).
#include "bench/sweep.h"

#include <algorithm>
#include <map>

#include "bench/memory.h"
#include "core/clock.h"

namespace replayssm::bench {

std::vector<Config> enumerate_configs(const Axes& a, DraftKind draft) {
  std::vector<Config> out;
  for (Workload w : a.workloads)
    for (Strategy s : a.strategies)
      for (int64_t win : a.windows) {
        std::vector<int64_t> ts{0};
        std::vector<double> accs{-1.0};
        std::vector<int64_t> retentions{0};
        if (w == Workload::kSpec) {
          ts = a.spec_ts;
          if (draft == DraftKind::kOracle) accs = a.accuracies;
        }
        // The two restore paths at equal distances: log replay needs the
        // log kept (replay only); without it replay re-prefills.
        if (w == Workload::kRestore && s == Strategy::kReplay) retentions = {-1, 0};
        for (int64_t t : ts)
          for (double acc : accs)
            for (int64_t ret : retentions)
              for (int64_t b : a.batches) {
                Config c;
                c.workload = w;
                c.strategy = s;
                c.batch = b;
                c.window = win;
                c.spec_t = t;
                c.draft_accuracy = acc;
                c.log_retention = ret;
                out.push_back(c);
              }
      }
  return out;
}

ConfigResult summarize(const Config& c, const std::vector<Measurement>& runs, int64_t weights) {
  ConfigResult r;
  r.config = c;
  std::vector<double> tpot, tps, rollback;
  int64_t drafted = 0, accepted = 0;
  for (const Measurement& m : runs) {
    tpot.push_back(m.time_per_output_token(c.batch));
    tps.push_back(m.tokens_per_s());
    r.peak_state_bytes = std::max(r.peak_state_bytes, m.state.state_bytes_peak);
    r.peak_kv_bytes = std::max(r.peak_kv_bytes, m.state.kv_bytes_peak);
    r.peak_rss_bytes = std::max(r.peak_rss_bytes, m.rss_peak_bytes);
    r.state_writes_bytes = std::max(r.state_writes_bytes, m.state.state_writes_bytes);
    r.restores_checkpoint = m.state.restores_checkpoint;
    r.restores_log_replay = m.state.restores_log_replay;
    r.restores_reprefill = m.state.restores_reprefill;
    if (m.device_bytes >= 0) r.peak_device_bytes = std::max(r.peak_device_bytes, m.device_bytes);
    drafted += m.spec.drafted;
    accepted += m.spec.accepted;
    if (m.spec.rejections > 0) rollback.push_back(m.spec.rollback_s / static_cast<double>(m.spec.rejections));
  }
  r.time_per_output_token = Summary::of(tpot);
  r.tokens_per_s = Summary::of(tps);
  // A device run counts what it held; on the CPU, what a device would hold.
  if (r.peak_device_bytes == 0) r.peak_device_bytes = weights + r.peak_state_bytes + r.peak_kv_bytes;
  if (c.workload == Workload::kSpec) {
    r.acceptance_rate = drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
    if (!rollback.empty()) r.rollback_cost = Summary::of(rollback);
  }
  if (c.workload == Workload::kRestore && !runs.empty()) {
    // Every run probes the same positions; distance and path do not vary.
    for (size_t i = 0; i < runs[0].restores.size(); ++i) {
      std::vector<double> secs;
      for (const Measurement& m : runs)
        if (i < m.restores.size()) secs.push_back(m.restores[i].seconds);
      const RestoreSample& s = runs[0].restores[i];
      r.restore_latency.push_back({s.position, s.distance, s.path, Summary::of(secs)});
    }
  }
  return r;
}

std::string breaks_limit(const SweepOptions& opt, int64_t store_bytes, double tpot) {
  if (opt.memory_budget > 0 && store_bytes > opt.memory_budget) return "memory";
  if (opt.latency_target > 0 && tpot > opt.latency_target) return "latency";
  return "";
}

namespace {

// Estimated cost of one run, for the ETA: token rows through the model.
double run_units(const Config& c, const SweepOptions& opt) {
  const double rows = static_cast<double>(c.batch) * static_cast<double>(opt.new_tokens) *
                      static_cast<double>(1 + c.spec_t);
  return rows + static_cast<double>(opt.prompt_tokens);
}

}  // namespace

Result<std::vector<ConfigResult>> run_sweep(BenchContext& ctx, const std::vector<Config>& configs,
                                            Progress& progress, SweepCost* cost) {
  BackendRunner runner(ctx);
  return run_sweep(runner, ctx.backend().memory().weights_bytes, configs, progress, cost);
}

Result<std::vector<ConfigResult>> run_sweep(Runner& runner, int64_t weights, const std::vector<Config>& configs,
                                            Progress& progress, SweepCost* cost) {
  const SweepOptions& opt = runner.options();
  SweepCost local;
  SweepCost& spent = cost ? *cost : local;
  double t0 = now_seconds();
  double total = 0.0, done = 0.0;
  for (const Config& c : configs) total += run_units(c, opt) * static_cast<double>(opt.warmup + opt.runs);
  progress.start("bench", total);
  std::vector<ConfigResult> results;
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    std::vector<Measurement> kept;
    for (int64_t r = 0; r < opt.warmup + opt.runs; ++r) {
      progress.update(done, std::to_string(i + 1) + "/" + std::to_string(configs.size()) + " " + c.describe() +
                                (r < opt.warmup ? " (warm-up)" : " run " + std::to_string(r - opt.warmup + 1)));
      Result<Measurement> m = runner.run(c);
      if (!m.ok()) return Status(m.status().code(), c.describe() + ": " + m.status().message());
      if (r >= opt.warmup) kept.push_back(std::move(m).value());
      done += run_units(c, opt);
      spent.runs++;
    }
    results.push_back(summarize(c, kept, weights));
  }
  progress.update(total, "done");
  progress.finish();
  spent.sweep_s = now_seconds() - t0;
  if (!opt.concurrency) return results;
  t0 = now_seconds();

  // One search per series: the batches of a series share every other axis.
  std::map<std::string, std::vector<size_t>> series;
  std::vector<std::string> order;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string key = results[i].config.series();
    if (series.find(key) == series.end()) order.push_back(key);
    series[key].push_back(i);
  }
  progress.start("max concurrency", static_cast<double>(order.size()));
  for (size_t k = 0; k < order.size(); ++k) {
    const std::vector<size_t>& idx = series[order[k]];
    progress.update(static_cast<double>(k), std::to_string(k + 1) + "/" + std::to_string(order.size()) + " " + order[k]);
    std::vector<const ConfigResult*> measured;
    for (size_t i : idx) measured.push_back(&results[i]);
    RSSM_ASSIGN_OR_RETURN(ConcurrencyResult cr, search_max_concurrency(runner, results[idx[0]].config, measured));
    for (size_t i : idx) results[i].max_concurrency = cr;
    spent.probes += cr.probes;
  }
  spent.search_s = now_seconds() - t0;
  progress.update(static_cast<double>(order.size()), "done");
  progress.finish();
  return results;
}

}  // namespace replayssm::bench
