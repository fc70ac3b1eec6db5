// `replayssm bench --device cuda` without a GPU: what it refuses (one line
// naming the option and what cuda does not run yet, exit 1, nothing run),
// the device memory estimate, and the sweep machinery a device backend
// plugs into (Runner: its out-of-budget probes and its own device bytes).
// The GPU runs themselves are tests/cuda/bench_decode_cuda_test.cpp.
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

TEST(BenchDevice, CudaRefusesWhatTheDecoderCannotRunYet) {
  TempDir dir;
  const std::string base = "bench --device cuda --out " + dir.file("o") + " ";
  const std::vector<Refusal> cases = {
      {"--workload spec --spec-t 8", "--spec-t: 8 drafts per verify; --device cuda verifies 1..7"},
      {"--workload spec --spec-t 4 --window 8", "--window: 8 is too small for --spec-t 4 on --device cuda"},
      {"--workload ar --window 1", "--window: '1' is outside [2, 64]"},
      {"--workload ar --window 16,128", "--window: '128' is outside [2, 64]"},
      {"--workload ar --checkpoint-interval 8", "--checkpoint-interval: not supported on --device cuda yet"},
      {"--workload ar --page-size 16", "--page-size: does not apply to --device cuda"},
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

// restore on cuda runs replay with the log since the checkpoint only (the
// decoder keeps no whole log): one configuration per strategy and batch.
TEST(BenchDevice, CudaRestoreRunsTheLiveLogOnly) {
  Axes a;
  a.workloads = {Workload::kRestore};
  a.strategies = {Strategy::kReplay, Strategy::kSnapshot};
  a.batches = {1, 8};
  a.windows = {16};
  const std::vector<Config> cuda = enumerate_configs(a, DraftKind::kOracle, /*whole_log=*/false);
  ASSERT_EQ(cuda.size(), 4u);
  for (const Config& c : cuda) EXPECT_EQ(c.log_retention, 0) << c.describe();
  EXPECT_EQ(enumerate_configs(a, DraftKind::kOracle).size(), 6u) << "the CPU also keeps the whole log";
  auto cfg = preset_config("nemotron-h-8b");
  ASSERT_TRUE(cfg.ok());
  SweepOptions opt;
  Config r = cuda[0], s = cuda[2];
  r.batch = s.batch = 8;
  // Replay keeps each log entry's pre-conv row and the checkpoint window:
  // (W + 3) rows of 10,240 bf16 channels per Mamba2 layer and sequence, on
  // top of what the layout holds anyway.
  Config ar = r;
  ar.workload = Workload::kAr;
  EXPECT_GE(estimate_device_run_bytes(*cfg, r, opt) - estimate_device_run_bytes(*cfg, ar, opt),
            int64_t{8} * 24 * 19 * 10240 * 2);
}

TEST(BenchDevice, DeviceEstimateCountsBf16WeightsAndGrowsWithTheBatch) {
  auto c = preset_config("nemotron-h-8b");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(device_weight_bytes(*c), 2 * parameter_count(*c));
  SweepOptions opt;
  opt.prompt_tokens = 32;
  opt.new_tokens = 32;
  Config k;
  k.workload = Workload::kAr;
  k.strategy = Strategy::kSnapshot;
  k.window = 16;
  k.batch = 1;
  const int64_t one = estimate_device_run_bytes(*c, k, opt);
  k.batch = 64;
  const int64_t many = estimate_device_run_bytes(*c, k, opt);
  k.strategy = Strategy::kReplay;
  const int64_t replay = estimate_device_run_bytes(*c, k, opt);
  // At least the fp32 SSM states the decoder holds per sequence.
  const int64_t states = 24 * 128 * 64 * 128 * 4;
  EXPECT_GE(one, states);
  EXPECT_GE(many - one, 63 * states);
  EXPECT_GT(replay, many) << "replay adds its logs";
  // bf16 weights + batch 256 of the 8B fits an H200 (141 GB); its fp32 copy
  // (the CPU path's) alone would take 32 GB.
  k.batch = 256;
  EXPECT_LT(device_weight_bytes(*c) + estimate_device_run_bytes(*c, k, opt), int64_t{100} << 30);
}

// A device backend's runner: runs above `fits` fail out of budget, as
// Decoder::create does when the device cannot hold the batch.
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
    m.device_strategy = "standard";
    m.device_bytes = 5000 + 1100 * c.batch + 77;
    if (c.strategy == Strategy::kReplay) m.device_strategy = "replay", m.folds = 3, m.reads_shared = 7 * c.batch;
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

TEST(BenchDevice, ASweepOnARunnerReportsItsDeviceBytesAndLayout) {
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
  EXPECT_EQ(j["device_strategy"], "standard");
  EXPECT_TRUE(j["folds"].is_null());
  EXPECT_TRUE(j["checkpoint_reads_shared"].is_null());
  EXPECT_EQ(j["peak_device_bytes"], 5000 + 1100 * 2 + 77) << "the device's own count, not weights + store";
  EXPECT_EQ(j["peak_state_bytes"], 2000);
  // The search brackets the answer to a quarter of it: 12 fits, 13 does not.
  const int64_t conc = j["max_concurrency"].get<int64_t>();
  EXPECT_LE(conc, 12);
  EXPECT_GE(conc, 9);
  EXPECT_EQ(j["max_concurrency_limited_by"], "device memory");
  EXPECT_NE(format_table(*res).find(std::to_string(conc) + "D"), std::string::npos);
  // The CPU reference's objects carry no device fields.
  ConfigResult cpu;
  EXPECT_FALSE(config_json(cpu).contains("device_strategy"));
}

// A replay run's device counters: its folds and the checkpoint reads its
// fork groups saved, per configuration; null under the standard layout.
TEST(BenchDevice, AReplaySweepReportsItsFoldsAndSharedCheckpointReads) {
  SweepOptions opt;
  opt.runs = 1;
  opt.warmup = 0;
  opt.concurrency = false;
  FakeDeviceRunner runner(opt, 12);
  SweepCost cost;
  auto res = sweep_on(runner, Workload::kBeam, {Strategy::kReplay, Strategy::kSnapshot}, {4}, &cost);
  ASSERT_TRUE(res.ok()) << res.status().message();
  ASSERT_EQ(res->size(), 2u);
  const nlohmann::json rep = config_json((*res)[0]), std = config_json((*res)[1]);
  EXPECT_EQ(rep["device_strategy"], "replay");
  EXPECT_EQ(rep["folds"], 3);
  EXPECT_EQ(rep["checkpoint_reads_shared"], 28);
  EXPECT_EQ(std["device_strategy"], "standard");
  EXPECT_TRUE(std["folds"].is_null());
  EXPECT_TRUE(std["checkpoint_reads_shared"].is_null());
}

}  // namespace
}  // namespace replayssm
