// `replayssm bench` and its library: presets (shapes and parameter counts
// of the published models, no weights allocated), random-weight models,
// batched generation, oracle drafts, summaries, the max_concurrency search,
// the CLI's JSON and plots, and one-line errors for bad input.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "bench/memory.h"
#include "bench/oracle_draft.h"
#include "bench/presets.h"
#include "bench/sweep.h"
#include "workloads/generate.h"
#include "backend/cpu/dense_cache.h"
#include "test_util.h"

namespace replayssm {
namespace {

using namespace replayssm::bench;
using test::run_cli;
using test::TempDir;

// ---- presets -------------------------------------------------------------

TEST(Presets, EveryPresetParses) {
  for (const Preset& p : presets()) {
    auto c = preset_config(p.name);
    ASSERT_TRUE(c.ok()) << p.name << ": " << c.status().message();
    EXPECT_GT(parameter_count(*c), 0) << p.name;
    EXPECT_EQ(c->dir, "preset:" + p.name);
  }
  auto bad = preset_config("nemotron-h-9b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--preset"), std::string::npos);
  EXPECT_NE(bad.status().message().find("nemotron-h-9b"), std::string::npos);
  EXPECT_NE(bad.status().message().find("qwen3.5-27b"), std::string::npos) << "lists the names";
}

TEST(Presets, Nemotron8BIsTheFixtureConfig) {
  auto p = preset_config("nemotron-h-8b");
  auto f = load_model_config(test::data_dir("nemotron_h_8b_config"));
  ASSERT_TRUE(p.ok() && f.ok());
  EXPECT_EQ(p->blocks, f->blocks);
  EXPECT_EQ(parameter_count(*p), 8100852736);
  EXPECT_EQ(ssm_state_bytes_per_sequence(*p, 2), ssm_state_bytes_per_sequence(*f, 2));
  EXPECT_EQ(kv_bytes_per_token(*p, 2), kv_bytes_per_token(*f, 2));
}

// Parameter counts written out from the shapes the issue lists.
TEST(Presets, Nemotron4BParametersAreWhatTheShapesImply) {
  auto c = preset_config("nemotron-h-4b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->n_layers, 42);
  EXPECT_EQ(c->count(BlockKind::kMamba2), 21);
  EXPECT_EQ(c->count(BlockKind::kAttention), 4);
  EXPECT_EQ(c->count(BlockKind::kMlp), 17);
  const int64_t D = 3136, V = 131072, H = 96, P = 80, G = 8, N = 128, K = 4, Hq = 40, Hkv = 8, Dh = 128, F = 12544;
  const int64_t I = H * P, C = I + 2 * G * N;
  const int64_t mamba = (I + C + H) * D + C * K + C + 3 * H + I + D * I + D;  // in, conv w+b, A/D/dt, norm, out, pre-norm
  const int64_t attn = (Hq * Dh + 2 * Hkv * Dh) * D + D * Hq * Dh + D;
  const int64_t mlp = 2 * F * D + D;
  const int64_t total = 2 * V * D + D + 21 * mamba + 4 * attn + 17 * mlp;  // embed + untied head + final norm
  EXPECT_EQ(parameter_count(*c), total);
  EXPECT_EQ(total, 3973556832);
  EXPECT_EQ(ssm_state_bytes_per_sequence(*c, 4), 21 * (H * P * N * 4 + (K - 1) * C * 4));
}

TEST(Presets, Qwen27BParametersAreWhatTheShapesImply) {
  auto c = preset_config("qwen3.5-27b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->count(BlockKind::kGatedDeltaNet), 48);
  EXPECT_EQ(c->count(BlockKind::kAttention), 16);
  EXPECT_EQ(c->count(BlockKind::kMlp), 64);
  EXPECT_EQ(c->blocks[2 * 3], BlockKind::kAttention) << "full attention every 4th layer";
  const int64_t D = 5120, V = 248320, F = 17408, Hk = 16, Hv = 48, dk = 128, dv = 128, K = 4, Hq = 24, Hkv = 4,
                Dh = 256;
  const int64_t C = 2 * Hk * dk + Hv * dv;
  const int64_t gdn = C * D + Hv * dv * D + 2 * Hv * D + C * K + 2 * Hv + dv + D * Hv * dv + D;
  const int64_t attn = 2 * Hq * Dh * D + 2 * Hkv * Dh * D + D * Hq * Dh + 2 * Dh + D;  // q yields query | gate
  const int64_t mlp = 3 * F * D + D;
  const int64_t total = 2 * V * D + D + 48 * gdn + 16 * attn + 64 * mlp;
  EXPECT_EQ(parameter_count(*c), total);
  EXPECT_EQ(total, 26895998464);
  EXPECT_EQ(c->attn.rotary_dim, 64);
}

// ---- random-weight models -----------------------------------------------

std::vector<float> logits_of(const Model& m, const std::vector<int32_t>& prompt) {
  DenseCache cache(cache_spec(m.config()));
  const int64_t seq = cache.add_sequence();
  const SeqSlice s{seq, 0, static_cast<int64_t>(prompt.size()), 0, true};
  const int64_t last = static_cast<int64_t>(prompt.size()) - 1;
  std::vector<float> out(static_cast<size_t>(m.config().vocab_size));
  EXPECT_TRUE(m.forward({&s, 1}, prompt, cache, {&last, 1}, out.data()).ok());
  return out;
}

TEST(RandomModel, FiniteOrderOneLogitsAndDeterministic) {
  for (const char* name : {"tiny", "tiny-qwen3.5"}) {
    auto c = preset_config(name);
    ASSERT_TRUE(c.ok());
    auto a = Model::random(*c, 7), b = Model::random(*c, 7), other = Model::random(*c, 8);
    ASSERT_TRUE(a.ok() && b.ok() && other.ok());
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back((i * 977 + 13) % 4096);
    const std::vector<float> la = logits_of(**a, prompt), lb = logits_of(**b, prompt), lo = logits_of(**other, prompt);
    double sum = 0, sq = 0;
    for (float x : la) {
      ASSERT_TRUE(std::isfinite(x)) << name;
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double mean = sum / la.size(), sd = std::sqrt(sq / la.size() - mean * mean);
    EXPECT_GT(sd, 0.1) << name << ": logits are not degenerate";
    EXPECT_LT(sd, 20.0) << name;
    EXPECT_EQ(la, lb) << name << ": same seed, same weights";
    EXPECT_NE(la, lo) << name;
  }
}

TEST(RandomModel, RejectsAnEmptyConfig) {
  ModelConfig c;
  auto m = Model::random(c, 0);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("no layers"), std::string::npos);
}

// ---- batched generation and oracle drafts ---------------------------------

struct Tiny {
  std::unique_ptr<Model> model;
  std::unique_ptr<cpu::CpuBackend> backend;  // the tests' sessions take it in turn
  Tiny() {
    auto c = preset_config("tiny");
    model = std::move(Model::random(*c, kPresetSeed).value());
    backend = test::cpu_backend(*model);
  }
};

Backend& tiny() {
  static Tiny t;
  return *t.backend;
}

TEST(GenerateBatch, EachPromptGetsItsOwnGreedyTokens) {
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 2, 77}, {1000, 3}, {42, 42, 42, 42, 42, 7}};
  for (Strategy s : {Strategy::kReplay, Strategy::kSnapshot, Strategy::kRecompute}) {
    GenerateOptions g;
    g.max_new_tokens = 12;
    g.stop_at_eos = false;
    g.state.strategy = s;
    auto batch = generate_batch(tiny(), prompts, g);
    ASSERT_TRUE(batch.ok()) << batch.status().message();
    ASSERT_EQ(batch->tokens.size(), 3u);
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto one = generate(tiny(), prompts[i], g);
      ASSERT_TRUE(one.ok());
      EXPECT_EQ(batch->tokens[i], one->tokens) << strategy_name(s) << " prompt " << i;
    }
  }
}

