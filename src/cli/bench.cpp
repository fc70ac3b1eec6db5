// `replayssm bench`: the seed's before/after measurements for every workload
// and storage strategy in one command (docs/bench.md). This file only reads
// and checks the options, refuses what cannot fit in memory, and writes
// the outputs; the sweep itself is src/bench/, and --device cuda's part
// is bench_cuda.cpp.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/memory.h"
#include "bench/plots.h"
#include "bench/presets.h"
#include "bench/report.h"
#include "bench/sweep.h"
#include "replayssm/make_backend.h"
#include "cli/bench_cuda.h"
#include "cli/bench_prefix.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace replayssm::cli {

namespace {

using namespace replayssm::bench;

struct BenchArgs {
  std::string workload, strategy, batch = "1,8", spec_t = "4", window = "16";  // strategy: by device
  std::string draft = "oracle", accuracy = "0.9,0.7,0.5";
  std::string device = "cpu", preset, model, out;
  int64_t runs = 3, warmup = 1, prompt_tokens = 32, new_tokens = 32;
  std::string memory_budget;  // by device: host (cpu), device (cuda)
  double latency_target_ms = 20.0;
  int64_t concurrency_limit = 512;
  bool no_concurrency = false, dry_run = false;
  int64_t checkpoint_interval = 0, page_size = 4;
  uint64_t seed = 0;
  std::string gnuplot = "gnuplot";
  PrefixBenchArgs prefix;
};

// Splits "a,b,c"; an empty list or entry is an error naming the option.
Result<std::vector<std::string>> split_list(const std::string& text, const std::string& option) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(',', start);
    const std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (item.empty()) return invalid_argument(option + ": empty entry in '" + text + "' (expected a comma-separated list)");
    items.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return items;
}

