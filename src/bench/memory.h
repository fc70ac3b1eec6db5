// Host memory for the benchmark: what a configuration will need, what the
// machine has, and the process's peak resident set.
//
// The need is computed before anything is allocated so that a preset too
// large for the machine (a 27B model in fp32 on a 24 GiB host) is refused
// with a message instead of being killed by the OOM killer mid-run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "bench/bench.h"
#include "core/host_memory.h"
#include "replayssm/model.h"

namespace replayssm::bench {

// Bytes the fp32 weights of `c` occupy (4 per parameter).
int64_t weight_bytes(const ModelConfig& c);

// An upper estimate of the bytes a run of `cfg` allocates beyond the
// weights: store (checkpoints, logs, KV) and step activations.
int64_t estimate_run_bytes(const ModelConfig& c, const Config& cfg, const SweepOptions& opt);

// Bytes the weights of `c` occupy on a device, whose matrices are bf16: 2
// per parameter (the fp32 norms, conv taps and biases are a few MiB).
int64_t device_weight_bytes(const ModelConfig& c);

// "1.5 GiB" style.
std::string format_bytes(int64_t bytes);

// Parses "1073741824", "512M", "8G", "1.5GiB" (powers of 1024).
Result<int64_t> parse_bytes(const std::string& text, const std::string& option);

}  // namespace replayssm::bench
