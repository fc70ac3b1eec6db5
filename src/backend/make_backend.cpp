// make_backend (see include/replayssm/make_backend.h).
#include "replayssm/make_backend.h"

#include "backend/cpu/cpu_backend.h"

namespace replayssm {

std::vector<std::string> backend_names() { return {"cpu"}; }

Result<std::unique_ptr<Backend>> make_backend(const std::string& device, const Model& model) {
  if (device == "cpu") {
    RSSM_ASSIGN_OR_RETURN(auto b, cpu::CpuBackend::create(model));
    return std::unique_ptr<Backend>(std::move(b));
  }
  if (device == "cuda")
    return unsupported("device cuda: the CUDA backend does not run the state manager's plans yet "
                       "(the CLI's --device cuda runs the CUDA decoder, src/runtime/cuda)");
  return invalid_argument("device: unknown device '" + device + "' (expected cpu or cuda)");
}

}  // namespace replayssm
