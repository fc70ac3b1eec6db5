// The max_concurrency search (the seed's "maximum sustainable concurrency,
// measured by stepping batch size up until you hit an out-of-memory error
// or a latency target").
//
// The answer is bracketed by measured runs only: the largest batch seen
// within both limits (ok) and the smallest seen breaking one (fail), until
// fail − ok ≤ max(1, ok/4): finer than that is below the run-to-run noise
// of latency on a CPU. Probes are one run each (the process is warm from
// the sweep), so they are what the search costs. To spend few of them the
// first probe goes where the sweep's own results point: time per token
// and store bytes are close to linear in the batch, so the line through the
// two largest measured batches predicts where a limit is crossed; the next
// probe sits one resolution step beyond that guess (or below it, if the
// guess failed), which usually closes the bracket in two runs. Whenever a
// guess is wrong the search falls back to doubling from ok, then bisecting.
// Memory is the store's peak (state + KV): what grows with concurrency,
// weights aside. A probe the runner says cannot be held (CPU: it would not
// fit in host memory by estimate) is not run, and one whose run fails out
// of budget (a device: its backend cannot allocate it) is not measured; both
// count as that limit ("host memory", "device memory"). Both limits are
// assumed monotone in the batch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "bench/sweep.h"
#include "bench/workloads.h"

namespace replayssm::bench {

namespace {

struct Observed {
  int64_t batch;
  double tpot;
  double bytes;
};

// The batch where the line through the two largest observations reaches
// `limit` (or, with one observation, where a proportional growth does).
std::optional<double> crossing(const std::vector<Observed>& obs, double limit, double Observed::*field) {
  if (obs.empty() || !(limit > 0)) return std::nullopt;
  const Observed& b = obs.back();
  if (obs.size() == 1) {
    if (!(b.*field > 0)) return std::nullopt;
    return static_cast<double>(b.batch) * limit / (b.*field);
  }
  const Observed& a = obs[obs.size() - 2];
  const double slope = (b.*field - a.*field) / static_cast<double>(b.batch - a.batch);
  if (!(slope > 0)) return std::nullopt;
  return static_cast<double>(b.batch) + (limit - b.*field) / slope;
}

}  // namespace

Result<ConcurrencyResult> search_max_concurrency(BenchContext& ctx, const Config& series,
                                                 const std::vector<const ConfigResult*>& measured) {
  BackendRunner runner(ctx);
  return search_max_concurrency(runner, series, measured);
}

Result<ConcurrencyResult> search_max_concurrency(Runner& runner, const Config& series,
                                                 const std::vector<const ConfigResult*>& measured) {
  const SweepOptions& opt = runner.options();
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  ConcurrencyResult res;
  int64_t ok = 0, fail = kNone;
  std::string fail_reason;
  std::vector<Observed> obs;
  for (const ConfigResult* r : measured)
    obs.push_back({r->config.batch, r->time_per_output_token.median,
                   static_cast<double>(r->peak_state_bytes + r->peak_kv_bytes)});
  std::sort(obs.begin(), obs.end(), [](const Observed& a, const Observed& b) { return a.batch < b.batch; });
  auto record = [&](int64_t b, const std::string& why) {
    if (why.empty()) {
      ok = std::max(ok, std::min(b, opt.concurrency_limit));
    } else if (b < fail) {
      fail = b;
      fail_reason = why;
    }
  };
  for (const Observed& o : obs) record(o.batch, breaks_limit(opt, static_cast<int64_t>(o.bytes), o.tpot));
  if (ok >= fail) ok = 0;  // noise made a smaller batch fail: trust only what lies below it
  for (const Observed& o : obs)
    if (o.batch < fail && breaks_limit(opt, static_cast<int64_t>(o.bytes), o.tpot).empty()) ok = std::max(ok, o.batch);

  auto probe = [&](int64_t b) -> Status {
    Config c = series;
    c.batch = b;
    if (const std::string why = runner.cannot_hold(c); !why.empty()) {
      record(b, why);
      return {};
    }
    res.probes++;
    Result<Measurement> run = runner.run(c);
    if (!run.ok() && run.status().code() == StatusCode::kOutOfBudget) {
      record(b, runner.out_of_budget_limit());
      return {};
    }
    RSSM_ASSIGN_OR_RETURN(Measurement m, std::move(run));
    record(b, breaks_limit(opt, m.state.state_bytes_peak + m.state.kv_bytes_peak, m.time_per_output_token(b)));
    return {};
  };
  auto step = [](int64_t b) { return std::max<int64_t>(1, b / 4); };
  auto done = [&] { return ok >= opt.concurrency_limit || (fail != kNone && fail - ok <= step(ok)); };

  // The guess: where the sweep's own trend crosses the nearer limit.
  std::optional<double> guess;
  for (const auto& g : {crossing(obs, opt.latency_target, &Observed::tpot),
                        crossing(obs, static_cast<double>(opt.memory_budget), &Observed::bytes)})
    if (g && (!guess || *g < *guess)) guess = g;
  if (guess && !done()) {
    const int64_t g = std::clamp<int64_t>(static_cast<int64_t>(std::floor(*guess)), ok + 1,
                                          std::min(fail == kNone ? opt.concurrency_limit : fail - 1, opt.concurrency_limit));
    if (g > ok && g < fail) {
      RSSM_RETURN_IF_ERROR(probe(g));
      // Close the bracket from the side the guess landed on.
      const int64_t next = ok == g ? g + step(g) : g - step(g);
      if (!done() && next > ok && next < fail && next <= opt.concurrency_limit) RSSM_RETURN_IF_ERROR(probe(next));
    }
  }
  while (!done()) {
    const int64_t b = std::min(fail == kNone ? (ok == 0 ? 1 : 2 * ok) : ok + (fail - ok) / 2, opt.concurrency_limit);
    RSSM_RETURN_IF_ERROR(probe(b));
  }
  res.value = ok;
  res.limited_by = ok >= opt.concurrency_limit || fail == kNone ? "limit" : fail_reason;
  return res;
}

}  // namespace replayssm::bench
