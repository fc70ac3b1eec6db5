// The restore workload: restore(p) latency against the distance the chosen
// path must cover. A base sequence of prompt + new_tokens tokens is decoded
// (not timed); then for positions p = 1, 2, 4, ... and L − 1, `batch` forks
// of it are restored to p (StateManager::restore, then Session::ensure_ready
// for the re-prefills, batched) and stepped once together with the token
// that follows p. The timed span is the restores plus that step: a log
// replay happens lazily inside the step, a re-prefill before it, so only
// the sum compares the paths fairly. Forks are made and released outside
// the clock.
#include <algorithm>

#include "bench/workloads.h"
#include "core/clock.h"
#include "workloads/session.h"

namespace replayssm::bench {

std::vector<int64_t> restore_positions(int64_t L) {
  std::vector<int64_t> ps;
  for (int64_t p = 1; p < L - 1; p *= 2) ps.push_back(p);
  ps.push_back(L - 1);
  return ps;
}

Result<Measurement> run_restore(BenchContext& ctx, const Config& c) {
  const SweepOptions& opt = ctx.options();
  Backend& backend = ctx.backend();
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(backend, ctx.state_options(c)));
  StateManager& st = session->state();
  const int64_t base = st.add_sequence();
  const std::span<const int32_t> prompts[1] = {ctx.prompt(0)};
  const int64_t bases[1] = {base};
  RSSM_RETURN_IF_ERROR(session->prefill(bases, prompts, [](size_t, int64_t) { return Status(); }));
  const int64_t row0 = 0;
  for (int64_t i = 0; i < opt.new_tokens; ++i) {
    int32_t t = 0;
    RSSM_RETURN_IF_ERROR(backend.argmax({&row0, 1}, &t));
    const StepInput in{base, {&t, 1}};
    RSSM_RETURN_IF_ERROR(session->step({&in, 1}));
  }
  const std::vector<int32_t> tokens(st.tokens(base).begin(), st.tokens(base).end());
  const int64_t L = static_cast<int64_t>(tokens.size());
  Measurement m;
  for (int64_t p : restore_positions(L)) {
    std::vector<int64_t> forks;
    for (int64_t b = 0; b < c.batch; ++b) {
      RSSM_ASSIGN_OR_RETURN(const int64_t f, st.fork(base));
      forks.push_back(f);
    }
    std::vector<StepInput> in;
    for (int64_t f : forks) in.push_back({f, {&tokens[static_cast<size_t>(p)], 1}});
    RestorePlan plan;
    const double t0 = now_seconds();
    for (int64_t f : forks) {
      RSSM_ASSIGN_OR_RETURN(plan, st.restore(f, p));
    }
    // Re-prefills of the whole batch in one rebuild step, as Session::step
    // would do them; log replays happen inside the step itself.
    RSSM_RETURN_IF_ERROR(session->ensure_ready(forks));
    RSSM_RETURN_IF_ERROR(session->step(in));
    const double dt = now_seconds() - t0;
    for (int64_t f : forks) RSSM_RETURN_IF_ERROR(session->release(f));
    m.restores.push_back({p, plan.to - plan.from, plan.path, dt});
    m.decode_s += dt;
    m.emitted += c.batch;
  }
  m.state = st.stats();
  return m;
}

}  // namespace replayssm::bench
