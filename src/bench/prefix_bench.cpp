// The prefix workload (see prefix_bench.h).
#include "bench/prefix_bench.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <random>

#include "core/clock.h"

namespace replayssm::bench {

namespace {

// One request of a scenario: its prompt, and for a chat the conversation
// and turn it belongs to.
struct Job {
  std::vector<int32_t> prompt;
  int64_t conv = -1, turn = 0;
};

class Tokens {
 public:
  Tokens(uint64_t seed, int64_t vocab) : rng_(seed), id_(0, static_cast<int32_t>(std::max<int64_t>(vocab, 2) - 1)) {}
  std::vector<int32_t> make(int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = id_(rng_);
    return t;
  }
  int64_t between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

 private:
  std::mt19937_64 rng_;
  std::uniform_int_distribution<int32_t> id_;
};

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int64_t scaled(double scale, int64_t n) { return std::max<int64_t>(1, static_cast<int64_t>(n * scale + 0.5)); }

// The requests known up front (a chat's first turns; its later turns are
// made as replies arrive).
std::vector<Job> initial_jobs(const std::string& scenario, const PrefixBenchOptions& o, Tokens& tk) {
  std::vector<Job> jobs;
  if (scenario == "chat") {
    for (int64_t c = 0; c < scaled(o.scale, 64); ++c)
      jobs.push_back({cat(tk.make(100), tk.make(tk.between(50, 200))), c, 0});
  } else if (scenario == "system") {
    const std::vector<int32_t> system = tk.make(scaled(o.scale, 2000));
    for (int64_t i = 0; i < scaled(o.scale, 256); ++i) jobs.push_back({cat(system, tk.make(tk.between(20, 100)))});
  } else {  // fewshot
    const std::vector<int32_t> instruction = tk.make(60);
    std::vector<std::vector<int32_t>> shots;
    for (int k = 0; k < 8; ++k) shots.push_back(tk.make(tk.between(40, 80)));
    for (int64_t i = 0; i < scaled(o.scale, 256); ++i) {
      std::vector<int32_t> p = instruction;
      const int64_t j = tk.between(0, 8);
      for (int64_t k = 0; k < j; ++k) p = cat(p, shots[size_t(k)]);
      jobs.push_back({cat(p, tk.make(tk.between(20, 60)))});
    }
  }
  return jobs;
}

int64_t lcp(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Result<PrefixCacheOptions::Mode> mode_of(const std::string& m) {
  if (m == "any") return PrefixCacheOptions::kAnyToken;
  if (m == "block") return PrefixCacheOptions::kBlockAligned;
  if (m == "node") return PrefixCacheOptions::kPerNode;
  return invalid_argument("--prefix-modes: unknown rule '" + m + "' (expected none, block, node or any)");
}

// The first token's latency of one request sent alone.
Result<double> ttft_alone(Engine& e, std::vector<int32_t> prompt, int64_t* cached) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_new_tokens = 1;
  p.stop_at_eos = false;
  double first = -1;
  const double t0 = now_seconds();
  RSSM_RETURN_IF_ERROR(e.submit(p, [&](const TokenEvent& ev) {
                          if (ev.token >= 0 && first < 0) first = now_seconds() - t0;
                          if (cached) *cached = ev.cached_tokens;
                        }).status());
  RSSM_RETURN_IF_ERROR(e.run());
  return first;
}

struct Probe {
  std::vector<int32_t> prompt;  // a hit's prefix and a fresh suffix
  int64_t m = 0;                // where it diverges
};

Result<PrefixBenchRow> run_one(Backend& backend, const std::string& scenario, const std::string& mode,
                               const PrefixBenchOptions& o, std::vector<double>* cold_suffix) {
  PrefixBenchRow row;
  row.scenario = scenario;
  row.mode = mode;
  EngineOptions eo;
  eo.state = o.state;
  eo.max_running = o.in_flight;
  eo.prefill_chunk = o.prefill_chunk;
  eo.max_batch_tokens = std::min(o.max_batch_tokens, backend.max_step_rows());
  if (mode != "none") {
    eo.prefix_cache.enabled = true;
    RSSM_ASSIGN_OR_RETURN(eo.prefix_cache.mode, mode_of(mode));
    eo.prefix_cache.max_bytes = o.cache_bytes;
    eo.prefix_cache.replay_limit = o.replay_limit;
  }
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(backend, eo));
  Tokens tk(o.seed, backend.config().vocab_size);
  std::deque<Job> ready;
  for (Job& j : initial_jobs(scenario, o, tk)) ready.push_back(std::move(j));

