// make_backend (see include/replayssm/make_backend.h). Its own library
// (replayssm_backends) above the core and, where the build has it, the CUDA
// library: the core cannot depend on CUDA.
#include "replayssm/make_backend.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/state_options_rule.h"
#if defined(REPLAYSSM_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace replayssm {

std::vector<std::string> backend_names() {
  std::vector<std::string> names = {"cpu"};
#if defined(REPLAYSSM_HAVE_CUDA)
  // Only where a GPU is visible: a suite over backend_names() then runs
  // the CUDA backend exactly where it can.
  if (cuda::device_visible().ok()) names.push_back("cuda");
#endif
  return names;
}

Status device_available(const std::string& device) {
  if (device == "cpu") return {};
  if (device == "cuda") {
#if defined(REPLAYSSM_HAVE_CUDA)
    return cuda::device_visible();
#else
    return unsupported("--device cuda: this build has no CUDA backend (configure with REPLAYSSM_CUDA=ON where nvcc is)");
#endif
  }
  return invalid_argument("--device: unknown device '" + device + "' (expected cpu or cuda)");
}

Status check_state_options(const std::string& device, const StateOptions& opt) {
  if (device == "cuda") return cuda::check_cuda_state_options(opt);
  return {};
}

bool device_fills_matrices(const std::string& device) { return device == "cuda"; }

Result<std::unique_ptr<Backend>> make_backend(const std::string& device, const Model& model, uint64_t matrices_seed) {
  if (device == "cpu") {
    RSSM_ASSIGN_OR_RETURN(auto b, cpu::CpuBackend::create(model));
    return std::unique_ptr<Backend>(std::move(b));
  }
  if (device == "cuda") {
#if defined(REPLAYSSM_HAVE_CUDA)
    cuda::CudaBackendOptions o;
    o.seed = matrices_seed;
    RSSM_ASSIGN_OR_RETURN(auto b, cuda::CudaBackend::create(model, o));
    return std::unique_ptr<Backend>(std::move(b));
#else
    return unsupported("device cuda: this build has no CUDA backend (configure with REPLAYSSM_CUDA=ON where nvcc is)");
#endif
  }
  return invalid_argument("device: unknown device '" + std::string(device) + "' (expected cpu or cuda)");
}

}  // namespace replayssm
