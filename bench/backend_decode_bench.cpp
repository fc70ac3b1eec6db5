// End-to-end decode on the CUDA backend: the workloads' generate_batch over
// the state manager's plans, as `replayssm generate` and the server run it.
// A preset model with random bf16 weights (or a checkpoint), a batch of
// random prompts, then new greedy tokens — the decode steps' tokens/s and
// the prefill's prompt tokens/s under each --strategy, measured side by
// side in one process.
//
//   replayssm_backend_bench [--preset NAME | --model DIR] [--batch 1,8,64,256]
//                           [--prompt 128] [--new 128] [--strategy snapshot,replay]
//                           [--window 16] [--page-size 16] [--runs 3] [--json FILE]
//
// Per (batch, strategy): one discarded warm-up run, then --runs runs of
// generate_batch (every prompt its own sequence; prefill in steps of the
// backend's rows, then one batched step per new token). Reported: the
// median decode tokens/s (the new tokens after the first, which the
// prefill's last step gives) with min–max, ms per step, the bytes a step
// must move (weights + SSM states: a snapshot step reads and writes each
// state; a replay step reads a checkpoint and its mean log; KV and
// activations are small here and left out) and the achieved GB/s, the
// state bytes held, the prefill's prompt tokens/s, and each strategy's
// ratio to the first one's. Then where a decode step's time went (the
// backend's step_times over the last run's decode steps): the host's
// preparation of the plan's schedule, its launches, its wait, the device's
// own span (events), the reads of the kept rows, and the rest of the
// wall time (the workload and the state manager on the host, between
// steps); the device idles for all but its span.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "bench/presets.h"
#include "list_arg.h"
#include "replayssm/model.h"
#include "workloads/generate.h"

using namespace replayssm;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: replayssm_backend_bench [--preset NAME | --model DIR] [--batch 1,8,64,256] [--prompt 128]\n"
               "                               [--new 128] [--strategy snapshot,replay] [--window 16] [--page-size 16]\n"
               "                               [--runs 3] [--json FILE]\n");
  return 2;
}

// Bytes a decode step must move at batch B (see the header).
double step_bytes(const ModelConfig& c, int64_t weight_bytes, int64_t B, Strategy s, int64_t W) {
  double per_seq = 0.0;
  for (BlockKind k : c.blocks) {
    double state = 0.0, log = 0.0;
    if (k == BlockKind::kMamba2) {
      const double HP = double(c.mamba.n_heads * c.mamba.head_dim), GN = double(c.mamba.n_groups * c.mamba.state_size);
      state = HP * double(c.mamba.state_size) * 4.0;
      log = (HP * 2 + GN * 2 + double(c.mamba.n_heads) * 4) * double(W + 1) / 2.0;
    } else if (k == BlockKind::kGatedDeltaNet) {
      const double K = double(c.gdn.n_k_heads * c.gdn.k_dim), V = double(c.gdn.n_v_heads * c.gdn.v_dim);
      state = double(c.gdn.n_v_heads * c.gdn.k_dim * c.gdn.v_dim) * 4.0;
      log = (K * 2 + V * 4 + double(c.gdn.n_v_heads) * 4) * double(W + 1) / 2.0;
    } else {
      continue;
    }
    per_seq += s == Strategy::kReplay ? state + log : 2.0 * state;
  }
  return double(weight_bytes) + double(B) * per_seq;
}

