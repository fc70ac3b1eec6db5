// `replayssm bench --workload prefix`: the prefix-cache workload
// (src/bench/prefix_bench.h) — its options and its run, apart from the
// sweep of the other workloads.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "replayssm/status.h"

namespace replayssm::cli {

struct PrefixBenchArgs {
  std::string scenarios = "chat,system,fewshot", modes = "none,block,node,any";
  double scale = 1.0;
  int64_t in_flight = 16, reply = 32, cache_bytes = 0, replay_limit = 256, probes = 8;
};
void add_prefix_bench_options(CLI::App& app, PrefixBenchArgs* a);

// What the rest of `bench` passes on: the model, the device, the outputs.
struct PrefixBenchTarget {
  std::string device, preset, model, out;
  uint64_t seed = 0;
  int64_t page_size = 4, window = 16;
};
Status run_bench_prefix(const PrefixBenchArgs& a, const PrefixBenchTarget& t);

}  // namespace replayssm::cli
