// `replayssm bench --device cuda` on the GPU, through the library the CLI
// calls: the tiny preset's ar workload under replay and snapshot at
// batches 1 and 2 (one warm-up, one run), every JSON field present and
// positive, the strategies mapped onto the decoder's layouts, folds every
// W steps, the device-memory estimate an upper bound of what the decoder
// held, and the max_concurrency search run to its limit; the spec workload
// with oracle drafts of accuracy 1 and 0 on the embedded trained model
// (every draft, then none, accepted); beam, best-of-n, tree and restore on
// the tiny preset.
// Skips without a GPU.
#include <gtest/gtest.h>

#include "bench/memory.h"
#include "bench/presets.h"
#include "bench/report.h"
#include "bench/sweep.h"
#include "cuda_test_util.h"
#include "bench/decoder_runner.h"

namespace replayssm {
namespace {

using namespace replayssm::bench;

TEST(BenchDecodeCuda, StrategiesMapOntoTheDecoderLayouts) {
  EXPECT_EQ(*cuda::device_strategy(Strategy::kSnapshot), cuda::DecodeStrategy::kStandard);
  EXPECT_EQ(*cuda::device_strategy(Strategy::kReplay), cuda::DecodeStrategy::kReplay);
  EXPECT_EQ(*cuda::device_strategy(Strategy::kRecompute), cuda::DecodeStrategy::kRecompute);
}

TEST(BenchDecodeCuda, TinyArSweepReportsEveryField) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto cfg = preset_config("tiny");
  ASSERT_TRUE(cfg.ok());
  auto model = Model::random_without_matrices(*cfg, kPresetSeed);
  ASSERT_TRUE(model.ok()) << model.status().message();
  SweepOptions opt;
  opt.prompt_tokens = 32;
  opt.new_tokens = 32;
  opt.runs = 1;
  opt.warmup = 1;
  opt.concurrency = true;
  opt.latency_target = 1.0;  // seconds: the tiny model never reaches it
  opt.concurrency_limit = 8;
  auto info = cuda::device_info();
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_GT(info->free_bytes, 0);
  auto runner = cuda::BenchDecodeRunner::create(**model, opt, kPresetSeed);
  ASSERT_TRUE(runner.ok()) << runner.status().message();
  const int64_t weights = (*runner)->weights_bytes();
  EXPECT_GT(weights, device_weight_bytes(*cfg) * 9 / 10);
  Axes a;
  a.workloads = {Workload::kAr};
  a.strategies = {Strategy::kReplay, Strategy::kSnapshot};
  a.batches = {1, 2};
  a.windows = {16};
  const std::vector<Config> configs = enumerate_configs(a, DraftKind::kOracle);
  Progress progress(false);
  SweepCost cost;
  auto res = run_sweep(**runner, weights, configs, progress, &cost);
  ASSERT_TRUE(res.ok()) << res.status().message();
  ASSERT_EQ(res->size(), 4u);
  EXPECT_EQ(cost.runs, 8);
  for (const ConfigResult& r : *res) {
    const nlohmann::json j = config_json(r);
    const std::string what = r.config.describe();
    const bool replay = r.config.strategy == Strategy::kReplay;
    EXPECT_EQ(j["workload"], "ar") << what;
    EXPECT_EQ(j["device_strategy"], replay ? "replay" : "standard") << what;
    for (const char* k : {"time_per_output_token", "tokens_per_s"})
      for (const char* s : {"median", "min", "max"}) EXPECT_GT(j[k][s].get<double>(), 0.0) << what << " " << k;
    // One run: tokens/s × time per token is exactly the batch.
    EXPECT_NEAR(j["tokens_per_s"]["median"].get<double>() * j["time_per_output_token"]["median"].get<double>(),
                static_cast<double>(r.config.batch), 1e-6 * static_cast<double>(r.config.batch))
        << what;
    for (const char* k : {"peak_state_bytes", "peak_kv_bytes", "peak_device_bytes", "state_writes_bytes"})
      EXPECT_GT(j[k].get<int64_t>(), 0) << what << " " << k;
    EXPECT_GT(r.peak_device_bytes, weights + r.peak_state_bytes + r.peak_kv_bytes) << what << ": + workspace";
    EXPECT_LE(r.peak_device_bytes - weights, estimate_device_run_bytes(*cfg, r.config, opt))
        << what << ": the pre-check's estimate is an upper bound";
    EXPECT_EQ(j["max_concurrency"], 8) << what;
    EXPECT_EQ(j["max_concurrency_limited_by"], "limit") << what;
    // 32 + 32 − 1 steps, a fold every 16th.
    if (replay) EXPECT_EQ(j["folds"], 3) << what;
    else EXPECT_TRUE(j["folds"].is_null()) << what;
    // No forks, no fork groups: nothing shared.
    if (replay) EXPECT_EQ(j["checkpoint_reads_shared"], 0) << what;
    else EXPECT_TRUE(j["checkpoint_reads_shared"].is_null()) << what;
  }
  // Batch 2 holds twice batch 1's state; replay writes its checkpoints on
  // folds only, the standard layout every step.
  EXPECT_GT((*res)[1].peak_state_bytes, (*res)[0].peak_state_bytes);
  EXPECT_LT((*res)[0].state_writes_bytes, (*res)[2].state_writes_bytes);
}

// Every configuration of `a` in one sweep on a fresh runner over `model`
// (oracle drafts); empty, with the failure recorded, when it does not run.
struct SweepRun {
  std::vector<ConfigResult> results;
  int64_t weights = 0;
};
// A short sweep's options (one warm-up) and axes (W = 16).
SweepOptions short_run(int64_t prompt_tokens, int64_t new_tokens, int runs = 1) {
  SweepOptions opt;
  opt.prompt_tokens = prompt_tokens, opt.new_tokens = new_tokens, opt.runs = runs, opt.warmup = 1;
  return opt;
}
Axes axes(std::vector<Workload> workloads, std::vector<Strategy> strategies, int64_t batch) {
  Axes a;
  a.workloads = std::move(workloads), a.strategies = std::move(strategies), a.batches = {batch}, a.windows = {16};
  return a;
}

SweepRun sweep(const Model& model, const SweepOptions& opt, const Axes& a, bool whole_log = true) {
  SweepRun out;
  auto runner = cuda::BenchDecodeRunner::create(model, opt, kPresetSeed);
  EXPECT_TRUE(runner.ok()) << runner.status().message();
  if (!runner.ok()) return out;
  out.weights = (*runner)->weights_bytes();
  Progress progress(false);
  SweepCost cost;
  auto res = run_sweep(**runner, out.weights, enumerate_configs(a, DraftKind::kOracle, whole_log), progress, &cost);
  EXPECT_TRUE(res.ok()) << res.status().message();
  if (res.ok()) out.results = std::move(res).value();
  return out;
}

// What every configuration of a sweep must show: it ran, held state, and
// fit the device pre-check's estimate.
void expect_ran(const ConfigResult& r, const SweepRun& run, const ModelConfig& cfg, const SweepOptions& opt) {
  const std::string what = r.config.describe();
  EXPECT_GT(r.tokens_per_s.median, 0.0) << what;
  EXPECT_GT(r.peak_state_bytes, 0) << what;
  EXPECT_LE(r.peak_device_bytes - run.weights, estimate_device_run_bytes(cfg, r.config, opt)) << what;
}

std::unique_ptr<Model> tiny_model() {
  auto cfg = preset_config("tiny");
  EXPECT_TRUE(cfg.ok());
  auto model = Model::random_without_matrices(*cfg, kPresetSeed);
  EXPECT_TRUE(model.ok()) << model.status().message();
  return model.ok() ? std::move(model).value() : nullptr;
}

// On the embedded trained model: a random-weight preset's top-2 logits are
// close enough that a verify's chunked rows and the reference's single
// steps pick different tokens now and then, which oracle drafts of
// accuracy 1 would count as rejections.
TEST(BenchDecodeCuda, SpecSweepAcceptsOracleDrafts) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto model = Model::load(test::fixture("models/nemotron_h_small"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  const ModelConfig* cfg = &(*model)->config();
  const SweepOptions opt = short_run(24, 40);
  Axes a = axes({Workload::kSpec}, {Strategy::kReplay, Strategy::kSnapshot}, 2);
  a.spec_ts = {4};
  a.accuracies = {1.0, 0.0};
  const SweepRun run = sweep(**model, opt, a);
  const std::vector<ConfigResult>* res = &run.results;
  ASSERT_EQ(res->size(), 4u);
  for (const ConfigResult& r : *res) {
    const std::string what = r.config.describe();
    ASSERT_TRUE(r.acceptance_rate.has_value()) << what;
    // Accuracy 1 drafts the target's own greedy continuation: only a near
    // tie between a verify's chunked rows and the reference's single steps
    // can reject one. Accuracy 0 drafts a wrong token every time.
    if (r.config.draft_accuracy == 1.0) EXPECT_GT(*r.acceptance_rate, 0.9) << what;
    else EXPECT_EQ(*r.acceptance_rate, 0.0) << what;
    EXPECT_GT(r.tokens_per_s.median, 0.0) << what;
    EXPECT_LE(r.peak_device_bytes - run.weights, estimate_device_run_bytes(*cfg, r.config, opt)) << what;
    EXPECT_GT(r.state_writes_bytes, 0) << what;
    std::printf("  %s: acceptance %.3f, %.0f tokens/s, state %lld bytes\n", what.c_str(), *r.acceptance_rate,
                r.tokens_per_s.median, (long long)r.peak_state_bytes);
  }
  // With every draft accepted a verify emits 5 tokens: far fewer steps, and
  // the standard layout holds T + 1 states per sequence.
  EXPECT_GT((*res)[0].tokens_per_s.median, 2.0 * (*res)[1].tokens_per_s.median);
  EXPECT_GT((*res)[2].peak_state_bytes, (*res)[0].peak_state_bytes);
  EXPECT_GT((*res)[2].state_writes_bytes, 2 * (*res)[0].state_writes_bytes) << "a state per verified token";
}

// beam and best-of-n on the tiny preset: every field, and what forks cost
// the layouts — the standard layout writes a state per step and a full
// copy per fork, replay writes log entries and a checkpoint per W steps.
TEST(BenchDecodeCuda, TinyBeamAndBestOfNSweep) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::unique_ptr<Model> model = tiny_model();
  ASSERT_NE(model, nullptr);
  const SweepOptions opt = short_run(16, 48);
  Axes a = axes({Workload::kBeam, Workload::kBestOfN}, {Strategy::kReplay, Strategy::kSnapshot}, 4);
  const SweepRun run = sweep(*model, opt, a);
  const std::vector<ConfigResult>* res = &run.results;
  ASSERT_EQ(res->size(), 4u);
  for (const ConfigResult& r : *res) {
    const std::string what = r.config.describe();
    expect_ran(r, run, model->config(), opt);
    EXPECT_GT(r.state_writes_bytes, 0) << what;
    std::printf("  %s: %.0f tokens/s, state peak %lld bytes, state written %lld bytes\n", what.c_str(),
                r.tokens_per_s.median, (long long)r.peak_state_bytes, (long long)r.state_writes_bytes);
  }
  // Order: beam replay, beam snapshot, best-of-n replay, best-of-n snapshot.
  EXPECT_LT((*res)[0].state_writes_bytes, (*res)[1].state_writes_bytes);
  EXPECT_LT((*res)[2].state_writes_bytes, (*res)[3].state_writes_bytes);
  EXPECT_TRUE((*res)[0].reads_shared.has_value() && (*res)[2].reads_shared.has_value());
  EXPECT_FALSE((*res)[1].reads_shared.has_value() || (*res)[3].reads_shared.has_value());
  // Fork groups forced on (any two sequences reading one checkpoint): the
  // beams' steps between folds read each shared checkpoint once.
  SweepOptions forced = opt;
  forced.fork_groups = 1;
  const SweepRun grouped = sweep(*model, forced, axes({Workload::kBeam}, {Strategy::kReplay}, 4));
  ASSERT_EQ(grouped.results.size(), 1u);
  ASSERT_TRUE(grouped.results[0].reads_shared.has_value());
  EXPECT_GT(*grouped.results[0].reads_shared, 0);
}

// tree on the tiny preset: TreeSearchCuda over 4 × batch slots walks the
// same best-first search as the CPU, every expansion adding a node.
TEST(BenchDecodeCuda, TinyTreeSweep) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::unique_ptr<Model> model = tiny_model();
  ASSERT_NE(model, nullptr);
  const SweepOptions opt = short_run(16, 24);
  Axes a = axes({Workload::kTree}, {Strategy::kReplay, Strategy::kSnapshot}, 2);
  const SweepRun run = sweep(*model, opt, a);
  const std::vector<ConfigResult>* res = &run.results;
  ASSERT_EQ(res->size(), 2u);
  for (const ConfigResult& r : *res) {
    const std::string what = r.config.describe();
    expect_ran(r, run, model->config(), opt);
    std::printf("  %s: %.0f nodes/s, state peak %lld bytes, written %lld, re-prefills %lld\n", what.c_str(),
                r.tokens_per_s.median, (long long)r.peak_state_bytes, (long long)r.state_writes_bytes,
                (long long)r.restores_reprefill);
  }
}