TEST(GenerateBatch, OracleDraftsKeepTheTokensAndSetTheAcceptance) {
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 2, 77}, {1000, 3}};
  GenerateOptions g;
  g.max_new_tokens = 16;
  g.stop_at_eos = false;
  auto plain = generate_batch(tiny(), prompts, g);
  ASSERT_TRUE(plain.ok());
  std::vector<std::vector<int32_t>> refs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    refs.push_back(prompts[i]);
    refs.back().insert(refs.back().end(), plain->tokens[i].begin(), plain->tokens[i].end());
  }
  for (double acc : {1.0, 0.5, 0.0}) {
    GenerateOptions s = g;
    s.spec.kind = SpecOptions::kCustom;
    s.spec.tokens = 4;
    s.spec.make_source = [&](int64_t i) -> Result<std::unique_ptr<DraftSource>> {
      return std::unique_ptr<DraftSource>(std::make_unique<OracleDraft>(&refs[i], acc, 4096, 1 + i));
    };
    auto r = generate_batch(tiny(), prompts, s);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->tokens, plain->tokens) << "greedy speculation emits greedy tokens, acc " << acc;
    if (acc == 1.0) {
      EXPECT_EQ(r->spec.accepted, r->spec.drafted);
      EXPECT_EQ(r->spec.rejections, 0);
    }
    if (acc == 0.0) {
      EXPECT_EQ(r->spec.accepted, 0);
      EXPECT_EQ(r->spec.rejections, r->spec.verify_steps);
    }
    if (acc == 0.5) {
      EXPECT_GT(r->spec.accepted, 0);
      EXPECT_LT(r->spec.accepted, r->spec.drafted);
    }
  }
}