int fail(const Status& st) {
  std::fprintf(stderr, "error: %s\n", st.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "nemotron-h-8b", model_dir, json_path;
  std::vector<std::string> batch_list = {"1", "8", "64", "256"}, strategies = {"snapshot", "replay"};
  int64_t prompt = 128, n_new = 128, runs = 3, window = 16, page = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(usage());
      }
      return argv[++i];
    };
    try {
      if (a == "--preset") preset = val();
      else if (a == "--model") model_dir = val();
      else if (a == "--batch") batch_list = bench::split_list(val());
      else if (a == "--prompt") prompt = std::stoll(val());
      else if (a == "--new") n_new = std::stoll(val());
      else if (a == "--strategy") strategies = bench::split_list(val());
      else if (a == "--window") window = std::stoll(val());
      else if (a == "--page-size") page = std::stoll(val());
      else if (a == "--runs") runs = std::stoll(val());
      else if (a == "--json") json_path = val();
      else return usage();
    } catch (const std::exception&) {
      std::fprintf(stderr, "%s: not a number\n", a.c_str());
      return usage();
    }
  }
  std::vector<int64_t> batches;
  for (const std::string& b : batch_list) {
    try {
      batches.push_back(std::stoll(b));
    } catch (const std::exception&) {
      return usage();
    }
    if (batches.back() < 1) return usage();
  }
  if (prompt < 1 || n_new < 2 || runs < 1 || batches.empty() || strategies.empty()) return usage();
  std::vector<Strategy> strats;
  for (const std::string& s : strategies) {
    auto st = parse_strategy(s);
    if (!st.ok()) return fail(st.status());
    strats.push_back(*st);
  }

  std::unique_ptr<Model> model;
  if (!model_dir.empty()) {
    auto m = Model::load(model_dir);
    if (!m.ok()) return fail(m.status());
    model = std::move(m).value();
  } else {
    auto c = bench::preset_config(preset);
    if (!c.ok()) return fail(c.status());
    auto m = Model::random_without_matrices(*c, 1);
    if (!m.ok()) return fail(m.status());
    model = std::move(m).value();
  }
  const ModelConfig& cfg = model->config();
  cuda::CudaBackendOptions bo;
  bo.seed = 1;
  auto backend = cuda::CudaBackend::create(*model, bo);
  if (!backend.ok()) return fail(backend.status());
  Backend& be = **backend;
  const int64_t weights = be.memory().weights_bytes;
  std::printf("model %s on the cuda backend: %.2f GB of device weights\n",
              model_dir.empty() ? preset.c_str() : model_dir.c_str(), double(weights) / 1e9);
  std::printf("prompt %lld, %lld new tokens, window %lld, pages of %lld, median of %lld runs after a warm-up\n\n",
              (long long)prompt, (long long)n_new, (long long)window, (long long)page, (long long)runs);
  std::printf("%6s %-9s %12s %19s %9s %9s %9s %11s %14s\n", "batch", "strategy", "tok/s", "min-max", "ms/step",
              "GB/step", "GB/s", "state GB", "prefill tok/s");

  std::string json = "[", breakdown;
  for (int64_t B : batches) {
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> id(0, int32_t(cfg.vocab_size - 1));
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(B), std::vector<int32_t>(static_cast<size_t>(prompt)));
    for (auto& p : prompts)
      for (int32_t& t : p) t = id(rng);
    double first_tps = 0.0;
    for (Strategy s : strats) {
      GenerateOptions o;
      o.max_new_tokens = n_new, o.stop_at_eos = false;
      o.state.strategy = s, o.state.window = window, o.state.page_size = page;
      std::vector<double> tps, ptps;
      int64_t state_bytes = 0;
      Status st;
      cuda::StepTimes times;
      double last_decode_s = 0.0;
      for (int64_t r = 0; r < runs + 1 && st.ok(); ++r) {
        bool decoding = false;  // the first token seen ends the prefill
        auto res = generate_batch(be, prompts, o, [&](int64_t, int32_t) {
          if (!decoding) (*backend)->reset_step_times(), decoding = true;
        });
        if (!res.ok()) {
          st = res.status();
          break;
        }
        if (r == 0) continue;
        times = (*backend)->step_times(), last_decode_s = res->decode_s;
        tps.push_back(double(B * (n_new - 1)) / res->decode_s);
        ptps.push_back(double(B * prompt) / res->prefill_s);
        state_bytes = res->memory.state_bytes;
      }
      if (!st.ok()) {
        std::printf("%6lld %-9s  skipped: %s\n", (long long)B, strategy_name(s), st.message().c_str());
        continue;
      }
      std::sort(tps.begin(), tps.end());
      std::sort(ptps.begin(), ptps.end());
      const double med = tps[tps.size() / 2], pmed = ptps[ptps.size() / 2], ms = 1e3 * double(B) / med;
      const double bytes = step_bytes(cfg, weights, B, s, window);
      if (first_tps == 0.0) first_tps = med;
      char ratio[32] = "";
      if (s != strats.front()) std::snprintf(ratio, sizeof ratio, "  %.2fx", med / first_tps);
      std::printf("%6lld %-9s %12.1f %9.1f-%-9.1f %9.3f %9.2f %9.0f %11.2f %14.0f%s\n", (long long)B, strategy_name(s),
                  med, tps.front(), tps.back(), ms, bytes / 1e9, bytes / (ms * 1e-3) / 1e9, double(state_bytes) / 1e9,
                  pmed, ratio);
      std::fflush(stdout);
      if (times.steps > 0) {
        const double n = double(times.steps), k = 1e3 / n;
        const double other = last_decode_s - times.prepare_s - times.launch_s - times.wait_s - times.read_s;
        char line[256];
        std::snprintf(line, sizeof line, "%6lld %-9s %6lld %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", (long long)B,
                      strategy_name(s), (long long)times.steps, k * last_decode_s, k * times.prepare_s,
                      k * times.launch_s, k * times.wait_s, k * times.gpu_s, k * times.read_s, k * other);
        breakdown += line;
      }
      char obj[512];
      std::snprintf(obj, sizeof obj,
                    "%s{\"batch\": %lld, \"strategy\": \"%s\", \"tokens_per_s\": %.2f, \"tokens_per_s_min\": %.2f, "
                    "\"tokens_per_s_max\": %.2f, \"ms_per_step\": %.4f, \"bytes_per_step\": %.0f, \"state_bytes\": %lld, "
                    "\"prefill_tokens_per_s\": %.2f}",
                    json.size() > 1 ? ", " : "", (long long)B, strategy_name(s), med, tps.front(), tps.back(), ms, bytes,
                    (long long)state_bytes, pmed);
      json += obj;
    }
  }
  if (!breakdown.empty())
    std::printf("\na decode step in ms (the last run): wall; host prepare, launch, wait; device span; reads; rest\n"
                "%6s %-9s %6s %9s %9s %9s %9s %9s %9s %9s\n%s",
                "batch", "strategy", "steps", "wall", "prepare", "launch", "wait", "device", "reads", "rest",
                breakdown.c_str());
  json += "]\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}