  struct Live {
    Job job;
    double t0 = 0, first = -1;
    int64_t cached = 0;
    std::vector<int32_t> reply;
    bool done = false;
    FinishReason reason = FinishReason::kNone;
    Status error;
  };
  std::map<Engine::RequestId, Live> live;
  std::vector<std::vector<int32_t>> available;  // what earlier requests computed, for the ideal
  std::vector<double> ttft;
  std::vector<Probe> probes;
  int64_t in_flight = 0;
  const double start = now_seconds();
  while (!ready.empty() || in_flight > 0) {
    while (in_flight < o.in_flight && !ready.empty()) {
      Job job = std::move(ready.front());
      ready.pop_front();
      int64_t ideal = 0;
      for (const std::vector<int32_t>& a : available) ideal = std::max(ideal, lcp(a, job.prompt));
      row.ideal_tokens += std::min<int64_t>(ideal, static_cast<int64_t>(job.prompt.size()) - 1);
      row.prompt_tokens += static_cast<int64_t>(job.prompt.size());
      row.requests++;
      RequestParams p;
      p.prompt = job.prompt;
      p.max_new_tokens = o.reply;
      p.stop_at_eos = false;
      auto id = engine->submit(p, [&live](const TokenEvent& ev) {
        Live& l = live.at(ev.request);
        l.cached = ev.cached_tokens;
        if (ev.token >= 0) {
          if (l.first < 0) l.first = now_seconds() - l.t0;
          l.reply.push_back(ev.token);
        }
        if (ev.finished) l.done = true, l.reason = ev.reason, l.error = ev.error;
      });
      RSSM_RETURN_IF_ERROR(id.status());
      Live& l = live[*id];
      l.job = std::move(job);
      l.t0 = now_seconds();
      ++in_flight;
    }
    RSSM_RETURN_IF_ERROR(engine->step());
    for (auto it = live.begin(); it != live.end();) {
      Live& l = it->second;
      if (!l.done) {
        ++it;
        continue;
      }
      if (l.reply.size() != static_cast<size_t>(o.reply))  // the engine's own error first (e.g. out of budget)
        return !l.error.ok() ? Status(l.error.code(), "prefix bench (" + scenario + ", " + mode + "): " + l.error.message())
                             : io_error("prefix bench: a request ended (" + std::string(finish_reason_name(l.reason)) +
                                        ") after " + std::to_string(l.reply.size()) + " of " + std::to_string(o.reply) +
                                        " tokens");
      ttft.push_back(l.first);
      row.reused_tokens += l.cached;
      row.hits += l.cached > 0;
      std::vector<int32_t> all = cat(l.job.prompt, l.reply);
      if (l.cached > 0 && static_cast<int64_t>(probes.size()) < o.probes) {
        const int64_t m = l.cached, n = static_cast<int64_t>(l.job.prompt.size()) - m;
        std::vector<int32_t> p(l.job.prompt.begin(), l.job.prompt.begin() + m);
        probes.push_back({cat(p, tk.make(n)), m});
      }
      if (l.job.conv >= 0 && l.job.turn + 1 < 8)
        ready.push_back({cat(all, tk.make(tk.between(50, 200))), l.job.conv, l.job.turn + 1});
      available.push_back(std::move(all));
      --in_flight;
      it = live.erase(it);
    }
  }
  row.seconds = now_seconds() - start;
  const EngineStats& s = engine->stats();
  row.hit_rate = row.prompt_tokens ? static_cast<double>(row.reused_tokens) / row.prompt_tokens : 0.0;
  row.ideal_ratio = row.ideal_tokens ? static_cast<double>(row.reused_tokens) / row.ideal_tokens : 0.0;
  row.ttft_p50 = percentile(ttft, 0.5);
  row.ttft_p95 = percentile(ttft, 0.95);
  row.cache_state_bytes = s.prefix_state_bytes;
  row.cache_kv_bytes = s.prefix_kv_bytes;
  row.cache_entries = s.prefix_entries;
  if (s.prefix_hits > 0) {
    row.replayed_per_hit = static_cast<double>(s.prefix_replay_tokens) / s.prefix_hits;
    row.rerun_per_hit = static_cast<double>(s.prefix_rerun_tokens) / s.prefix_hits;
  }
  // Hits alone, on the warm cache; then (another engine: one session holds
  // a backend) their suffixes cold.
  std::vector<double> hit_alone;
  std::vector<std::vector<int32_t>> suffixes;
  for (const Probe& pr : probes) {
    int64_t cached = 0;
    RSSM_ASSIGN_OR_RETURN(const double t, ttft_alone(*engine, pr.prompt, &cached));
    if (cached != pr.m) continue;  // the probe must hit where its request did
    hit_alone.push_back(t);
    suffixes.emplace_back(pr.prompt.begin() + pr.m, pr.prompt.end());
  }
  engine.reset();
  if (!hit_alone.empty()) {
    EngineOptions cold = eo;
    cold.prefix_cache = PrefixCacheOptions{};
    RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Engine> c, Engine::create(backend, cold));
    std::vector<double> ratios;
    for (size_t i = 0; i < suffixes.size(); ++i) {
      RSSM_ASSIGN_OR_RETURN(const double t, ttft_alone(*c, suffixes[i], nullptr));
      cold_suffix->push_back(t);
      if (t > 0) ratios.push_back(hit_alone[i] / t);
    }
    row.probe_ratio = percentile(ratios, 0.5);
  }
  return row;
}

}  // namespace