TEST(OracleDraft, ProposesTheReferenceOrWrongTokens) {
  const std::vector<int32_t> ref = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> ctx = {1, 2, 3};
  OracleDraft right(&ref, 1.0, 100, 0), wrong(&ref, 0.0, 100, 0);
  auto a = right.propose(ctx, 3), b = wrong.propose(ctx, 10);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, (std::vector<int32_t>{4, 5, 6}));
  ASSERT_EQ(b->tokens.size(), 5u) << "stops at the end of the reference";
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_NE(b->tokens[i], ref[3 + i]);
    EXPECT_GE(b->tokens[i], 0);
    EXPECT_LT(b->tokens[i], 100);
  }
}

// ---- sweep pieces ------------------------------------------------------------

TEST(BenchSweep, SummaryAndConfigurations) {
  const Summary s = Summary::of({3.0, 1.0, 2.0, 10.0});
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 10.0);
  EXPECT_DOUBLE_EQ(Summary::of({4.0, 1.0, 9.0}).median, 4.0);

  Axes a;
  a.workloads = {Workload::kSpec, Workload::kRestore, Workload::kAr};
  a.strategies = {Strategy::kReplay, Strategy::kSnapshot};
  a.batches = {1, 8};
  a.windows = {16};
  a.spec_ts = {2, 4};
  a.accuracies = {0.9, 0.5};
  const auto cs = enumerate_configs(a, DraftKind::kOracle);
  // spec: 2 strategies x 2 T x 2 acc x 2 batches; restore: replay twice (log kept / not) + snapshot;
  // ar: 2 strategies; each x 2 batches.
  EXPECT_EQ(cs.size(), 16u + 6u + 4u);
  EXPECT_EQ(enumerate_configs(a, DraftKind::kNgram).size(), 8u + 6u + 4u);
  EXPECT_EQ(cs[0].batch, 1);
  EXPECT_EQ(cs[1].batch, 8) << "batch varies fastest within a series";
  EXPECT_EQ(cs[0].series(), cs[1].series());
}

TEST(BenchSweep, ParsesByteCounts) {
  EXPECT_EQ(*parse_bytes("1024", "--memory-budget"), 1024);
  EXPECT_EQ(*parse_bytes("512M", "--memory-budget"), 512ll << 20);
  EXPECT_EQ(*parse_bytes("1.5GiB", "--memory-budget"), 3ll << 29);
  for (const char* bad : {"", "M", "12Q", "-5", "0"}) {
    auto r = parse_bytes(bad, "--memory-budget");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--memory-budget"), std::string::npos);
  }
}

