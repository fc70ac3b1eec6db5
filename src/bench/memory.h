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

// The same for the CUDA decoder (runtime/cuda/decoder.h), whose weights
// are bf16 matrices: 2 bytes per parameter (the fp32 norms, conv taps and
// biases are a few MiB, inside the margin below).
int64_t device_weight_bytes(const ModelConfig& c);
// An upper estimate of the device bytes cuda::Decoder allocates for `cfg`
// beyond the weights: fp32 SSM states and bf16 conv windows, replay's logs
// of W entries, K/V pages for prompt + new tokens, activations, logits and
// the cuBLAS workspace; +10% and 256 MiB (graphs, cuBLAS handles).
// The tree workload on cuda (bench/decoder_runner.cpp): a
// TreeSearchCuda of kTreeSlotsPerChild × batch slots (a node and room for
// its children and the recently used ones), fed tree_chunk(W) tokens per
// pass (a verify: ≤ W/2 under replay).
constexpr int64_t kTreeSlotsPerChild = 4;
inline int tree_chunk(int64_t window) { return int(std::min<int64_t>(8, std::max<int64_t>(2, window / 2))); }
// Its prompt goes in ragged steps of this many tokens (TreeSearchCudaOptions::prefill_chunk),
// so its decoder's steps hold at least this many rows.
constexpr int kTreePrefillChunk = 512;
// The restore workload's prompt chunk on cuda (its base sequence and its
// re-prefills): about 1,024 rows a step, 8 to 4,096 tokens per sequence.
inline int restore_chunk(int64_t batch) { return int(std::max<int64_t>(8, std::min<int64_t>(4096, 1024 / batch))); }
int64_t estimate_device_run_bytes(const ModelConfig& c, const Config& cfg, const SweepOptions& opt);

// "1.5 GiB" style.
std::string format_bytes(int64_t bytes);

// Parses "1073741824", "512M", "8G", "1.5GiB" (powers of 1024).
Result<int64_t> parse_bytes(const std::string& text, const std::string& option);

}  // namespace replayssm::bench
