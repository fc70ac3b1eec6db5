// A sweep: the configurations a bench command crosses, each run `warmup`
// times (discarded) and `runs` times (kept), summarised; then the
// max_concurrency search per series (concurrency.cpp). Who runs a
// configuration is a Runner: the CPU reference (run_once) or a device
// backend (BackendRunner, runner.h), so both share the sweep, the
// summaries and the search.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/bench.h"
#include "bench/progress.h"
#include "bench/runner.h"
#include "bench/workloads.h"

namespace replayssm::bench {

// The lists a sweep crosses. spec_ts and accuracies apply to spec only;
// restore under replay runs twice, with the whole log kept and with none.
struct Axes {
  std::vector<Workload> workloads;
  std::vector<Strategy> strategies;
  std::vector<int64_t> batches, windows, spec_ts;
  std::vector<double> accuracies;  // oracle drafts only
};

// Every configuration, grouped by series (batch varies fastest). restore
// under replay runs with the log since the checkpoint (log_retention 0)
// and with the whole log kept (-1).
std::vector<Config> enumerate_configs(const Axes& a, DraftKind draft);

// Summarises the kept runs of one configuration. weights: bytes of the
// model's weights (for peak_device_bytes where a run does not measure it).
ConfigResult summarize(const Config& c, const std::vector<Measurement>& runs, int64_t weights);

// What a sweep cost, for the record.
struct SweepCost {
  int64_t runs = 0, probes = 0;
  double sweep_s = 0.0, search_s = 0.0;
};

// Runs every configuration, then (if enabled) the max_concurrency search.
Result<std::vector<ConfigResult>> run_sweep(Runner& runner, int64_t weights, const std::vector<Config>& configs,
                                            Progress& progress, SweepCost* cost = nullptr);
// On the context's backend: run_once on ctx.
Result<std::vector<ConfigResult>> run_sweep(BenchContext& ctx, const std::vector<Config>& configs,
                                            Progress& progress, SweepCost* cost = nullptr);

// Does one configuration's result stay within the search's limits?
// Returns "" if it does, else the limit it breaks ("memory", "latency").
std::string breaks_limit(const SweepOptions& opt, int64_t store_bytes, double time_per_output_token);

// The max_concurrency search of one series (concurrency.cpp). `measured`
// are the sweep's own results for the series, used as starting points.
Result<ConcurrencyResult> search_max_concurrency(Runner& runner, const Config& series,
                                                 const std::vector<const ConfigResult*>& measured);
// The same on the context's backend.
Result<ConcurrencyResult> search_max_concurrency(BenchContext& ctx, const Config& series,
                                                 const std::vector<const ConfigResult*>& measured);

}  // namespace replayssm::bench
