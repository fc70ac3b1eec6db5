// Names and validation of the state options (replayssm/state.h).
#include <string>

#include "replayssm/state.h"

namespace replayssm {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kReplay: return "replay";
    case Strategy::kSnapshot: return "snapshot";
    case Strategy::kRecompute: return "recompute";
  }
  return "?";
}

Result<Strategy> parse_strategy(std::string_view name) {
  for (Strategy s : {Strategy::kReplay, Strategy::kSnapshot, Strategy::kRecompute})
    if (name == strategy_name(s)) return s;
  return invalid_argument("--strategy: unknown strategy '" + std::string(name) +
                          "' (expected replay, snapshot or recompute)");
}

const char* eviction_name(EvictionPolicy e) { return e == EvictionPolicy::kLru ? "lru" : "cost"; }

Result<EvictionPolicy> parse_eviction(std::string_view name) {
  if (name == "lru") return EvictionPolicy::kLru;
  if (name == "cost") return EvictionPolicy::kCostAware;
  return invalid_argument("--eviction: unknown policy '" + std::string(name) + "' (expected lru or cost)");
}

const char* restore_path_name(RestorePath p) {
  switch (p) {
    case RestorePath::kCheckpoint: return "checkpoint";
    case RestorePath::kLogReplay: return "log_replay";
    case RestorePath::kReprefill: return "reprefill";
  }
  return "?";
}

Status StateOptions::validate() const {
  if (strategy != Strategy::kReplay && strategy != Strategy::kSnapshot && strategy != Strategy::kRecompute)
    return invalid_argument("strategy: " + std::to_string(int(strategy)) + " is not a Strategy");
  if (eviction != EvictionPolicy::kCostAware && eviction != EvictionPolicy::kLru)
    return invalid_argument("eviction: " + std::to_string(int(eviction)) + " is not an EvictionPolicy");
  if (window < 1) return invalid_argument("--window: must be >= 1, got " + std::to_string(window));
  if (checkpoint_interval < 0)
    return invalid_argument("--checkpoint-interval: must be >= 0, got " + std::to_string(checkpoint_interval));
  if (page_size < 1 || page_size > kMaxPageSize)
    return invalid_argument("--page-size: must be in [1, " + std::to_string(kMaxPageSize) + "], got " +
                            std::to_string(page_size));
  if (log_retention < -1)
    return invalid_argument("--log-retention: must be >= -1, got " + std::to_string(log_retention));
  if (state_budget < 0) return invalid_argument("--state-budget: must be >= 0, got " + std::to_string(state_budget));
  if (replay_limit != 0 && replay_limit < window)
    return invalid_argument("--replay-limit: must be 0 (4 x --window) or >= --window (" + std::to_string(window) +
                            "), got " + std::to_string(replay_limit));
  return {};
}

}  // namespace replayssm
