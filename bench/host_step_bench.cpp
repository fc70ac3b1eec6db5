// The host's share of a decode step, without a GPU: the workloads'
// generate_batch over the state manager's plans on a backend that only
// builds the CUDA backend's schedule for each plan (step_schedule.h) and
// reads back zeros — everything the CUDA backend's host does before and
// between its launches, timed. On the device the GPU idles for that time
// unless the next step's launches are already queued, so it bounds the
// end-to-end decode rate: at batch 256 on Nemotron-H-8B shapes a device
// step of ~20 ms plus a host step of ~3 ms is 13% of the wall time.
//
//   replayssm_host_step_bench [--preset NAME] [--batch 1,8,64,256] [--prompt 128]
//                             [--new 128] [--strategy snapshot,replay] [--runs 3]
//
// Per (batch, strategy): a warm-up run, then the median over --runs of the
// decode steps' ms per step, split into the manager and workload (plans,
// commits, the loop) and the schedule.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/slot_storage.h"
#include "backend/cuda/state_options_rule.h"
#include "backend/cuda/step_schedule.h"
#include "bench/presets.h"
#include "list_arg.h"
#include "replayssm/backend.h"
#include "replayssm/model.h"
#include "workloads/generate.h"

using namespace replayssm;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The CUDA backend's host side alone: a plan's schedule is built and
// dropped; every read is token 0 (greedy decoding never stops early: the
// bench decodes with stop_at_eos off).
class ScheduleOnlyBackend final : public Backend {
 public:
  explicit ScheduleOnlyBackend(const ModelConfig& c) : config_(c), spec_(replayssm::cache_spec(c)) {
    for (BlockKind k : c.blocks) mamba_ |= k == BlockKind::kMamba2, gdn_ |= k == BlockKind::kGatedDeltaNet;
  }
  const char* name() const override { return "schedule-only"; }
  const ModelConfig& config() const override { return config_; }
  const CacheSpec& cache_spec() const override { return spec_; }
  StateUnits units(const StateOptions&) const override { return cuda::SlotStorage::units(spec_); }
  Status check_options(const StateOptions& opt) const override {
    RSSM_RETURN_IF_ERROR(opt.validate());
    return cuda::check_cuda_state_options(opt);
  }
  int64_t max_step_rows() const override { return 2048; }
  Status execute(const StepPlan& plan, std::span<const int64_t> logit_rows) override {
    const double t0 = now_s();
    cuda::ScheduleSlots slots;  // past any slot a plan of this size names
    slots.log_scratch = 1 << 24, slots.zero = 1 << 24, slots.ckpt_scratch = (1 << 24) + 1;
    auto s = cuda::build_schedule(plan, logit_rows, mamba_, gdn_, cuda::ScheduleLimits{}, slots);
    schedule_s += now_s() - t0;
    return s.ok() ? Status{} : s.status();
  }
  Status apply(std::span<const StorageOp>) override { return {}; }
  Status logits(std::span<const int64_t> rows, float* out) override {
    std::fill_n(out, rows.size() * size_t(config_.vocab_size), 0.0f);
    return {};
  }
  Status argmax(std::span<const int64_t> rows, int32_t* out) override {
    std::fill_n(out, rows.size(), 0);
    return {};
  }
  Status top_logprobs(std::span<const int64_t>, int64_t, TokenLogprob*) override {
    return unsupported("schedule-only backend: no logits");
  }
  Status sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp) override {
    for (size_t i = 0; i < requests.size(); ++i) ids[i] = 0, lp != nullptr ? void(lp[i] = 0.0) : void();
    return {};
  }
  Status logprobs_of(std::span<const int64_t> rows, std::span<const int32_t>, double* out) override {
    std::fill_n(out, rows.size(), 0.0);
    return {};
  }
  Status read_state(const StateRead&, int, std::vector<float>*, std::vector<float>*) override {
    return unsupported("schedule-only backend: no states");
  }
  BackendMemory memory() const override { return {}; }

  double schedule_s = 0.0;

 protected:
  Status reset_storage(const StateOptions&) override { return {}; }

 private:
  ModelConfig config_;
  CacheSpec spec_;
  bool mamba_ = false, gdn_ = false;
};

int usage() {
  std::fprintf(stderr,
               "usage: replayssm_host_step_bench [--preset NAME] [--batch 1,8,64,256] [--prompt 128] [--new 128]\n"
               "                                 [--strategy snapshot,replay] [--runs 3]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "nemotron-h-8b";
  std::vector<std::string> batch_list = {"1", "8", "64", "256"}, strategies = {"snapshot", "replay"};
  int64_t prompt = 128, n_new = 128, runs = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    try {
      if (a == "--preset") preset = v;
      else if (a == "--batch") batch_list = bench::split_list(v);
      else if (a == "--prompt") prompt = std::stoll(v);
      else if (a == "--new") n_new = std::stoll(v);
      else if (a == "--strategy") strategies = bench::split_list(v);
      else if (a == "--runs") runs = std::stoll(v);
      else return usage();
    } catch (const std::exception&) {
      std::fprintf(stderr, "%s: '%s' is not a number\n", a.c_str(), v.c_str());
      return usage();
    }
  }
  if (prompt < 1 || n_new < 2 || runs < 1) return usage();
  auto cfg = bench::preset_config(preset);
  if (!cfg.ok()) {
    std::fprintf(stderr, "error: %s\n", cfg.status().message().c_str());
    return 1;
  }
  std::printf("host side of a step at %s shapes (no GPU: the CUDA backend's schedule built, nothing run)\n",
              preset.c_str());
  std::printf("prompt %lld, %lld new tokens, median of %lld runs after a warm-up\n\n", (long long)prompt,
              (long long)n_new, (long long)runs);
  std::printf("%6s %-9s %12s %12s %12s\n", "batch", "strategy", "ms/step", "manager", "schedule");
  for (const std::string& bs : batch_list) {
    int64_t B = 0;
    try {
      B = std::stoll(bs);
    } catch (const std::exception&) {
      return usage();
    }
    if (B < 1) return usage();
    std::mt19937 rng(42);
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(B), std::vector<int32_t>(static_cast<size_t>(prompt)));
    for (auto& p : prompts)
      for (int32_t& t : p) t = int32_t(rng() % uint32_t(cfg->vocab_size));
    for (const std::string& sn : strategies) {
      auto strat = parse_strategy(sn);
      if (!strat.ok()) {
        std::fprintf(stderr, "error: %s\n", strat.status().message().c_str());
        return 1;
      }
      std::vector<std::pair<double, double>> per;  // (ms/step, schedule ms/step)
      for (int64_t r = 0; r < runs + 1; ++r) {
        ScheduleOnlyBackend be(*cfg);
        GenerateOptions o;
        o.max_new_tokens = n_new, o.stop_at_eos = false;
        o.state.strategy = *strat;
        bool decoding = false;
        auto res = generate_batch(be, prompts, o, [&](int64_t, int32_t) {
          if (!decoding) be.schedule_s = 0.0, decoding = true;
        });
        if (!res.ok()) {
          std::fprintf(stderr, "error: %s\n", res.status().message().c_str());
          return 1;
        }
        const double steps = double(n_new - 1);
        if (r > 0) per.push_back({1e3 * res->decode_s / steps, 1e3 * be.schedule_s / steps});
      }
      std::sort(per.begin(), per.end());
      const auto [ms, sched] = per[per.size() / 2];
      std::printf("%6lld %-9s %12.3f %12.3f %12.3f\n", (long long)B, sn.c_str(), ms, ms - sched, sched);
      std::fflush(stdout);
    }
  }
  return 0;
}