// AR sequences are independent, so the store peak is linear in the batch: a
// budget of 3.5 single-sequence peaks allows exactly 3.
TEST(BenchSweep, MaxConcurrencyStopsAtTheMemoryBudget) {
  SweepOptions opt;
  opt.prompt_tokens = 8;
  opt.new_tokens = 6;
  opt.runs = 1;
  opt.warmup = 0;
  opt.latency_target = 10.0;  // seconds: never the limit here
  opt.concurrency_limit = 64;
  BenchContext ctx(tiny().config(), &tiny(), opt);
  Config c;
  c.workload = Workload::kAr;
  auto one = run_once(ctx, c);
  ASSERT_TRUE(one.ok()) << one.status().message();
  const int64_t per_seq = one->state.state_bytes_peak + one->state.kv_bytes_peak;
  SweepOptions tight = opt;
  tight.memory_budget = per_seq * 7 / 2;
  BenchContext ctx1(tiny().config(), &tiny(), tight);
  auto r = search_max_concurrency(ctx1, c, {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->value, 3);
  EXPECT_EQ(r->limited_by, "memory");
  // Seeded with the sweep's own batches 1 and 2, the linear trend points
  // straight at the answer: one probe there, one just above it.
  SweepOptions five = opt;
  five.memory_budget = per_seq * 11 / 2;
  BenchContext ctx5(tiny().config(), &tiny(), five);
  std::vector<ConfigResult> sweep;
  for (int64_t b : {1, 2}) {
    Config cb = c;
    cb.batch = b;
    auto m = run_once(ctx5, cb);
    ASSERT_TRUE(m.ok());
    sweep.push_back(summarize(cb, {*m}, 0));
  }
  auto g = search_max_concurrency(ctx5, c, {&sweep[0], &sweep[1]});
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->value, 5);
  EXPECT_EQ(g->limited_by, "memory");
  EXPECT_EQ(g->probes, 2);
  // With room for everything the search stops at its limit.
  SweepOptions wide = opt;
  wide.memory_budget = 0;
  wide.concurrency_limit = 4;
  BenchContext ctx2(tiny().config(), &tiny(), wide);
  auto l = search_max_concurrency(ctx2, c, {});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->value, 4);
  EXPECT_EQ(l->limited_by, "limit");
}

TEST(BenchSweep, RestoreMeasuresBothPathsAtEqualDistances) {
  SweepOptions opt;
  opt.prompt_tokens = 8;
  opt.new_tokens = 24;
  BenchContext ctx(tiny().config(), &tiny(), opt);
  Config c;
  c.workload = Workload::kRestore;
  c.window = 4;
  c.log_retention = -1;
  auto kept = run_once(ctx, c);
  c.log_retention = 0;
  auto dropped = run_once(ctx, c);
  ASSERT_TRUE(kept.ok() && dropped.ok());
  ASSERT_EQ(kept->restores.size(), dropped->restores.size());
  ASSERT_GE(kept->restores.size(), 5u);
  for (size_t i = 0; i < kept->restores.size(); ++i) {
    const RestoreSample &k = kept->restores[i], &d = dropped->restores[i];
    EXPECT_EQ(k.position, d.position);
    EXPECT_EQ(k.path, RestorePath::kLogReplay) << "p=" << k.position;
    EXPECT_EQ(d.path, RestorePath::kReprefill) << "p=" << d.position;
    EXPECT_EQ(k.distance, k.position) << "no older checkpoint kept: from position 0";
    EXPECT_GT(k.seconds, 0.0);
  }
  EXPECT_GT(kept->state.restores_log_replay, 0);
  EXPECT_GT(dropped->state.restores_reprefill, 0);
}

TEST(BenchMemory, EstimatesRefuseWhatCannotFit) {
  auto big = preset_config("qwen3.5-27b");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(weight_bytes(*big), 26895998464ll * 4);
  Config c;
  c.workload = Workload::kSpec;
  c.spec_t = 4;
  SweepOptions opt;
  EXPECT_GT(estimate_run_bytes(*big, c, opt), 0);
  c.batch = 8;
  auto tiny_cfg = preset_config("tiny");
  EXPECT_LT(estimate_run_bytes(*tiny_cfg, c, opt), int64_t{256} << 20);
  EXPECT_GE(peak_rss_bytes(), 0);
}

// ---- the command ---------------------------------------------------------------

const char* kQuick = " --preset tiny --runs 1 --warmup 0 --prompt-tokens 8 --new-tokens 8 ";

