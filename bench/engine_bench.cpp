// Continuous batching on the GPU against static batching, end to end: a
// preset model with random bf16 weights, N requests of random prompt and
// output lengths, served by cuda::EngineCuda over S slots (requests join
// as others leave; prompt chunks ride beside decoding in ragged steps) and by static waves
// of S through generate_batch_cuda (each wave runs until its longest
// request is done). Tokens/s counts each request's own new tokens.
//
//   replayssm_engine_bench [--preset NAME] [--requests 32] [--slots 16]
//                          [--prompt 128] [--new 64] [--window 16] [--runs 3]
//
// Prompts are uniform in [prompt/2, prompt], outputs in [new/2, new] (the
// same requests for every strategy and mode). Greedy, no EOS. The engine
// runs once per --chunks value (prompt tokens a request takes per step;
// every step at most --step-tokens rows). Per (strategy, mode): a
// discarded warm-up run, then --runs runs; the median and min–max of
// tokens/s, and for the engine the median run's time to first token
// (every request submitted at its start: the median and the slowest
// request's).
//
//   [--chunks 8,512] [--step-tokens 1024]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/presets.h"
#include "core/clock.h"
#include "replayssm/model.h"
#include "backend/cuda/device_model.h"
#include "runtime/cuda/engine_cuda.h"
#include "runtime/cuda/generate_cuda.h"

using namespace replayssm;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: replayssm_engine_bench [--preset NAME] [--requests 32] [--slots 16] [--prompt 128] [--new 64]\n"
               "                              [--window 16] [--runs 3] [--chunks 8,512] [--step-tokens 1024]\n");
  return 2;
}

struct Work {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> new_tokens;
  int64_t total_new = 0;
};

// One run of the engine over every request: seconds (and the engine's
// stats, each request's time to its first token).
Result<double> serve(const cuda::DeviceModel& dm, const cuda::EngineCudaOptions& o, const Work& w, EngineStats* st,
                     std::vector<double>* first) {
  RSSM_ASSIGN_OR_RETURN(auto eng, cuda::EngineCuda::create(dm, o));
  first->assign(w.prompts.size(), -1.0);
  const double t0 = now_seconds();
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    RequestParams p;
    p.prompt = w.prompts[i], p.max_new_tokens = w.new_tokens[i], p.stop_at_eos = false;
    double* f = &(*first)[i];
    RSSM_RETURN_IF_ERROR(eng->submit(p, [f, t0](const TokenEvent& e) {
                              if (e.token >= 0 && *f < 0.0) *f = now_seconds() - t0;
                            }).status());
  }
  RSSM_RETURN_IF_ERROR(eng->run());
  const double t = now_seconds() - t0;
  *st = eng->stats();
  std::sort(first->begin(), first->end());
  return t;
}

