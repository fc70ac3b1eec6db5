// `replayssm bench --device cuda`: what the CUDA decoder can measure, the
// device-memory check, and the sweep on it (bench/decoder_runner.h).
// Compiled into every CLI; without REPLAYSSM_HAVE_CUDA the scope checks
// still run (so a bad request gets the same answer everywhere) and the
// rest refuses with one line saying the build has no CUDA.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/progress.h"
#include "bench/sweep.h"
#include "replayssm/model.h"

namespace replayssm::cli {

// The requests --device cuda runs: --workload ar, --strategy replay or
// snapshot, every --window in the decoder's log range [2, 64], no older
// checkpoints (--checkpoint-interval 0) and the default --page-size (the
// decoder's KV pages are its own). Anything else is one error naming the
// option and what is not supported on cuda yet.
Status check_cuda_scope(const bench::Axes& axes, int64_t checkpoint_interval, int64_t page_size);

// Refuses, before anything is allocated, a sweep whose bf16 weights plus
// its hungriest configuration exceed the device's free memory (and, for a
// model directory, whose fp32 host copy exceeds host memory). `who` names
// the model in the message. With dry_run, prints every configuration's
// estimate first.
Status check_cuda_memory(const ModelConfig& cfg, const std::vector<bench::Config>& configs,
                         const bench::SweepOptions& opt, const std::string& who, bool from_dir, bool dry_run);

// Places the model on the device (a preset: random bf16 matrices filled
// there from `seed`; a directory: its weights) and runs the sweep.
// device_budget: --memory-budget device, i.e. the device memory free once
// the weights are in. `header_patch` gets what differs from a CPU run's
// header (weights_bytes, device, device_name, device memory, the budget),
// for nlohmann::json::merge_patch.
Result<std::vector<bench::ConfigResult>> run_cuda_sweep(const ModelConfig& cfg, const std::string& model_dir,
                                                        bench::SweepOptions opt, bool device_budget,
                                                        const std::vector<bench::Config>& configs,
                                                        bench::Progress& progress, bench::SweepCost* cost,
                                                        nlohmann::json* header_patch);

}  // namespace replayssm::cli
