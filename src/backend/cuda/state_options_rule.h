// What the CUDA backend asks of the state manager's options beyond their
// own validation, header-only and CUDA-free: CudaBackend::check_options and
// make_backend's check_state_options (a program's flags, checked before
// any model reaches the device) apply the same rule.
#pragma once

#include <string>

#include "replayssm/state.h"
#include "replayssm/status.h"

namespace replayssm::cuda {

inline Status check_cuda_state_options(const StateOptions& opt) {
  if ((opt.page_size & (opt.page_size - 1)) != 0)
    return invalid_argument("--page-size: the CUDA backend's kernels read the log through pages of a power of two "
                            "positions (ops/cuda/log_pages.h), got " +
                            std::to_string(opt.page_size));
  return {};
}

}  // namespace replayssm::cuda