TEST(BenchCli, SpecWritesSaneJsonTableAndPlots) {
  TempDir dir;
  auto r = run_cli("bench --workload spec --batch 1,2 --draft-accuracy 0.5 --concurrency-limit 4 --preset tiny "
                   "--runs 3 --warmup 1 --prompt-tokens 8 --new-tokens 8 --out " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
  const auto j = test::read_json(dir.file("bench.json"));
  EXPECT_EQ(j["format"], "replayssm-bench");
  EXPECT_EQ(j["model"], "preset:tiny");
  EXPECT_EQ(j["settings"]["runs"], 3);
  const auto& cs = j["configurations"];
  ASSERT_EQ(cs.size(), 6u) << "3 strategies x 2 batches";
  std::map<std::string, int64_t> peak_b1;
  for (const auto& c : cs) {
    for (const char* k : {"time_per_output_token", "tokens_per_s", "peak_state_bytes", "peak_device_bytes",
                          "max_concurrency", "acceptance_rate", "rollback_cost", "restore_latency"})
      ASSERT_TRUE(c.contains(k)) << k;
    for (const char* k : {"time_per_output_token", "tokens_per_s"}) {
      EXPECT_GT(c[k]["median"].get<double>(), 0.0) << k;
      EXPECT_LE(c[k]["min"].get<double>(), c[k]["median"].get<double>()) << k;
      EXPECT_GE(c[k]["max"].get<double>(), c[k]["median"].get<double>()) << k;
    }
    const double acc = c["acceptance_rate"].get<double>();
    EXPECT_GE(acc, 0.0);
    EXPECT_LE(acc, 1.0);
    EXPECT_GT(c["peak_state_bytes"].get<int64_t>(), 0);
    EXPECT_GT(c["peak_device_bytes"].get<int64_t>(), c["peak_state_bytes"].get<int64_t>()) << "weights included";
    EXPECT_GE(c["max_concurrency"].get<int64_t>(), 0);
    EXPECT_LE(c["max_concurrency"].get<int64_t>(), 4);
    EXPECT_TRUE(c["restore_latency"].is_null());
    EXPECT_EQ(c["spec_t"], 4);
    if (c["batch"] == 1) peak_b1[c["strategy"]] = c["peak_state_bytes"].get<int64_t>();
  }
  EXPECT_LT(peak_b1["replay"], peak_b1["snapshot"]) << "drafts add log entries, not states";
  for (const char* f : {"table.txt", "tokens_per_s_vs_batch_spec.gp", "tokens_per_s_vs_batch_spec.dat",
                        "rollback_cost_vs_acceptance.gp"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(f))) << f;
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    EXPECT_TRUE(std::filesystem::exists(dir.file("tokens_per_s_vs_batch_spec.png")));
    EXPECT_TRUE(std::filesystem::exists(dir.file("rollback_cost_vs_acceptance.png")));
  }
}

TEST(BenchCli, EveryWorkloadRunsAndWindowsGiveTheMemoryCurve) {
  TempDir dir;
  auto r = run_cli(std::string("bench --workload all --strategy replay,snapshot --batch 2 --window 4,8 "
                               "--no-concurrency") + kQuick + "--out " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = test::read_json(dir.file("bench.json"));
  std::set<std::string> seen;
  for (const auto& c : j["configurations"]) {
    seen.insert(c["workload"].get<std::string>());
    EXPECT_TRUE(c["max_concurrency"].is_null());
    EXPECT_GT(c["tokens_per_s"]["median"].get<double>(), 0.0) << c.dump();
    if (c["workload"] == "restore") {
      ASSERT_TRUE(c["restore_latency"].is_array());
      ASSERT_FALSE(c["restore_latency"].empty());
      for (const auto& p : c["restore_latency"]) {
        EXPECT_GE(p["distance"].get<int64_t>(), 0);
        EXPECT_GT(p["seconds"]["median"].get<double>(), 0.0);
      }
    } else {
      EXPECT_TRUE(c["restore_latency"].is_null());
    }
  }
  EXPECT_EQ(seen.size(), 6u);
  for (const char* f : {"state_memory_vs_window_tree.dat", "restore_latency_vs_distance.gp"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(f))) << f;
}

TEST(BenchCli, MissingGnuplotWarnsAndKeepsTheScripts) {
  TempDir dir;
  auto r = run_cli(std::string("bench --workload ar --strategy replay --batch 1 --no-concurrency") + kQuick +
                   "--gnuplot /nonexistent/gnuplot --out " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gnuplot"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("bench.json")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("tokens_per_s_vs_batch_ar.gp")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("tokens_per_s_vs_batch_ar.png")));
}

// A run that fails after the sweep (its table cannot be written: a
// directory stands at table.txt) takes back what it added to --out and
// leaves what was there; a refused option creates no --out at all.
TEST(BenchCli, AFailedRunLeavesOutAsItWas) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("table.txt"));
  std::ofstream(dir.file("notes.txt")) << "mine";
  const std::string run = std::string("bench --workload ar --strategy replay --batch 1 --no-concurrency") + kQuick;
  auto r = run_cli(run + "--out " + dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("table.txt: cannot write"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"notes.txt", "table.txt"}));
  r = run_cli(run + "--page-size 0 --out " + dir.file("fresh"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(dir.file("fresh")));
}

