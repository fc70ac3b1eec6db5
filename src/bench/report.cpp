// JSON and table output (see report.h). Times in the JSON are seconds and
// bytes are bytes (SI, no scaling); the table shows ms and KiB/MiB.
#include "bench/report.h"

#include <cstdio>
#include <fstream>

#include "bench/memory.h"

namespace replayssm::bench {

namespace {

nlohmann::json summary_json(const Summary& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

std::string ms_range(const Summary& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f [%.3f-%.3f]", s.median * 1e3, s.min * 1e3, s.max * 1e3);
  return buf;
}

}  // namespace

nlohmann::json config_json(const ConfigResult& r) {
  const Config& c = r.config;
  nlohmann::json j;
  j["workload"] = workload_name(c.workload);
  j["strategy"] = strategy_name(c.strategy);
  j["batch"] = c.batch;
  j["window"] = c.window;
  j["spec_t"] = c.workload == Workload::kSpec ? nlohmann::json(c.spec_t) : nlohmann::json();
  j["draft_accuracy"] = c.draft_accuracy >= 0.0 ? nlohmann::json(c.draft_accuracy) : nlohmann::json();
  j["log_retention"] = c.log_retention;
  j["time_per_output_token"] = summary_json(r.time_per_output_token);
  j["tokens_per_s"] = summary_json(r.tokens_per_s);
  j["peak_state_bytes"] = r.peak_state_bytes;
  j["peak_kv_bytes"] = r.peak_kv_bytes;
  j["peak_device_bytes"] = r.peak_device_bytes;
  j["peak_rss_bytes"] = r.peak_rss_bytes >= 0 ? nlohmann::json(r.peak_rss_bytes) : nlohmann::json();
  j["state_writes_bytes"] = r.state_writes_bytes;
  if (r.max_concurrency) {
    j["max_concurrency"] = r.max_concurrency->value;
    j["max_concurrency_limited_by"] = r.max_concurrency->limited_by;
  } else {
    j["max_concurrency"] = nullptr;
    j["max_concurrency_limited_by"] = nullptr;
  }
  j["acceptance_rate"] = r.acceptance_rate ? nlohmann::json(*r.acceptance_rate) : nlohmann::json();
  j["rollback_cost"] = r.rollback_cost ? summary_json(*r.rollback_cost) : nlohmann::json();
  if (c.workload == Workload::kRestore) {
    nlohmann::json pts = nlohmann::json::array();
    for (const RestorePoint& p : r.restore_latency)
      pts.push_back({{"position", p.position},
                     {"distance", p.distance},
                     {"path", restore_path_name(p.path)},
                     {"seconds", summary_json(p.seconds)}});
    j["restore_latency"] = pts;
  } else {
    j["restore_latency"] = nullptr;
  }
  j["restores"] = {{"checkpoint", r.restores_checkpoint},
                   {"log_replay", r.restores_log_replay},
                   {"reprefill", r.restores_reprefill}};
  return j;
}

Status write_json(const std::string& path, nlohmann::json header, const std::vector<ConfigResult>& results) {
  header["configurations"] = nlohmann::json::array();
  for (const ConfigResult& r : results) header["configurations"].push_back(config_json(r));
  std::ofstream out(path);
  if (!out) return io_error(path + ": cannot write");
  out << header.dump(2) << "\n";
  out.flush();
  if (!out) return io_error(path + ": write failed");
  return {};
}

std::string format_table(const std::vector<ConfigResult>& results) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-9s %-9s %6s %4s %3s %5s %8s | %-26s %-26s %10s %10s %9s %7s %-22s\n",
                "workload", "strategy", "batch", "W", "T", "acc", "log", "tokens/s median [min-max]",
                "ms/token median [min-max]", "state peak", "dev peak", "max conc", "accept",
                "rollback ms/rejection");
  s += line;
  s += std::string(180, '-') + "\n";
  for (const ConfigResult& r : results) {
    const Config& c = r.config;
    char tps[64], acc[16], T[16], accept[16], conc[32], log[16];
    std::snprintf(tps, sizeof tps, "%.1f [%.1f-%.1f]", r.tokens_per_s.median, r.tokens_per_s.min, r.tokens_per_s.max);
    std::snprintf(T, sizeof T, "%s", c.spec_t > 0 ? std::to_string(c.spec_t).c_str() : "-");
    if (c.draft_accuracy >= 0) std::snprintf(acc, sizeof acc, "%.2f", c.draft_accuracy);
    else std::snprintf(acc, sizeof acc, "-");
    if (r.acceptance_rate) std::snprintf(accept, sizeof accept, "%.3f", *r.acceptance_rate);
    else std::snprintf(accept, sizeof accept, "-");
    if (r.max_concurrency)
      std::snprintf(conc, sizeof conc, "%lld%s", static_cast<long long>(r.max_concurrency->value),
                    r.max_concurrency->limited_by == "latency"         ? "L"
                    : r.max_concurrency->limited_by == "memory"        ? "M"
                    : r.max_concurrency->limited_by == "limit"         ? "+"
                    : r.max_concurrency->limited_by == "device memory" ? "D"
                                                                       : "H");
    else std::snprintf(conc, sizeof conc, "-");
    std::snprintf(log, sizeof log, "%s",
                  c.workload == Workload::kRestore && c.strategy == Strategy::kReplay
                      ? (c.log_retention < 0 ? "all" : std::to_string(c.log_retention).c_str())
                      : "-");
    std::snprintf(line, sizeof line, "%-9s %-9s %6lld %4lld %3s %5s %8s | %-26s %-26s %10s %10s %9s %7s %-22s\n",
                  workload_name(c.workload), strategy_name(c.strategy), static_cast<long long>(c.batch),
                  static_cast<long long>(c.window), T, acc, log, tps, ms_range(r.time_per_output_token).c_str(),
                  format_bytes(r.peak_state_bytes).c_str(), format_bytes(r.peak_device_bytes).c_str(), conc, accept,
                  r.rollback_cost ? ms_range(*r.rollback_cost).c_str() : "-");
    s += line;
  }
  s += "max conc: L = latency target reached, M = memory budget, H = host memory, D = device memory, "
       "+ = search limit\n";
  bool any_restore = false;
  for (const ConfigResult& r : results) any_restore |= !r.restore_latency.empty();
  if (!any_restore) return s;
  s += "\nrestore(p) + one step, ms median [min-max]\n";
  std::snprintf(line, sizeof line, "%-40s %6s %8s %8s %-10s %s\n", "series", "batch", "position", "distance", "path",
                "latency");
  s += line;
  for (const ConfigResult& r : results)
    for (const RestorePoint& p : r.restore_latency) {
      std::snprintf(line, sizeof line, "%-40s %6lld %8lld %8lld %-10s %s\n", r.config.series().c_str(),
                    static_cast<long long>(r.config.batch), static_cast<long long>(p.position),
                    static_cast<long long>(p.distance), restore_path_name(p.path), ms_range(p.seconds).c_str());
      s += line;
    }
  return s;
}

}  // namespace replayssm::bench
