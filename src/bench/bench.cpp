// Names, parsing and summaries of the benchmark's vocabulary (bench.h).
#include "bench/bench.h"

#include <algorithm>
#include <cstdio>

namespace replayssm::bench {

const char* workload_name(Workload w) {
  switch (w) {
    case Workload::kAr: return "ar";
    case Workload::kSpec: return "spec";
    case Workload::kBeam: return "beam";
    case Workload::kBestOfN: return "best-of-n";
    case Workload::kTree: return "tree";
    case Workload::kRestore: return "restore";
  }
  return "?";
}

std::vector<Workload> all_workloads() {
  return {Workload::kAr, Workload::kSpec, Workload::kBeam, Workload::kBestOfN, Workload::kTree, Workload::kRestore};
}

Result<Workload> parse_workload(std::string_view name) {
  for (Workload w : all_workloads())
    if (name == workload_name(w)) return w;
  return invalid_argument("--workload: unknown workload '" + std::string(name) +
                          "' (expected ar, spec, beam, best-of-n, tree, restore or all)");
}

const char* draft_kind_name(DraftKind d) { return d == DraftKind::kOracle ? "oracle" : "ngram"; }

std::string Config::series() const {
  std::string s = std::string(workload_name(workload)) + " " + strategy_name(strategy);
  if (workload == Workload::kRestore && strategy == Strategy::kReplay)
    s += log_retention < 0 ? " log=all" : " log=" + std::to_string(log_retention);
  s += " W=" + std::to_string(window);
  if (spec_t > 0) s += " T=" + std::to_string(spec_t);
  if (draft_accuracy >= 0.0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " acc=%g", draft_accuracy);
    s += buf;
  }
  return s;
}

std::string Config::describe() const { return series() + " batch=" + std::to_string(batch); }

Summary Summary::of(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

}  // namespace replayssm::bench