Result<std::vector<int64_t>> int_list(const std::string& text, const std::string& option, int64_t lo, int64_t hi) {
  RSSM_ASSIGN_OR_RETURN(std::vector<std::string> items, split_list(text, option));
  std::vector<int64_t> out;
  for (const std::string& it : items) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(it, &used);
    } catch (...) {
      used = 0;
    }
    if (used != it.size() || used == 0) return invalid_argument(option + ": '" + it + "' is not an integer");
    if (v < lo || v > hi)
      return invalid_argument(option + ": '" + it + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

Result<std::vector<double>> unit_list(const std::string& text, const std::string& option) {
  RSSM_ASSIGN_OR_RETURN(std::vector<std::string> items, split_list(text, option));
  std::vector<double> out;
  for (const std::string& it : items) {
    size_t used = 0;
    double v = -1;
    try {
      v = std::stod(it, &used);
    } catch (...) {
      used = 0;
    }
    if (used != it.size() || used == 0) return invalid_argument(option + ": '" + it + "' is not a number");
    if (!(v >= 0.0 && v <= 1.0)) return invalid_argument(option + ": '" + it + "' must be in [0, 1]");
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// Creates `dir` and proves it writable before any measurement runs.
Status prepare_out(const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) return invalid_argument("--out: missing (the directory for bench.json and the plots)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("--out: cannot create directory '" + dir + "': " + ec.message());
  if (!fs::is_directory(dir, ec)) return invalid_argument("--out: '" + dir + "' is not a directory");
  const std::string probe = (fs::path(dir) / ".replayssm_bench_probe").string();
  {
    std::ofstream f(probe);
    if (!f) return io_error("--out: directory '" + dir + "' is not writable: " + std::strerror(errno));
  }
  fs::remove(probe, ec);
  return {};
}

// What one run adds to --out, taken away again unless the run finishes:
// a failed bench (a write refused half-way, an error during the sweep)
// leaves the directory as it found it, not a partial set of outputs.
class OutScope {
 public:
  explicit OutScope(std::string dir) : dir_(std::move(dir)) {
    std::error_code ec;
    existed_ = std::filesystem::exists(dir_, ec);
    if (!existed_ || !std::filesystem::is_directory(dir_, ec)) return;
    // Anything short of a complete listing turns the clean-up off: it must
    // never take a file that was there before.
    std::filesystem::directory_iterator it(dir_, ec), end;
    for (; !ec && it != end; it.increment(ec)) before_.push_back(it->path().filename());
    if (ec) kept_ = true;
  }
  OutScope(const OutScope&) = delete;
  OutScope& operator=(const OutScope&) = delete;
  ~OutScope() {
    if (kept_) return;
    std::error_code ec;
    if (!existed_) {
      std::filesystem::remove_all(dir_, ec);
      return;
    }
    if (!std::filesystem::is_directory(dir_, ec)) return;
    std::vector<std::filesystem::path> added;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec))
      if (std::find(before_.begin(), before_.end(), e.path().filename()) == before_.end()) added.push_back(e.path());
    for (const auto& p : added) std::filesystem::remove_all(p, ec);
  }
  void keep() { kept_ = true; }

 private:
  std::string dir_;
  bool existed_ = false, kept_ = false;
  std::vector<std::filesystem::path> before_;
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The command as it ran, with every default spelled out (reproducible).
std::string command_line(const BenchArgs& a) {
  std::string s = "replayssm bench --workload " + a.workload + " --strategy " + a.strategy + " --batch " + a.batch;
  s += " --window " + a.window + " --spec-t " + a.spec_t + " --draft " + a.draft;
  if (a.draft == "oracle") s += " --draft-accuracy " + a.accuracy;
  s += a.model.empty() ? " --preset " + (a.preset.empty() ? std::string("tiny") : a.preset) : " --model " + a.model;
  s += " --device " + a.device + " --runs " + std::to_string(a.runs) + " --warmup " + std::to_string(a.warmup);
  s += " --prompt-tokens " + std::to_string(a.prompt_tokens) + " --new-tokens " + std::to_string(a.new_tokens);
  if (a.no_concurrency) {
    s += " --no-concurrency";
  } else {
    char lat[32];
    std::snprintf(lat, sizeof lat, "%g", a.latency_target_ms);
    s += " --memory-budget " + a.memory_budget + " --latency-target " + lat + " --concurrency-limit " +
         std::to_string(a.concurrency_limit);
  }
  s += " --checkpoint-interval " + std::to_string(a.checkpoint_interval) + " --page-size " +
       std::to_string(a.page_size) + " --seed " + std::to_string(a.seed) + " --out " + a.out;
  return s;
}

// Refuses, before anything is allocated, a CPU sweep whose fp32 weights
// plus its hungriest configuration exceed `avail` (-1: unknown, not
// checked); with dry_run, prints every configuration's estimate first.
Status check_host_memory(const ModelConfig& cfg, const std::vector<Config>& configs, const SweepOptions& opt,
                         const std::string& who, int64_t avail, bool dry_run) {
  const int64_t weights = weight_bytes(cfg);
  int64_t run_need = 0;
  const Config* hungriest = &configs.front();
  for (const Config& c : configs) {
    const int64_t n = estimate_run_bytes(cfg, c, opt);
    if (n > run_need) {
      run_need = n;
      hungriest = &c;
    }
  }
  if (dry_run) {
    std::printf("%zu configurations, %lld runs each (%lld warm-up); fp32 weights %s; host memory available %s\n",
                configs.size(), static_cast<long long>(opt.warmup + opt.runs), static_cast<long long>(opt.warmup),
                format_bytes(weights).c_str(), avail >= 0 ? format_bytes(avail).c_str() : "unknown");
    for (const Config& c : configs)
      std::printf("  %-50s needs <= %s beyond the weights\n", c.describe().c_str(),
                  format_bytes(estimate_run_bytes(cfg, c, opt)).c_str());
    std::fflush(stdout);  // before any error line on stderr
  }
  if (avail >= 0 && weights + run_need > avail)
    return out_of_budget(who + ": needs " + format_bytes(weights + run_need) + " (fp32 weights " +
                         format_bytes(weights) + " + " + format_bytes(run_need) + " for " + hungriest->describe() +
                         ") but " + format_bytes(avail) + " is available");
  return {};
}

Status run_bench(const BenchArgs& args) {
  // Options first, all of them, before any model is built.
  if (args.device != "cpu" && args.device != "cuda")
    return invalid_argument("--device: unknown device '" + args.device + "' (expected cpu or cuda)");
  const bool cuda = args.device == "cuda";
  BenchArgs a = args;
  if (a.strategy.empty()) a.strategy = "replay,snapshot,recompute";
  if (a.memory_budget.empty()) a.memory_budget = cuda ? "device" : "host";
  if (a.workload.empty())
    return invalid_argument("--workload: missing (ar, spec, beam, best-of-n, tree, restore, a comma list, all, "
                            "or prefix)");
  if (a.workload == "prefix") {
    RSSM_ASSIGN_OR_RETURN(std::vector<int64_t> windows, int_list(a.window, "--window", 1, 1 << 20));
    return run_bench_prefix(a.prefix, {a.device, a.preset, a.model, a.out, a.seed, a.page_size, windows.at(0)});
  }
  Axes axes;
  RSSM_ASSIGN_OR_RETURN(std::vector<std::string> wl, split_list(a.workload, "--workload"));
  for (const std::string& w : wl) {
    if (w == "all") {
      axes.workloads = all_workloads();
      continue;
    }
    RSSM_ASSIGN_OR_RETURN(Workload x, parse_workload(w));
    if (std::find(axes.workloads.begin(), axes.workloads.end(), x) == axes.workloads.end()) axes.workloads.push_back(x);
  }
  RSSM_ASSIGN_OR_RETURN(std::vector<std::string> sl, split_list(a.strategy, "--strategy"));
  for (const std::string& s : sl) {
    RSSM_ASSIGN_OR_RETURN(Strategy x, parse_strategy(s));
    if (std::find(axes.strategies.begin(), axes.strategies.end(), x) == axes.strategies.end())
      axes.strategies.push_back(x);
  }
  RSSM_ASSIGN_OR_RETURN(axes.batches, int_list(a.batch, "--batch", 1, 1 << 20));
  RSSM_ASSIGN_OR_RETURN(axes.windows, int_list(a.window, "--window", 1, 1 << 20));
  RSSM_ASSIGN_OR_RETURN(axes.spec_ts, int_list(a.spec_t, "--spec-t", 1, 64));
  SweepOptions opt;
  if (a.draft == "oracle") opt.draft = DraftKind::kOracle;
  else if (a.draft == "ngram") opt.draft = DraftKind::kNgram;
  else return invalid_argument("--draft: unknown draft source '" + a.draft + "' (expected oracle or ngram)");
  RSSM_ASSIGN_OR_RETURN(axes.accuracies, unit_list(a.accuracy, "--draft-accuracy"));
  if (a.runs < 1) return invalid_argument("--runs: must be >= 1, got " + std::to_string(a.runs));
  if (a.warmup < 0) return invalid_argument("--warmup: must be >= 0, got " + std::to_string(a.warmup));
  if (a.prompt_tokens < 1) return invalid_argument("--prompt-tokens: must be >= 1, got " + std::to_string(a.prompt_tokens));
  if (a.new_tokens < 2)
    return invalid_argument("--new-tokens: must be >= 2 (the first comes from the prefill), got " +
                            std::to_string(a.new_tokens));
  if (a.checkpoint_interval < 0)
    return invalid_argument("--checkpoint-interval: must be >= 0, got " + std::to_string(a.checkpoint_interval));
  if (a.page_size < 1 || a.page_size > StateOptions::kMaxPageSize)
    return invalid_argument("--page-size: must be in [1, " + std::to_string(StateOptions::kMaxPageSize) + "], got " +
                            std::to_string(a.page_size));
  {
    StateOptions so;
    so.page_size = a.page_size;
    RSSM_RETURN_IF_ERROR(check_state_options(args.device, so));  // before a model reaches the device
  }
  opt.runs = a.runs;
  opt.warmup = a.warmup;
  opt.prompt_tokens = a.prompt_tokens;
  opt.new_tokens = a.new_tokens;
  opt.seed = a.seed;
  opt.checkpoint_interval = a.checkpoint_interval;
  opt.page_size = a.page_size;
  opt.concurrency = !a.no_concurrency;
  // The budget's keyword is the memory a real out-of-memory would hit.
  const std::string budget_keyword = cuda ? "device" : "host";
  if (cuda && a.memory_budget == "host")
    return invalid_argument("--memory-budget: 'host' does not apply to --device cuda (device, or a byte count)");
  // A budget given is checked even where --no-concurrency leaves it unused.
  if (a.memory_budget != budget_keyword) {
    RSSM_ASSIGN_OR_RETURN(const int64_t budget, parse_bytes(a.memory_budget, "--memory-budget"));
    if (opt.concurrency) opt.memory_budget = budget;
  }
  if (opt.concurrency) {
    if (!(a.latency_target_ms > 0.0) || !std::isfinite(a.latency_target_ms))
      return invalid_argument("--latency-target: must be a positive number of ms");
    opt.latency_target = a.latency_target_ms * 1e-3;
    if (a.concurrency_limit < 1)
      return invalid_argument("--concurrency-limit: must be >= 1, got " + std::to_string(a.concurrency_limit));
    opt.concurrency_limit = a.concurrency_limit;
  }
  if (!a.preset.empty() && !a.model.empty()) return invalid_argument("--preset and --model cannot be combined");
  const std::string preset = a.model.empty() ? (a.preset.empty() ? "tiny" : a.preset) : "";
  ModelConfig cfg;
  if (!preset.empty()) {
    RSSM_ASSIGN_OR_RETURN(cfg, preset_config(preset));
  } else {
    RSSM_ASSIGN_OR_RETURN(cfg, load_model_config(a.model));
  }
  // Beam search ranks 2·width candidates per beam, the tree expands into
  // `batch` distinct tokens: both need that many ids in the vocabulary.
  auto has = [&](Workload w) { return std::find(axes.workloads.begin(), axes.workloads.end(), w) != axes.workloads.end(); };
  for (int64_t b : axes.batches)
    if ((has(Workload::kBeam) && 2 * b > cfg.vocab_size) || (has(Workload::kTree) && b > cfg.vocab_size))
      return invalid_argument("--batch: '" + std::to_string(b) + "' is too large for beam/tree candidates in a vocabulary of " +
                              std::to_string(cfg.vocab_size));
  const std::vector<Config> configs = enumerate_configs(axes, opt.draft);
  for (const Config& c : configs) {
    StateOptions so;
    so.window = c.window;
    so.checkpoint_interval = opt.checkpoint_interval;
    so.page_size = opt.page_size;
    RSSM_RETURN_IF_ERROR(so.validate());
  }

  // Memory: the weights plus the hungriest configuration must fit now.
  const std::string who = preset.empty() ? "--model " + a.model : "--preset " + preset;
  const int64_t weights = weight_bytes(cfg), avail = available_memory_bytes();
  if (cuda) {
    RSSM_RETURN_IF_ERROR(check_cuda_memory(cfg, configs, opt, who, preset.empty(), a.dry_run));
  } else {
    RSSM_RETURN_IF_ERROR(check_host_memory(cfg, configs, opt, who, avail, a.dry_run));
  }
  if (a.dry_run) return {};
  OutScope out_scope(a.out);
  RSSM_RETURN_IF_ERROR(prepare_out(a.out));
  // "host": what a real out-of-memory would hit — the memory left once the
  // weights are in (0 = unlimited where /proc cannot tell).
  if (!cuda && opt.concurrency && a.memory_budget == "host")
    opt.memory_budget = avail >= 0 ? std::max<int64_t>(avail - weights, 1) : 0;

  const bool tty = Progress::stderr_is_tty();
  if (tty)
    std::fprintf(stderr, "building %s (%s of %s weights)...\n", cfg.dir.empty() ? a.model.c_str() : cfg.dir.c_str(),
                 format_bytes(cuda ? device_weight_bytes(cfg) : weights).c_str(), cuda ? "bf16 device" : "fp32");
  Progress progress(tty);
  SweepCost cost;
  std::vector<ConfigResult> results;
  nlohmann::json device_patch;
  if (cuda) {
    RSSM_ASSIGN_OR_RETURN(results, run_cuda_sweep(cfg, a.model, opt, a.memory_budget == "device", configs, progress,
                                                  &cost, &device_patch));
  } else {
    std::unique_ptr<Model> model;
    if (!preset.empty()) {
      RSSM_ASSIGN_OR_RETURN(model, Model::random(cfg, kPresetSeed));
    } else {
      RSSM_ASSIGN_OR_RETURN(model, Model::load(a.model));
    }
    RSSM_ASSIGN_OR_RETURN(auto backend, make_backend("cpu", *model));
    BenchContext ctx(backend->config(), backend.get(), opt);
    RSSM_ASSIGN_OR_RETURN(results, run_sweep(ctx, configs, progress, &cost));
  }

  namespace fs = std::filesystem;
  nlohmann::json header;
  header["format"] = "replayssm-bench";
  header["version"] = kJsonFormatVersion;
  header["date"] = utc_now();
  header["command"] = command_line(a);
  header["model"] = preset.empty() ? a.model : "preset:" + preset;
  header["parameters"] = parameter_count(cfg);
  header["weights_bytes"] = weights;
  header["device"] = "cpu";
  header["threads"] = std::thread::hardware_concurrency();
  header["settings"] = {{"prompt_tokens", opt.prompt_tokens},
                        {"new_tokens", opt.new_tokens},
                        {"runs", opt.runs},
                        {"warmup", opt.warmup},
                        {"seed", opt.seed},
                        {"draft", draft_kind_name(opt.draft)},
                        {"checkpoint_interval", opt.checkpoint_interval},
                        {"page_size", opt.page_size},
                        {"best_of_n_temperature", opt.bon_temperature},
                        {"memory_budget", opt.concurrency ? nlohmann::json(opt.memory_budget) : nlohmann::json()},
                        {"latency_target", opt.concurrency ? nlohmann::json(opt.latency_target) : nlohmann::json()},
                        {"concurrency_limit", opt.concurrency ? nlohmann::json(opt.concurrency_limit) : nlohmann::json()}};
  header["cost"] = {{"runs", cost.runs}, {"sweep_s", cost.sweep_s},
                    {"concurrency_probes", cost.probes}, {"concurrency_search_s", cost.search_s}};
  // cuda: bf16 device weights, the device and its memory (a null patch would replace the header).
  if (device_patch.is_object()) header.merge_patch(device_patch);
  const std::string json_path = (fs::path(a.out) / "bench.json").string();
  RSSM_RETURN_IF_ERROR(write_json(json_path, header, results));
  const std::string table = format_table(results);
  {
    const std::string table_path = (fs::path(a.out) / "table.txt").string();
    std::ofstream t(table_path);
    t << header["command"].get<std::string>() << "\n" << header["date"].get<std::string>() << "\n\n" << table;
    t.flush();
    if (!t) return io_error(table_path + ": cannot write");
  }
  RSSM_ASSIGN_OR_RETURN(PlotOutcome plots, write_plots(a.out, results, a.gnuplot));
  out_scope.keep();
  std::fwrite(table.data(), 1, table.size(), stdout);
  std::printf("\n%lld runs in %.1f s", static_cast<long long>(cost.runs), cost.sweep_s);
  if (opt.concurrency)
    std::printf("; max_concurrency search: %lld probe runs in %.1f s", static_cast<long long>(cost.probes),
                cost.search_s);
  std::printf("\nwrote %s, %s/table.txt", json_path.c_str(), a.out.c_str());
  for (const std::string& p : plots.pngs) std::printf(", %s", p.c_str());
  std::printf("\n");
  for (const std::string& n : plots.notes) std::printf("note: %s\n", n.c_str());
  std::fflush(stdout);
  for (const std::string& w : plots.warnings) std::fprintf(stderr, "replayssm bench: warning: %s\n", w.c_str());
  return {};
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("--workload", a->workload,
                 "ar, spec, beam, best-of-n, tree, restore, a comma list of them, or all; or prefix (the "
                 "prefix cache's workload, its own options --prefix-*) (required)");
  app.add_option("--strategy", a->strategy,
                 "Comma list of replay, snapshot, recompute (default: all three)");
  app.add_option("--batch", a->batch,
                 "Comma list: sequences per step (beam: width; best-of-n: n; tree: children per expansion; "
                 "restore: sequences restored together)")
      ->capture_default_str();
  app.add_option("--window", a->window, "Comma list of windows W (flush every W committed tokens)")
      ->capture_default_str();
  app.add_option("--spec-t", a->spec_t, "spec: comma list of drafts per verify step T")->capture_default_str();
  app.add_option("--draft", a->draft,
                 "spec drafts: oracle (the target's greedy tokens, each right with --draft-accuracy) or ngram")
      ->capture_default_str();
  app.add_option("--draft-accuracy", a->accuracy, "spec, oracle drafts: comma list of per-token accuracies in [0, 1]")
      ->capture_default_str();
  app.add_option("--preset", a->preset, "Random-weight model: " + preset_names() + " (default tiny)");
  app.add_option("--model", a->model, "Model directory (instead of a preset)");
  app.add_option("--device", a->device,
                 "cpu or cuda: the same workloads, strategies and store options on either backend (cuda: bf16 "
                 "weights on the device)")
      ->capture_default_str();
  app.add_option("--out", a->out, "Directory for bench.json, table.txt and the plots (required; created)");
  app.add_option("--runs", a->runs, "Measured runs per configuration (median, min-max)")->capture_default_str();
  app.add_option("--warmup", a->warmup, "Discarded runs before them")->capture_default_str();
  app.add_option("--prompt-tokens", a->prompt_tokens, "Prompt length (random ids; prefill not timed)")
      ->capture_default_str();
  app.add_option("--new-tokens", a->new_tokens,
                 "Tokens per sequence (beam: per hypothesis; tree: expansions; restore: the base sequence)")
      ->capture_default_str();
  app.add_option("--memory-budget", a->memory_budget,
                 "max_concurrency: store bytes (state + KV) allowed, e.g. 256M, 8G; host (cpu default) = the "
                 "host memory left after the weights; device (cuda default) = the device memory free after them");
  app.add_option("--latency-target", a->latency_target_ms, "max_concurrency: ms per output token allowed")
      ->capture_default_str();
  app.add_option("--concurrency-limit", a->concurrency_limit, "max_concurrency: the search stops here")
      ->capture_default_str();
  app.add_flag("--no-concurrency", a->no_concurrency, "Skip the max_concurrency search (reported as null)");
  app.add_flag("--dry-run", a->dry_run,
               "List the configurations and their memory estimates, check they fit, run nothing");
  app.add_option("--checkpoint-interval", a->checkpoint_interval,
                 "K: keep an older checkpoint every K tokens (0: none; recompute: W)")
      ->capture_default_str();
  app.add_option("--page-size", a->page_size, "B: tokens per store page (1-4096)")->capture_default_str();
  app.add_option("--seed", a->seed, "Seed of prompts, oracle drafts and best-of-n sampling")
      ->check(non_negative())
      ->capture_default_str();
  app.add_option("--gnuplot", a->gnuplot, "gnuplot executable for the PNGs")->capture_default_str();
  add_prefix_bench_options(app, &a->prefix);
  return [a] { return run_bench(*a); };
}

}  // namespace replayssm::cli
