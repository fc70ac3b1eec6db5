// The max_concurrency search (the seed's "maximum sustainable concurrency,
// measured by stepping batch size up until you hit an out-of-memory error
// or a latency target"). The batch of a series is doubled from the largest
// measured batch that stays within both limits until a probe breaks one
// (or the search limit is reached), then bisected until the gap between the
// best passing and the first failing batch is at most 1/8 of the former.
// A probe is one run (the process is warm from the sweep). Memory is the
// store's peak (state + KV): what grows with concurrency, weights aside. A
// probe that would not fit in host memory by estimate is not run and
// counts as "host memory". Assumes both limits are monotone in the batch.
#include <algorithm>
#include <limits>

#include "bench/memory.h"
#include "bench/sweep.h"

namespace replayssm::bench {

Result<ConcurrencyResult> search_max_concurrency(BenchContext& ctx, const Config& series,
                                                 const std::vector<const ConfigResult*>& measured) {
  const SweepOptions& opt = ctx.options();
  ConcurrencyResult res;
  int64_t ok = 0, fail = std::numeric_limits<int64_t>::max();
  std::string fail_reason;
  // The sweep's own results: the largest passing batch below the smallest failing one.
  for (const ConfigResult* r : measured) {
    const std::string why = breaks_limit(opt, r->peak_state_bytes + r->peak_kv_bytes, r->time_per_output_token.median);
    if (!why.empty() && r->config.batch < fail) {
      fail = r->config.batch;
      fail_reason = why;
    }
  }
  for (const ConfigResult* r : measured)
    if (r->config.batch < fail && breaks_limit(opt, r->peak_state_bytes + r->peak_kv_bytes,
                                               r->time_per_output_token.median).empty())
      ok = std::max(ok, std::min(r->config.batch, opt.concurrency_limit));

  auto probe = [&](int64_t b) -> Result<std::string> {
    Config c = series;
    c.batch = b;
    const int64_t need = estimate_run_bytes(ctx.model().config(), c, opt), avail = available_memory_bytes();
    if (avail >= 0 && need > avail) return std::string("host memory");
    res.probes++;
    RSSM_ASSIGN_OR_RETURN(Measurement m, run_once(ctx, c));
    return breaks_limit(opt, m.store.state_bytes_peak + m.store.kv_bytes_peak, m.time_per_output_token(b));
  };

  while (fail == std::numeric_limits<int64_t>::max()) {
    if (ok >= opt.concurrency_limit) {
      res.value = ok;
      res.limited_by = "limit";
      return res;
    }
    const int64_t b = std::min(ok == 0 ? 1 : 2 * ok, opt.concurrency_limit);
    RSSM_ASSIGN_OR_RETURN(std::string why, probe(b));
    if (why.empty()) ok = b;
    else {
      fail = b;
      fail_reason = why;
    }
  }
  while (fail - ok > std::max<int64_t>(1, ok / 8)) {
    const int64_t b = ok + (fail - ok) / 2;
    RSSM_ASSIGN_OR_RETURN(std::string why, probe(b));
    if (why.empty()) ok = b;
    else {
      fail = b;
      fail_reason = why;
    }
  }
  res.value = ok;
  res.limited_by = fail_reason;
  return res;
}

}  // namespace replayssm::bench
