// The benchmark's vocabulary: workloads, one configuration of a sweep, what
// one run measures, and the summary of a configuration's runs
// (docs/bench.md defines every metric).
//
// Dimension letters: B batch (concurrent sequences of one step), W window,
// T drafts per verify step, L sequence length (prompt + new tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "replayssm/state.h"
#include "workloads/generate.h"
#include "replayssm/status.h"

namespace replayssm::bench {

enum class Workload { kAr, kSpec, kBeam, kBestOfN, kTree, kRestore };
const char* workload_name(Workload w);
Result<Workload> parse_workload(std::string_view name);  // errors name --workload
std::vector<Workload> all_workloads();

// Where speculative drafts come from.
enum class DraftKind {
  kOracle,  // the target's own greedy continuation, each token kept with probability `accuracy`
  kNgram,   // prompt lookup (NgramDraft), acceptance as it falls
};
const char* draft_kind_name(DraftKind d);

// Settings shared by every configuration of a sweep.
struct SweepOptions {
  int64_t prompt_tokens = 32;      // per sequence, random ids
  int64_t new_tokens = 64;         // per sequence (beam: per hypothesis; tree: expansions)
  int64_t runs = 3;                // measured runs per configuration
  int64_t warmup = 1;              // discarded runs before them
  uint64_t seed = 0;               // prompts, oracle drafts, best-of-n sampling
  DraftKind draft = DraftKind::kOracle;
  int64_t checkpoint_interval = 0; // K for every state manager (restore: older checkpoints kept)
  int64_t page_size = 4;           // B of the state manager's pages
  float bon_temperature = 1.0f;    // best-of-n sampling temperature
  // max_concurrency search; a disabled search reports null.
  bool concurrency = true;
  int64_t memory_budget = 0;       // bytes of state + KV at the searched batch
  double latency_target = 0.0;     // seconds per output token
  int64_t concurrency_limit = 0;   // the search stops here
};

// One point of the sweep.
struct Config {
  Workload workload = Workload::kAr;
  Strategy strategy = Strategy::kReplay;
  int64_t batch = 1;               // ar/spec: prompts; beam: width; best-of-n: n;
                                   // tree: children per expansion; restore: sequences restored together
  int64_t window = 16;             // W
  int64_t spec_t = 0;              // T (spec only)
  double draft_accuracy = -1.0;    // oracle drafts only
  int64_t log_retention = 0;       // restore under replay: -1 keeps the whole log
  // A readable key without the batch: the series a plot draws.
  std::string series() const;
  std::string describe() const;    // every field, for the progress line and errors
};

// One restore(p) probe of the restore workload.
struct RestoreSample {
  int64_t position = 0;  // p
  int64_t distance = 0;  // p − the checkpoint the path starts from
  RestorePath path = RestorePath::kCheckpoint;
  double seconds = 0.0;  // restore of the whole batch + one batched step after it
};

// What one run measures. Times are decode only: the prefill is excluded.
struct Measurement {
  double decode_s = 0.0;
  int64_t emitted = 0;             // tokens appended during decode, whole batch
  StateStats state;
  SpecStats spec;                  // spec only
  std::vector<RestoreSample> restores;
  int64_t rss_peak_bytes = -1;     // VmHWM during the run (-1: unavailable)
  // A device backend's runs set this; the CPU reference leaves it -1.
  int64_t device_bytes = -1;       // weights + every buffer the run held on the device
  double time_per_output_token(int64_t batch) const {
    return emitted > 0 ? decode_s * static_cast<double>(batch) / static_cast<double>(emitted) : 0.0;
  }
  double tokens_per_s() const { return decode_s > 0 ? static_cast<double>(emitted) / decode_s : 0.0; }
};

// Median and range over the measured runs.
struct Summary {
  double median = 0.0, min = 0.0, max = 0.0;
  static Summary of(std::vector<double> v);
};

struct RestorePoint {
  int64_t position = 0, distance = 0;
  RestorePath path = RestorePath::kCheckpoint;
  Summary seconds;
};

struct ConcurrencyResult {
  int64_t value = 0;       // the largest batch meeting both limits (0: not even 1)
  std::string limited_by;  // "memory", "latency", "host memory", "device memory" or "limit"
  int64_t probes = 0;      // runs the search made beyond the sweep's own
};

// Everything reported for one configuration.
struct ConfigResult {
  Config config;
  Summary time_per_output_token, tokens_per_s;  // seconds; tokens per second
  int64_t peak_state_bytes = 0, peak_kv_bytes = 0, peak_device_bytes = 0, peak_rss_bytes = -1;
  int64_t state_writes_bytes = 0;
  int64_t restores_checkpoint = 0, restores_log_replay = 0, restores_reprefill = 0;
  std::optional<ConcurrencyResult> max_concurrency;
  std::optional<double> acceptance_rate;         // spec
  std::optional<Summary> rollback_cost;          // spec: seconds per rejected verify step
  std::vector<RestorePoint> restore_latency;     // restore
};

}  // namespace replayssm::bench
