// End-to-end decode on the GPU: a preset model with random bf16 weights (or
// a checkpoint), a batch of random prompts, then new tokens — tokens/s of
// the decode steps under the standard and the replay state layouts,
// measured side by side in one process (issue #4's end-to-end targets),
// and of the prompt's prefill at several chunk lengths.
//
//   replayssm_e2e_bench [--preset NAME | --model DIR] [--batch 1,8,64,256]
//                       [--prompt 128] [--new 128] [--window 16] [--runs 3]
//                       [--prefill 8,0] [--no-graphs] [--split S] [--replay-step -1] [--json FILE]
//
// --replay-step: DecoderOptions::replay_step of the replay rows, a list (a
// row each: "replay" for -1, the decoder's default, "replay:0" the
// output-only kernels at every batch, "replay:1" the standard step for
// every plain token).
// Per (batch, strategy): one discarded warm-up run (it captures the
// graphs), then --runs runs; each resets the decoder and prefills the
// prompt once per --prefill chunk length (tokens per sequence a step; 0:
// the decoder's max_chunk(), its default — 8 is what the decode kernels
// take, the chunk a prompt had before the chunk scans), timing each, then
// times the --new decode steps after the last prefill. Reported: the
// median tokens/s over runs with min–max, ms per step, the device bytes a
// decode step must move (weights + SSM state traffic; KV and activations
// are small here and left out) and the achieved GB/s; then the prefill's
// prompt tokens/s per chunk length and its ratio to the first length's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/presets.h"
#include "replayssm/model.h"
#include "runtime/cuda/decoder.h"
#include "backend/cuda/device_model.h"

using namespace replayssm;

namespace {

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stoll(x));
  return v;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int usage() {
  std::fprintf(
      stderr,
      "usage: replayssm_e2e_bench [--preset NAME | --model DIR] [--batch 1,8,64,256] [--prompt 128]\n"
      "                           [--new 128] [--window 16] [--runs 3] [--prefill 8,0] [--no-graphs] [--split S]\n"
      "                           [--replay-step -1[,0,1]] [--json FILE]\n");
  return 2;
}

