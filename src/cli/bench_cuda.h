// `replayssm bench --device cuda`: the device-memory check and the sweep on
// the CUDA backend — the same workloads, runner and outputs as the CPU's.
// Compiled into every CLI; without REPLAYSSM_HAVE_CUDA both refuse with one
// line saying the build has no CUDA.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/progress.h"
#include "bench/sweep.h"
#include "replayssm/model.h"

namespace replayssm::cli {

// Refuses, before anything is allocated, a sweep whose bf16 weights plus
// its hungriest configuration (the state manager's estimate, fp32
// throughout: an upper bound of the device's bf16 logs and K/V) exceed
// the device's free memory (and, for a model directory, whose fp32 host
// copy exceeds host memory). `who` names the model in the message. With
// dry_run, prints every configuration's estimate first.
Status check_cuda_memory(const ModelConfig& cfg, const std::vector<bench::Config>& configs,
                         const bench::SweepOptions& opt, const std::string& who, bool from_dir, bool dry_run);

// Places the model on the CUDA backend (a preset: random bf16 matrices
// filled there from `seed`; a directory: its weights) and runs the sweep.
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
