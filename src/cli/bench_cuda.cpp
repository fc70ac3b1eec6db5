// --device cuda for `replayssm bench` (see bench_cuda.h).
#include "cli/bench_cuda.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "bench/memory.h"
#include "bench/presets.h"
#include "bench/workloads.h"
#include "replayssm/make_backend.h"

#if REPLAYSSM_HAVE_CUDA
#include "backend/cuda/device_model.h"
#endif

namespace replayssm::cli {

using namespace replayssm::bench;

#if !REPLAYSSM_HAVE_CUDA

namespace {
Status no_cuda() {
  return unsupported("--device cuda: this replayssm was built without CUDA (configure with -DREPLAYSSM_CUDA=ON "
                     "where nvcc is installed); use --device cpu");
}
}  // namespace

Status check_cuda_memory(const ModelConfig&, const std::vector<Config>&, const SweepOptions&, const std::string&, bool,
                         bool) {
  return no_cuda();
}

Result<std::vector<ConfigResult>> run_cuda_sweep(const ModelConfig&, const std::string&, SweepOptions, bool,
                                                 const std::vector<Config>&, Progress&, SweepCost*, nlohmann::json*) {
  return no_cuda();
}

#else

Status check_cuda_memory(const ModelConfig& cfg, const std::vector<Config>& configs, const SweepOptions& opt,
                         const std::string& who, bool from_dir, bool dry_run) {
  const int64_t weights = device_weight_bytes(cfg);
  int64_t run_need = 0;
  const Config* hungriest = &configs.front();
  for (const Config& c : configs) {
    const int64_t n = estimate_run_bytes(cfg, c, opt);
    if (n > run_need) {
      run_need = n;
      hungriest = &c;
    }
  }
  Result<cuda::DeviceInfo> dev = cuda::device_info();
  if (dry_run) {
    std::printf("%zu configurations, %lld runs each (%lld warm-up); bf16 weights %s; device %s\n", configs.size(),
                static_cast<long long>(opt.warmup + opt.runs), static_cast<long long>(opt.warmup),
                format_bytes(weights).c_str(),
                dev.ok() ? (dev->name + ", " + format_bytes(dev->free_bytes) + " free").c_str() : "none visible");
    for (const Config& c : configs)
      std::printf("  %-50s needs <= %s of device memory beyond the weights\n", c.describe().c_str(),
                  format_bytes(estimate_run_bytes(cfg, c, opt)).c_str());
    std::fflush(stdout);  // before any error line on stderr
  }
  if (!dev.ok()) return dev.status();
  if (weights + run_need > dev->free_bytes)
    return out_of_budget(who + ": needs " + format_bytes(weights + run_need) + " of device memory (bf16 weights " +
                         format_bytes(weights) + " + " + format_bytes(run_need) + " for " + hungriest->describe() +
                         ") but " + dev->name + " has " + format_bytes(dev->free_bytes) + " free");
  // A model directory is read into host memory in fp32 before it is copied.
  const int64_t host = weight_bytes(cfg), avail = available_memory_bytes();
  if (from_dir && avail >= 0 && host > avail)
    return out_of_budget(who + ": needs " + format_bytes(host) + " of host memory to load (fp32) but " +
                         format_bytes(avail) + " is available");
  return {};
}

Result<std::vector<ConfigResult>> run_cuda_sweep(const ModelConfig& cfg, const std::string& model_dir,
                                                 SweepOptions opt, bool device_budget,
                                                 const std::vector<Config>& configs, Progress& progress,
                                                 SweepCost* cost, nlohmann::json* header_patch) {
  RSSM_ASSIGN_OR_RETURN(cuda::DeviceInfo before, cuda::device_info());
  std::unique_ptr<Model> model;
  if (model_dir.empty()) {
    RSSM_ASSIGN_OR_RETURN(model, Model::random_without_matrices(cfg, kPresetSeed));
  } else {
    RSSM_ASSIGN_OR_RETURN(model, Model::load(model_dir));
  }
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, make_backend("cuda", *model, kPresetSeed));
  if (opt.concurrency && device_budget) {
    // "device": what a real out-of-memory would hit — the memory left once the weights are in.
    RSSM_ASSIGN_OR_RETURN(cuda::DeviceInfo placed, cuda::device_info());
    opt.memory_budget = std::max<int64_t>(placed.free_bytes, 1);
  }
  BenchContext ctx(backend->config(), backend.get(), opt);
  RSSM_ASSIGN_OR_RETURN(std::vector<ConfigResult> results, run_sweep(ctx, configs, progress, cost));
  nlohmann::json& p = *header_patch;
  p["weights_bytes"] = backend->memory().weights_bytes;
  p["device"] = "cuda";
  p["device_name"] = before.name;
  p["device_memory_total_bytes"] = before.total_bytes;
  p["device_memory_free_bytes"] = before.free_bytes;
  if (opt.concurrency) p["settings"]["memory_budget"] = opt.memory_budget;
  return results;
}

#endif

}  // namespace replayssm::cli