// One run of static waves of `slots` requests (the last padded with
// copies of its first): seconds.
Result<double> waves(const cuda::DeviceModel& dm, cuda::DecodeStrategy s, int window, int64_t slots, int64_t ctx,
                     const Work& w) {
  cuda::DecoderOptions d;
  d.strategy = s, d.batch = slots, d.window = window, d.max_context = ctx;
  RSSM_ASSIGN_OR_RETURN(auto dec, cuda::Decoder::create(dm, d));
  const double t0 = now_seconds();
  for (size_t first = 0; first < w.prompts.size(); first += size_t(slots)) {
    std::vector<std::vector<int32_t>> wave;
    int64_t longest = 0;
    for (size_t i = first; i < std::min(w.prompts.size(), first + size_t(slots)); ++i)
      wave.push_back(w.prompts[i]), longest = std::max(longest, w.new_tokens[i]);
    wave.resize(size_t(slots), wave.front());
    cuda::CudaGenerateOptions g;
    g.strategy = s, g.window = window, g.max_new_tokens = longest, g.stop_at_eos = false;
    RSSM_RETURN_IF_ERROR(cuda::generate_batch_cuda(*dec, wave, g).status());
  }
  return now_seconds() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "nemotron-h-8b";
  int64_t requests = 32, slots = 16, prompt = 128, n_new = 64, runs = 3, step_tokens = 1024;
  int window = 16;
  std::vector<int64_t> chunks = {8, 512};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    if (a == "--preset") preset = v;
    else if (a == "--requests") requests = std::stoll(v);
    else if (a == "--slots") slots = std::stoll(v);
    else if (a == "--prompt") prompt = std::stoll(v);
    else if (a == "--new") n_new = std::stoll(v);
    else if (a == "--window") window = std::stoi(v);
    else if (a == "--runs") runs = std::stoll(v);
    else if (a == "--step-tokens") step_tokens = std::stoll(v);
    else if (a == "--chunks") {
      chunks.clear();
      for (size_t at = 0; at <= v.size();) {
        const size_t end = std::min(v.find(',', at), v.size());
        chunks.push_back(std::stoll(v.substr(at, end - at)));
        at = end + 1;
      }
    }
    else return usage();
  }
  if (requests < 1 || slots < 1 || prompt < 2 || n_new < 2 || runs < 1 || chunks.empty()) return usage();
  auto c = bench::preset_config(preset);
  if (!c.ok()) return std::fprintf(stderr, "error: %s\n", c.status().message().c_str()), 1;
  auto model = Model::random_without_matrices(*c, 1);
  if (!model.ok()) return std::fprintf(stderr, "error: %s\n", model.status().message().c_str()), 1;
  auto dm = cuda::DeviceModel::create(**model, 1);
  if (!dm.ok()) return std::fprintf(stderr, "error: %s\n", dm.status().message().c_str()), 1;
  Work w;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, int32_t(c->vocab_size - 1));
  std::uniform_int_distribution<int64_t> plen(prompt / 2, prompt), nlen(n_new / 2, n_new);
  for (int64_t r = 0; r < requests; ++r) {
    std::vector<int32_t> p(size_t(plen(rng)));
    for (int32_t& t : p) t = id(rng);
    w.prompts.push_back(std::move(p));
    w.new_tokens.push_back(nlen(rng));
    w.total_new += w.new_tokens.back();
  }
  std::printf("%s: %lld requests (prompts %lld-%lld, outputs %lld-%lld tokens, %lld new in all) over %lld slots, "
              "window %d, median of %lld runs after a warm-up\n\n",
              preset.c_str(), (long long)requests, (long long)prompt / 2, (long long)prompt, (long long)n_new / 2,
              (long long)n_new, (long long)w.total_new, (long long)slots, window, (long long)runs);
  std::printf("%-10s %-16s %12s %21s %22s\n", "strategy", "batching", "tok/s", "min-max", "first token ms (worst)");
  for (cuda::DecodeStrategy s :
       {cuda::DecodeStrategy::kStandard, cuda::DecodeStrategy::kReplay, cuda::DecodeStrategy::kRecompute}) {
    double static_med = 0.0;
    std::vector<int64_t> modes = {0};  // 0: static waves; then the engine at each chunk
    modes.insert(modes.end(), chunks.begin(), chunks.end());
    for (int64_t chunk : modes) {
      const bool continuous = chunk > 0;
      std::vector<double> tps;
      struct Run {
        double tps;
        EngineStats st;
        std::vector<double> first;
      };
      std::vector<Run> by_run;  // continuous: where the time went
      for (int64_t r = 0; r < runs + 1; ++r) {
        cuda::EngineCudaOptions o;
        o.strategy = s, o.window = window, o.slots = slots, o.max_context = prompt + n_new;
        o.prefill_chunk = int(chunk), o.max_batch_tokens = std::max(step_tokens, slots);
        EngineStats st;
        std::vector<double> first;
        Result<double> t = continuous ? serve(**dm, o, w, &st, &first) : waves(**dm, s, window, slots, prompt + n_new, w);
        if (!t.ok()) return std::fprintf(stderr, "error: %s\n", t.status().message().c_str()), 1;
        if (r > 0) tps.push_back(double(w.total_new) / *t), by_run.push_back({tps.back(), st, first});
      }
      std::sort(tps.begin(), tps.end());
      const double med = tps[tps.size() / 2];
      if (!continuous) {
        static_med = med;
        std::printf("%-10s %-16s %12.1f %10.1f-%-10.1f\n", cuda::decode_strategy_name(s), "static", med, tps.front(),
                    tps.back());
        continue;
      }
      std::sort(by_run.begin(), by_run.end(), [](const Run& x, const Run& y) { return x.tps < y.tps; });
      const Run& m = by_run[by_run.size() / 2];
      const std::string mode = "chunks of " + std::to_string(chunk);
      std::printf("%-10s %-16s %12.1f %10.1f-%-10.1f %10.1f (%7.1f)  %.2fx static\n", cuda::decode_strategy_name(s),
                  mode.c_str(), med, tps.front(), tps.back(), 1e3 * m.first[m.first.size() / 2], 1e3 * m.first.back(),
                  med / static_med);
      const EngineStats& st = m.st;  // the median run's steps: with prompt chunks (ragged) and plain decoding
      const int64_t dsteps = st.steps - st.prefill_steps;
      std::printf("%-10s   %lld steps: %lld with prompt chunks at %.3f ms (%lld rows at most), %lld decoding at %.3f ms\n",
                  "", (long long)st.steps, (long long)st.prefill_steps,
                  st.prefill_steps > 0 ? 1e3 * st.prefill_step_s / double(st.prefill_steps) : 0.0,
                  (long long)st.max_batch_rows, (long long)dsteps,
                  dsteps > 0 ? 1e3 * st.decode_step_s / double(dsteps) : 0.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