// restore on the tiny preset: every position restored and stepped for
// the whole batch. Replay rewinds within its log where the position is at
// or after the checkpoint (distance < W from it) and re-prefills before
// it; recompute re-prefills from its sparse checkpoint where it can (a
// distance under W), from position 0 before it; snapshot from position 0
// every time.
TEST(BenchDecodeCuda, TinyRestoreSweepTakesBothPaths) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::unique_ptr<Model> model = tiny_model();
  ASSERT_NE(model, nullptr);
  const SweepOptions opt = short_run(16, 30, 2);
  Axes a = axes({Workload::kRestore}, {Strategy::kReplay, Strategy::kSnapshot, Strategy::kRecompute}, 2);
  const SweepRun run = sweep(*model, opt, a, /*whole_log=*/false);  // cuda keeps the log since the checkpoint
  ASSERT_EQ(run.results.size(), 3u);
  const int64_t L = opt.prompt_tokens + opt.new_tokens;
  for (const ConfigResult& r : run.results) {
    const std::string what = r.config.describe();
    const bool replay = r.config.strategy == Strategy::kReplay, recompute = r.config.strategy == Strategy::kRecompute;
    ASSERT_GE(r.restore_latency.size(), bench::restore_positions(L).size()) << what;
    int64_t log = 0, reprefill = 0, near = 0;
    for (const RestorePoint& p : r.restore_latency) {
      EXPECT_GT(p.seconds.median, 0.0) << what;
      EXPECT_LT(p.position, L) << what;
      if (p.path == RestorePath::kReprefill) {
        if (recompute && p.distance < p.position) {  // from the sparse checkpoint
          EXPECT_LT(p.distance, r.config.window) << what;
          ++near;
        } else {
          EXPECT_EQ(p.distance, p.position) << what << ": a re-prefill from position 0";
        }
        ++reprefill;
      } else {
        EXPECT_TRUE(replay || (recompute && p.path == RestorePath::kCheckpoint)) << what;
        EXPECT_LT(p.distance, r.config.window) << what << ": within the log since the checkpoint";
        log += p.path == RestorePath::kLogReplay;
      }
      std::printf("  %s: p=%lld distance %lld %s %.3f ms\n", what.c_str(), (long long)p.position,
                  (long long)p.distance, restore_path_name(p.path), 1e3 * p.seconds.median);
    }
    EXPECT_GT(reprefill, 0) << what;
    if (replay) EXPECT_GE(log, 2) << what;
    if (recompute) EXPECT_GE(near, 2) << what;
    EXPECT_EQ(r.restores_reprefill, 2 * reprefill) << what << ": the whole batch, each time";
    EXPECT_LE(r.peak_device_bytes - run.weights, estimate_device_run_bytes(model->config(), r.config, opt)) << what;
  }
  EXPECT_GT(run.results[0].peak_state_bytes, 0);
}

}  // namespace
}  // namespace replayssm
