// Runner: who runs one configuration of a sweep — BackendRunner
// (workloads.h) over any backend, or a test's stand-in.
// The sweep, its summaries and the max_concurrency search (sweep.h) see
// only this, so every device reports the same metrics the same way.
#pragma once

#include <string>

#include "bench/bench.h"

namespace replayssm::bench {

// Not thread-safe; one sweep at a time.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual const SweepOptions& options() const = 0;
  // One run of `c`: decode time, tokens, the store's (or device's) bytes.
  // A kOutOfBudget status during the max_concurrency search means `c` does
  // not fit (the limit out_of_budget_limit() names); during the sweep it is
  // an error like any other.
  virtual Result<Measurement> run(const Config& c) = 0;
  // Before a search probe: "" when `c` may be run, else the limit that
  // stops it without running it (e.g. "host memory", by estimate).
  virtual std::string cannot_hold(const Config& c) = 0;
  virtual std::string out_of_budget_limit() const = 0;
};

}  // namespace replayssm::bench
