// `replayssm bench --device cuda` without a GPU: what it refuses (one line
// naming the option, exit 1, nothing run), the device weights' estimate,
// and the sweep machinery a device backend plugs into (Runner: its
// out-of-budget probes and its own device bytes). The device runs the same
// workloads over the CUDA backend as the CPU does over its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "bench/memory.h"
#include "bench/presets.h"
#include "bench/report.h"
#include "bench/sweep.h"
#include "test_util.h"

namespace replayssm {
namespace {

using namespace replayssm::bench;
using test::run_cli;
using test::TempDir;

struct Refusal {
  std::string args, needle;
};

TEST(BenchDevice, CudaRefusesBadOptionsByName) {
  TempDir dir;
  const std::string base = "bench --device cuda --out " + dir.file("o") + " ";
  const std::vector<Refusal> cases = {
      {"--workload ar --window 0", "--window: '0' must be in"},
      {"--workload ar --page-size 0", "--page-size: must be in [1, "},
      {"--workload ar --memory-budget host", "--memory-budget: 'host' does not apply to --device cuda"},
      {"--workload ar --memory-budget lots", "--memory-budget: 'lots'"},
      {"--workload ar --batch 0", "--batch: '0' must be in"},
      {"--workload ar --strategy dense", "--strategy: unknown strategy 'dense'"},
      {"--workload ar --preset llama-7b", "--preset: unknown preset 'llama-7b'"},
      {"--workload ar --runs 0", "--runs: must be >= 1"},
      {"--workload ar --new-tokens 1", "--new-tokens: must be >= 2"},
  };
  for (const Refusal& c : cases) {
    auto r = run_cli(base + c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file("o"))) << c.args << ": refused before --out is made";
  }
}

// The default strategies (all three) run on cuda, so a plain
// `--workload ar` gets as far as the device: here,
// where there is none (or no CUDA in the build), one line saying so.
TEST(BenchDevice, CudaWithoutADeviceIsOneLine) {
  if (std::filesystem::exists("/dev/nvidia0")) GTEST_SKIP() << "a GPU is present: tests/cuda runs it";
  TempDir dir;
  auto r = run_cli("bench --device cuda --workload ar --out " + dir.file("o"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const bool no_device = r.err.find("--device cuda: no CUDA device") != std::string::npos;
  const bool no_build = r.err.find("--device cuda: this replayssm was built without CUDA") != std::string::npos;
  EXPECT_TRUE(no_device || no_build) << r.err;
}

TEST(BenchDevice, DeviceWeightsAreBf16) {
  auto c = preset_config("nemotron-h-8b");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(device_weight_bytes(*c), 2 * parameter_count(*c));
  EXPECT_EQ(2 * device_weight_bytes(*c), weight_bytes(*c));
}

// A device backend's runner: runs above `fits` fail out of budget, as the
// CUDA backend's allocations do when the device cannot hold the batch.
class FakeDeviceRunner : public Runner {
 public:
  FakeDeviceRunner(const SweepOptions& opt, int64_t fits) : opt_(opt), fits_(fits) {}
  const SweepOptions& options() const override { return opt_; }
  Result<Measurement> run(const Config& c) override {
    ++runs;
    if (c.batch > fits_) return out_of_budget("cannot allocate batch " + std::to_string(c.batch));
    Measurement m;
    m.decode_s = 0.001 * static_cast<double>(c.batch);
    m.emitted = 10 * c.batch;
    m.state.state_bytes_peak = 1000 * c.batch;
    m.state.kv_bytes_peak = 100 * c.batch;
    m.device_bytes = 5000 + 1100 * c.batch + 77;
    return m;
  }
  std::string cannot_hold(const Config&) override { return ""; }
  std::string out_of_budget_limit() const override { return "device memory"; }
  int64_t runs = 0;

 private:
  SweepOptions opt_;
  int64_t fits_;
};

// One sweep on `runner` (weights of 5,000 bytes) over a workload's
// strategies and batches, W = 16.
Result<std::vector<ConfigResult>> sweep_on(Runner& runner, Workload w, std::vector<Strategy> strategies,
                                           std::vector<int64_t> batches, SweepCost* cost) {
  Axes a;
  a.workloads = {w};
  a.strategies = std::move(strategies);
  a.batches = std::move(batches);
  a.windows = {16};
  Progress progress(false);
  return run_sweep(runner, 5000, enumerate_configs(a, DraftKind::kOracle), progress, cost);
}

TEST(BenchDevice, OutOfBudgetProbesStopTheSearchAsDeviceMemory) {
  SweepOptions opt;
  opt.latency_target = 10.0;
  opt.concurrency_limit = 512;
  FakeDeviceRunner runner(opt, 5);
  Config c;
  auto r = search_max_concurrency(runner, c, {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->value, 5);
  EXPECT_EQ(r->limited_by, "device memory");
}

TEST(BenchDevice, ASweepOnARunnerReportsItsDeviceBytes) {
  SweepOptions opt;
  opt.runs = 2;
  opt.warmup = 1;
  opt.concurrency = true;
  opt.latency_target = 10.0;
  opt.concurrency_limit = 64;
  FakeDeviceRunner runner(opt, 12);
  SweepCost cost;
  auto res = sweep_on(runner, Workload::kAr, {Strategy::kSnapshot}, {1, 2}, &cost);
  ASSERT_TRUE(res.ok()) << res.status().message();
  ASSERT_EQ(res->size(), 2u);
  EXPECT_EQ(cost.runs, 6);
  const nlohmann::json j = config_json((*res)[1]);
  EXPECT_EQ(j["strategy"], "snapshot");
  EXPECT_EQ(j["peak_device_bytes"], 5000 + 1100 * 2 + 77) << "the device's own count, not weights + store";
  EXPECT_EQ(j["peak_state_bytes"], 2000);
  // The search brackets the answer to a quarter of it: 12 fits, 13 does not.
  const int64_t conc = j["max_concurrency"].get<int64_t>();
  EXPECT_LE(conc, 12);
  EXPECT_GE(conc, 9);
  EXPECT_EQ(j["max_concurrency_limited_by"], "device memory");
  EXPECT_NE(format_table(*res).find(std::to_string(conc) + "D"), std::string::npos);
}

}  // namespace
}  // namespace replayssm