// Bytes a decode step must move at batch B: every weight once, and per SSM
// layer the state (standard: read + write) or the checkpoint plus the log
// (replay: read).
// dec: whose replay layout may step a kind's layers through the standard
// step (Decoder::replay_steps_mamba2, _gdn), which then moves a state read
// and write a token, as the standard layout does.
double step_bytes(const ModelConfig& c, int64_t weight_bytes, int64_t B, const cuda::Decoder& dec, int W) {
  const bool standard = dec.options().strategy == cuda::DecodeStrategy::kStandard;
  double per_seq = 0.0;
  for (BlockKind k : c.blocks) {
    double state = 0.0, log = 0.0;
    bool stepped = standard;
    if (k == BlockKind::kMamba2) {
      const double HP = double(c.mamba.n_heads * c.mamba.head_dim), GN = double(c.mamba.n_groups * c.mamba.state_size);
      state = HP * double(c.mamba.state_size) * 4.0;
      log = (HP * 2 + GN * 2 + double(c.mamba.n_heads) * 4) * (W + 1) / 2.0;  // mean log length
      stepped |= dec.replay_steps_mamba2();
    } else if (k == BlockKind::kGatedDeltaNet) {
      const double K = double(c.gdn.n_k_heads * c.gdn.k_dim), V = double(c.gdn.n_v_heads * c.gdn.v_dim);
      state = double(c.gdn.n_v_heads * c.gdn.k_dim * c.gdn.v_dim) * 4.0;
      log = (K * 2 + V * 4 + double(c.gdn.n_v_heads) * 4) * (W + 1) / 2.0;
      stepped |= dec.replay_steps_gdn();
    }
    per_seq += stepped ? 2.0 * state : state + log;
  }
  return double(weight_bytes) + double(B) * per_seq;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "nemotron-h-8b", model_dir, json_path;
  std::vector<int64_t> batches = {1, 8, 64, 256}, prefill_chunks = {8, 0}, replay_steps = {-1};
  int64_t prompt = 128, n_new = 128, runs = 3;
  int window = 16;
  bool graphs = true;
  int64_t split = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(usage());
      }
      return argv[++i];
    };
    if (a == "--preset") preset = val();
    else if (a == "--model") model_dir = val();
    else if (a == "--batch") batches = parse_list(val());
    else if (a == "--prompt") prompt = std::stoll(val());
    else if (a == "--new") n_new = std::stoll(val());
    else if (a == "--window") window = std::stoi(val());
    else if (a == "--runs") runs = std::stoll(val());
    else if (a == "--no-graphs") graphs = false;
    else if (a == "--split") split = std::stoll(val());
    else if (a == "--prefill") prefill_chunks = parse_list(val());
    else if (a == "--replay-step")
      replay_steps = parse_list(val());
    else if (a == "--json") json_path = val();
    else return usage();
  }
  if (prompt < 1 || n_new < 1 || runs < 1 || batches.empty() || split < 1 || prefill_chunks.empty()) return usage();
  for (int64_t c : prefill_chunks)
    if (c < 0 || c > cuda::kMaxChunk) return usage();
  for (int64_t v : replay_steps)
    if (v < -1 || v > 1) return usage();

  std::unique_ptr<Model> model;
  if (!model_dir.empty()) {
    auto m = Model::load(model_dir);
    if (!m.ok()) return std::fprintf(stderr, "error: %s\n", m.status().message().c_str()), 1;
    model = std::move(m).value();
  } else {
    auto c = bench::preset_config(preset);
    if (!c.ok()) return std::fprintf(stderr, "error: %s\n", c.status().message().c_str()), 1;
    auto m = Model::random_without_matrices(*c, 1);
    if (!m.ok()) return std::fprintf(stderr, "error: %s\n", m.status().message().c_str()), 1;
    model = std::move(m).value();
  }
  const ModelConfig& cfg = model->config();
  const double t0 = now_s();
  auto dm = cuda::DeviceModel::create(*model, 1);
  if (!dm.ok()) return std::fprintf(stderr, "error: %s\n", dm.status().message().c_str()), 1;
  std::printf("model %s: %.2f GB of device weights (%.1f s to place)\n", model_dir.empty() ? preset.c_str() : model_dir.c_str(),
              double((*dm)->bytes()) / 1e9, now_s() - t0);
  std::printf("prompt %lld, %lld new tokens, window %d, %s, median of %lld runs after a warm-up%s\n\n", (long long)prompt,
              (long long)n_new, window, graphs ? "CUDA graphs" : "eager launches", (long long)runs,
              split > 1 ? (", the batch split over " + std::to_string(split) + " decoders on their own streams").c_str() : "");
  std::printf("%6s %-9s %12s %19s %9s %9s %9s %11s\n", "batch", "strategy", "tok/s", "min-max", "ms/step", "GB/step",
              "GB/s", "state GB");

  std::string json = "[";
  std::vector<std::string> prefill_lines;
  for (int64_t B : batches) {
    double standard_tps = 0.0;
    // The standard row, then a replay row per --replay-step value.
    std::vector<std::pair<cuda::DecodeStrategy, int>> rows_of = {{cuda::DecodeStrategy::kStandard, -1}};
    for (int64_t v : replay_steps) rows_of.emplace_back(cuda::DecodeStrategy::kReplay, int(v));
    for (const auto& [s, replay_step] : rows_of) {
      const std::string name = s == cuda::DecodeStrategy::kReplay && replay_step != -1
                                   ? "replay:" + std::to_string(replay_step)
                                   : cuda::decode_strategy_name(s);
      // --split S: S decoders of B/S sequences, each stepped by its own host
      // thread on its own stream, so one's GEMMs can overlap another's SSM
      // kernels on the GPU.
      if (B % split != 0) {
        std::printf("%6lld %-9s  skipped: batch not a multiple of --split %lld\n", (long long)B, name.c_str(),
                    (long long)split);
        continue;
      }
      const int64_t Bl = B / split;
      cuda::DecoderOptions o;
      o.strategy = s, o.batch = Bl, o.max_context = prompt + n_new, o.window = window, o.graphs = graphs;
      o.replay_step = replay_step;
      std::vector<std::unique_ptr<cuda::Decoder>> decs;
      Status made;
      for (int64_t l = 0; l < split && made.ok(); ++l) {
        auto d = cuda::Decoder::create(**dm, o);
        if (!d.ok()) made = d.status();
        else decs.push_back(std::move(d).value());
      }
      if (!made.ok()) {
        std::printf("%6lld %-9s  skipped: %s\n", (long long)B, name.c_str(), made.message().c_str());
        continue;
      }
      std::mt19937 rng(42);
      std::uniform_int_distribution<int32_t> id(0, int32_t(cfg.vocab_size - 1));
      std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(B), std::vector<int32_t>(static_cast<size_t>(prompt)));
      for (auto& p : prompts)
        for (int32_t& t : p) t = id(rng);
      std::vector<double> tps;
      std::vector<std::vector<double>> prefill_tps(prefill_chunks.size());
      auto chunk_of = [&](size_t k) {  // --prefill's k-th length, 0 the decoder's most
        const int64_t most = decs[0]->max_chunk();
        return prefill_chunks[k] > 0 ? std::min<int64_t>(prefill_chunks[k], most) : most;
      };
      std::vector<std::vector<int32_t>> nexts(static_cast<size_t>(split), std::vector<int32_t>(static_cast<size_t>(Bl)));
      for (int64_t r = 0; r < runs + 1; ++r) {
        Status st;
        for (size_t k = 0; k < prefill_chunks.size() && st.ok(); ++k) {
          // Every lane reset and prefilled, in chunks of at most `chunk`.
          const double p0 = now_s();
          for (int64_t l = 0; l < split && st.ok(); ++l) {
            cuda::Decoder& dec = *decs[size_t(l)];
            const int64_t chunk = chunk_of(k);
            st = dec.reset();
            std::vector<int32_t> tok;
            for (int64_t t = 0; st.ok() && t < prompt;) {
              const int64_t T = std::min<int64_t>(chunk, prompt - t);
              tok.resize(size_t(Bl * T));
              for (int64_t b = 0; b < Bl; ++b)
                for (int64_t i = 0; i < T; ++i) tok[size_t(b * T + i)] = prompts[size_t(l * Bl + b)][size_t(t + i)];
              st = dec.step(tok, int(T), nexts[size_t(l)]);
              t += T;
            }
          }
          if (r > 0) prefill_tps[k].push_back(double(B * prompt) / (now_s() - p0));
        }
        if (!st.ok()) return std::fprintf(stderr, "error: %s\n", st.message().c_str()), 1;
        std::vector<Status> lane_status(static_cast<size_t>(split));
        auto decode = [&](int64_t l) {
          std::vector<int32_t> tok;
          for (int64_t t = 0; lane_status[size_t(l)].ok() && t < n_new; ++t) {
            tok = nexts[size_t(l)];
            lane_status[size_t(l)] = decs[size_t(l)]->step(tok, nexts[size_t(l)]);
          }
        };
        const double start = now_s();
        if (split == 1) {
          decode(0);
        } else {
          std::vector<std::thread> lanes;
          for (int64_t l = 0; l < split; ++l) lanes.emplace_back(decode, l);
          for (std::thread& th : lanes) th.join();
        }
        const double el = now_s() - start;
        for (const Status& ls : lane_status)
          if (!ls.ok()) return std::fprintf(stderr, "error: %s\n", ls.message().c_str()), 1;
        if (r > 0) tps.push_back(double(B * n_new) / el);
      }
      std::sort(tps.begin(), tps.end());
      const double med = tps[tps.size() / 2], ms = 1e3 * double(B) / med;
      const double bytes = step_bytes(cfg, (*dm)->bytes(), B, *decs[0], window);
      if (s == cuda::DecodeStrategy::kStandard) standard_tps = med;
      char ratio[32] = "";
      if (s == cuda::DecodeStrategy::kReplay && standard_tps > 0) std::snprintf(ratio, sizeof ratio, "  %.2fx", med / standard_tps);
      std::printf("%6lld %-9s %12.1f %9.1f-%-9.1f %9.3f %9.2f %9.0f %11.2f%s\n", (long long)B, name.c_str(), med,
                  tps.front(), tps.back(), ms, bytes / 1e9, bytes / (ms * 1e-3) / 1e9,
                  double(decs[0]->memory().state_bytes * split) / 1e9, ratio);
      std::fflush(stdout);
      std::string prefill_json;
      for (size_t k = 0; k < prefill_chunks.size(); ++k) {
        std::vector<double>& v = prefill_tps[k];
        std::sort(v.begin(), v.end());
        const double pm = v[v.size() / 2], base = prefill_tps[0][prefill_tps[0].size() / 2];
        char line[256];
        std::snprintf(line, sizeof line, "%6lld %-9s %7lld %12.1f %9.1f-%-9.1f %11.2f  %.2fx", (long long)B,
                      name.c_str(), (long long)chunk_of(k), pm, v.front(), v.back(), 1e3 * double(B * prompt) / pm,
                      pm / base);
        prefill_lines.push_back(line);
        char o[256];
        std::snprintf(o, sizeof o, "%s{\"chunk\": %lld, \"tokens_per_s\": %.2f, \"tokens_per_s_min\": %.2f, \"tokens_per_s_max\": %.2f}",
                      k > 0 ? ", " : "", (long long)chunk_of(k), pm, v.front(), v.back());
        prefill_json += o;
      }
      char obj[512];
      std::snprintf(
          obj, sizeof obj,
          "%s{\"batch\": %lld, \"split\": %lld, \"strategy\": \"%s\", \"replay_step\": %d, \"tokens_per_s\": %.2f, "
          "\"tokens_per_s_min\": %.2f, "
          "\"tokens_per_s_max\": %.2f, \"ms_per_step\": %.4f, \"bytes_per_step\": %.0f, \"state_bytes\": %lld, "
          "\"kv_bytes\": %lld, \"prefill\": [",
          json.size() > 1 ? ", " : "", (long long)B, (long long)split, cuda::decode_strategy_name(s), replay_step, med,
          tps.front(), tps.back(), ms, bytes, (long long)(decs[0]->memory().state_bytes * split),
          (long long)(decs[0]->memory().kv_bytes * split));
      json += obj + prefill_json + "]}";
    }
  }
  json += "]\n";
  std::printf("\nprefill of the %lld-token prompts, chunks of up to `chunk` tokens per sequence a step\n", (long long)prompt);
  std::printf("%6s %-9s %7s %12s %19s %11s  %s\n", "batch", "strategy", "chunk", "prompt tok/s", "min-max", "ms/prompts",
              "vs first");
  for (const std::string& l : prefill_lines) std::printf("%s\n", l.c_str());
  if (!json_path.empty()) std::ofstream(json_path) << json;
  return 0;
}