Status check_prefix_bench_options(const PrefixBenchOptions& o) {
  for (const std::string& s : o.scenarios)
    if (s != "chat" && s != "system" && s != "fewshot")
      return invalid_argument("--prefix-scenarios: unknown scenario '" + s + "' (expected chat, system or fewshot)");
  for (const std::string& m : o.modes)
    if (m != "none") RSSM_RETURN_IF_ERROR(mode_of(m).status());
  if (!(o.scale > 0) || o.scale > 64) return invalid_argument("--prefix-scale: must be in (0, 64]");
  if (o.reply < 1) return invalid_argument("--new-tokens: must be >= 1 for the prefix workload");
  if (o.in_flight < 1) return invalid_argument("--batch: requests in flight must be >= 1");
  if (o.cache_bytes < 0) return invalid_argument("--prefix-cache-bytes: must be >= 0");
  if (o.replay_limit < 1) return invalid_argument("--prefix-replay-limit: must be >= 1");
  return o.state.validate();
}

Result<std::vector<PrefixBenchRow>> run_prefix_bench(Backend& backend, const PrefixBenchOptions& o) {
  RSSM_RETURN_IF_ERROR(check_prefix_bench_options(o));
  std::vector<PrefixBenchRow> rows;
  for (const std::string& scenario : o.scenarios)
    for (const std::string& mode : o.modes) {
      std::vector<double> cold;
      RSSM_ASSIGN_OR_RETURN(PrefixBenchRow r, run_one(backend, scenario, mode, o, &cold));
      std::fprintf(stderr, "prefix bench: %s / %s: %lld requests, hit rate %.3f, %.1f s\n", scenario.c_str(),
                   mode.c_str(), static_cast<long long>(r.requests), r.hit_rate, r.seconds);
      rows.push_back(std::move(r));
    }
  return rows;
}

std::string prefix_bench_table(const std::vector<PrefixBenchRow>& rows) {
  std::string s;
  char line[400];
  std::snprintf(line, sizeof line, "%-8s %-6s %8s %8s %8s %8s %10s %10s %12s %12s %8s %8s %8s %8s\n", "scenario",
                "rule", "requests", "hits", "hit_rate", "of_ideal", "ttft_p50", "ttft_p95", "cache_state",
                "cache_kv", "entries", "replay", "rerun", "probe");
  s += line;
  for (const PrefixBenchRow& r : rows) {
    std::snprintf(line, sizeof line,
                  "%-8s %-6s %8lld %8lld %8.3f %8.3f %8.2fms %8.2fms %12lld %12lld %8lld %8.1f %8.1f %7.2fx\n",
                  r.scenario.c_str(), r.mode.c_str(), static_cast<long long>(r.requests),
                  static_cast<long long>(r.hits), r.hit_rate, r.ideal_ratio, r.ttft_p50 * 1e3, r.ttft_p95 * 1e3,
                  static_cast<long long>(r.cache_state_bytes), static_cast<long long>(r.cache_kv_bytes),
                  static_cast<long long>(r.cache_entries), r.replayed_per_hit, r.rerun_per_hit, r.probe_ratio);
    s += line;
  }
  return s;
}

}  // namespace replayssm::bench