struct BadBench {
  std::string args, needle;
};

TEST(BenchCli, BadInputIsOneLineNamingTheFlag) {
  TempDir dir;
  const std::string file = dir.file("not_a_dir");
  std::ofstream(file) << "x";
  const std::string out = " --out " + dir.file("o");
  const std::vector<BadBench> cases = {
      {"--workload chat" + out, "--workload: unknown workload 'chat'"},
      {"--workload spec --strategy replay,dense" + out, "--strategy: unknown strategy 'dense'"},
      {"--workload spec --preset llama-7b" + out, "--preset: unknown preset 'llama-7b'"},
      {"--workload spec --batch 0" + out, "--batch: '0' must be in"},
      {"--workload spec --batch 1,,8" + out, "--batch: empty entry in '1,,8'"},
      {"--workload spec --batch 1,x" + out, "--batch: 'x' is not an integer"},
      {"--workload spec --window 4,-1" + out, "--window: '-1' must be in"},
      {"--workload spec --spec-t 2,4," + out, "--spec-t: empty entry"},
      {"--workload spec --draft-accuracy 1.5" + out, "--draft-accuracy: '1.5' must be in [0, 1]"},
      {"--workload spec --draft model" + out, "--draft: unknown draft source 'model'"},
      {"--workload spec --runs 0" + out, "--runs: must be >= 1"},
      {"--workload spec --memory-budget lots" + out, "--memory-budget: 'lots'"},
      {"--workload spec --latency-target -3" + out, "--latency-target"},
      {"--workload spec --device cuda --page-size 3" + out,
       "--page-size: the CUDA backend's kernels read the log through pages of a power of two positions"},
      {"--workload spec --device tpu" + out, "--device: unknown device 'tpu'"},
      {"--workload spec --preset tiny --model /tmp" + out, "--preset and --model cannot be combined"},
      {"--workload spec --out " + file + "/sub", "--out: cannot create directory '" + file + "/sub'"},
      {"--out " + dir.file("o"), "--workload: missing"},
      {"--workload spec", "--out: missing"},
      {"--workload spec --page-size 5000" + out, "--page-size: must be in [1, 4096], got 5000"},
      {"--workload spec --no-concurrency --memory-budget 12Q" + out, "--memory-budget: '12Q'"},
  };
  for (const BadBench& c : cases) {
    auto r = run_cli("bench " + c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
  }
}

TEST(BenchCli, UnwritableOutIsRefusedBeforeRunning) {
  // A directory under a regular file cannot be made, not even by root (CI
  // runs as root, where a read-only directory would not stop anything).
  TempDir dir;
  const std::string file = dir.path() + "/plain_file";
  std::ofstream(file) << "x";
  auto r = run_cli("bench --workload spec --out " + file + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(BenchCli, DryRunListsConfigurationsAndRunsNothing) {
  auto r = run_cli("bench --workload spec,restore --strategy replay --batch 1,4 --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("10 configurations"), std::string::npos) << r.out;  // spec: 3 acc x 2 batches; restore: 2 x 2
  EXPECT_NE(r.out.find("restore replay log=all W=16 batch=4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("needs <="), std::string::npos) << r.out;
}

TEST(BenchCli, LargePresetIsRefusedWhenItCannotFit) {
  auto c = preset_config("qwen3.5-27b");
  const int64_t avail = available_memory_bytes();
  if (avail < 0 || avail > weight_bytes(*c)) GTEST_SKIP() << "this machine could hold qwen3.5-27b";
  TempDir dir;
  auto r = run_cli("bench --workload ar --preset qwen3.5-27b --out " + dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("--preset qwen3.5-27b: needs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("available"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace replayssm
