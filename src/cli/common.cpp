// Shared CLI helpers (see common.h).
#include "cli/common.h"

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

Status check_device(const std::string& device) {
  if (device == "cpu") return {};
  if (device == "cuda") {
#if REPLAYSSM_HAVE_CUDA
    return {};
#else
    return unsupported("--device cuda: this build has no CUDA backend (nvcc was not found at configure time)");
#endif
  }
  return invalid_argument("--device: unknown device '" + device + "' (expected cpu or cuda)");
}

Status check_cuda_state(const StateArgs& a) {
  const StateArgs d;
  if (a.strategy != "replay" && a.strategy != "snapshot" && a.strategy != "recompute")
    return invalid_argument("--strategy: unknown strategy '" + a.strategy + "' (expected replay, snapshot or recompute)");
  if (a.checkpoint_interval != d.checkpoint_interval || a.state_budget != d.state_budget ||
      a.log_retention != d.log_retention || a.replay_limit != d.replay_limit || a.eviction != d.eviction ||
      a.page_size != d.page_size)
    return unsupported("--device cuda: only --strategy, --window and --exact apply on cuda (--checkpoint-interval, "
                       "--state-budget, --log-retention, --replay-limit, --eviction and --page-size configure the CPU "
                       "store)");
  if (a.exact && a.strategy != "replay")
    return invalid_argument("--exact: exact replay needs --strategy replay (--strategy " + a.strategy +
                            " steps the state itself)");
  if (a.strategy == "replay" && (a.window < 2 || a.window > 64))
    return invalid_argument("--window: " + std::to_string(a.window) + " out of range [2, 64] on cuda");
  if (a.strategy == "recompute" && (a.window < 1 || a.window > (1 << 20)))
    return invalid_argument("--window: " + std::to_string(a.window) + " out of range [1, 1048576] on cuda (recompute: "
                            "the sparse checkpoints' interval)");
  return {};
}

#if REPLAYSSM_HAVE_CUDA
cuda::DecodeStrategy cuda_strategy(const StateArgs& a) {
  return a.strategy == "snapshot"    ? cuda::DecodeStrategy::kStandard
         : a.strategy == "recompute" ? cuda::DecodeStrategy::kRecompute
                                     : cuda::DecodeStrategy::kReplay;
}
#endif

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

Result<StateOptions> state_options(const StateArgs& a) {
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
