// Running one configuration once. Each workload drives the API it
// measures — generate_batch (ar, spec), beam_search, best_of_n, TreeSearch,
// Session::restore — on the sweep's backend and reads the state manager's
// own counters; the benchmark adds only the clock around the decode part
// and the bookkeeping of what was emitted.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bench/bench.h"
#include "bench/runner.h"
#include "replayssm/backend.h"

namespace replayssm::bench {

// What every run of a sweep shares: the backend, the options, the prompts
// and the greedy references the oracle drafts read. Not thread-safe.
class BenchContext {
 public:
  // `backend` runs the workloads (run_once); a runner that drives its own
  // device passes none and gives prepare_references its own greedy.
  BenchContext(const ModelConfig& config, Backend* backend, const SweepOptions& opt)
      : config_(config), backend_(backend), opt_(opt) {}
  Backend& backend() const { return *backend_; }
  const ModelConfig& config() const { return config_; }
  const SweepOptions& options() const { return opt_; }

  // Prompt i: prompt_tokens ids drawn from (seed, i), the same in every
  // configuration, so batches differ only in how many prompts they take.
  const std::vector<int32_t>& prompt(int64_t i);
  std::vector<std::vector<int32_t>> prompts(int64_t n);
  // Makes references 0..n-1 at least `length` tokens long: prompt i
  // followed by its greedy continuation, computed once for all missing
  // ones in one batch — by `greedy` (the new tokens of each prompt) where
  // given, else by generate_batch on the sweep's backend under the default
  // options.
  using Greedy = std::function<Result<std::vector<std::vector<int32_t>>>(
      const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens)>;
  Status prepare_references(int64_t n, int64_t length, const Greedy& greedy = {});
  const std::vector<int32_t>& reference(int64_t i) const { return refs_[static_cast<size_t>(i)]; }
  // The state options of a configuration.
  StateOptions state_options(const Config& c) const;

 private:
  ModelConfig config_;
  Backend* backend_;
  SweepOptions opt_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::vector<int32_t>> refs_;
};

// One run of `c`, with the process's peak RSS reset before it.
Result<Measurement> run_once(BenchContext& ctx, const Config& c);

// A backend as a sweep's Runner: run_once; a search probe that would not
// fit in host memory by estimate is not run ("host memory").
class BackendRunner : public Runner {
 public:
  explicit BackendRunner(BenchContext& ctx) : ctx_(ctx) {}
  const SweepOptions& options() const override { return ctx_.options(); }
  Result<Measurement> run(const Config& c) override { return run_once(ctx_, c); }
  // The CPU backend: "host memory" by estimate; a device backend: "" (its
  // allocation answers, as kOutOfBudget).
  std::string cannot_hold(const Config& c) override;
  std::string out_of_budget_limit() const override { return on_host() ? "host memory" : "device memory"; }

 private:
  bool on_host() const;
  BenchContext& ctx_;
};

// Per workload (workload_decode.cpp, workload_search.cpp, workload_restore.cpp).
Result<Measurement> run_decode(BenchContext& ctx, const Config& c);   // ar, spec
Result<Measurement> run_beam(BenchContext& ctx, const Config& c);
Result<Measurement> run_best_of_n(BenchContext& ctx, const Config& c);
Result<Measurement> run_tree(BenchContext& ctx, const Config& c);
Result<Measurement> run_restore(BenchContext& ctx, const Config& c);
// The positions the restore workload restores to, for a base sequence of
// L tokens: 1, 2, 4, ... and L − 1.
std::vector<int64_t> restore_positions(int64_t L);

}  // namespace replayssm::bench
