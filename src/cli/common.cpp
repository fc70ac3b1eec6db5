// Shared CLI helpers (see common.h).
#include "cli/common.h"

#include "replayssm/make_backend.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace replayssm::cli {

Result<std::vector<int32_t>> parse_ids(const std::string& text, const std::string& option) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > std::numeric_limits<int32_t>::max())
      return invalid_argument(option + ": '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    start = end + 1;
  }
  return ids;
}

Status check_device(const std::string& device) { return device_available(device); }

CLI::Validator non_negative() {
  return CLI::Validator(
      [](const std::string& v) { return !v.empty() && v[0] == '-' ? std::string("must be >= 0, got " + v) : std::string(); },
      "NONNEGATIVE");
}

void add_state_options(CLI::App& app, StateArgs* a) {
  app.add_option("--strategy", a->strategy, "State storage: replay, snapshot or recompute")->capture_default_str();
  app.add_option("--window", a->window, "W: fold committed log entries into a checkpoint every W tokens")
      ->capture_default_str();
  app.add_option("--checkpoint-interval", a->checkpoint_interval,
                 "K: keep an older checkpoint every K tokens (recompute: sparse interval; 0 = W)")
      ->capture_default_str();
  app.add_option("--page-size", a->page_size, "B: tokens per page (1-4096)")->capture_default_str();
  app.add_option("--log-retention", a->log_retention,
                 "Log tokens kept below the live checkpoint, for cheap far restores (-1 = all)")
      ->capture_default_str();
  app.add_option("--state-budget", a->state_budget, "Bytes for checkpoints + logs (0 = unlimited)")
      ->capture_default_str();
  app.add_option("--replay-limit", a->replay_limit,
                 "Most log entries a forked sequence's step replays before its family writes a checkpoint "
                 "(0 = 4 x W; else >= W)")
      ->capture_default_str();
  app.add_option("--eviction", a->eviction, "Eviction policy under the budget: cost or lru")->capture_default_str();
  app.add_flag("--exact", a->exact, "Bit-identical to stepwise decoding (sequential replay)");
}

Result<StateOptions> state_options(const StateArgs& a, const std::string& device) {
  StateOptions o;
  RSSM_ASSIGN_OR_RETURN(o.strategy, parse_strategy(a.strategy));
  RSSM_ASSIGN_OR_RETURN(o.eviction, parse_eviction(a.eviction));
  o.window = a.window;
  o.checkpoint_interval = a.checkpoint_interval;
  o.page_size = a.page_size;
  o.log_retention = a.log_retention;
  o.state_budget = a.state_budget;
  o.replay_limit = a.replay_limit;
  o.exact = a.exact;
  RSSM_RETURN_IF_ERROR(o.validate());
  RSSM_RETURN_IF_ERROR(check_state_options(device, o));  // the device's own rule, before a model is loaded
  return o;
}

std::string float_json(float x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(x));
  return buf;
}

}  // namespace replayssm::cli
