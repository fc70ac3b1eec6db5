// A CUDA runtime error as a Status for the runtime's callers: "context:
// what: <CUDA's message>". The device running out of memory is
// out_of_budget — a budget the caller may size differently (bench's
// concurrency search stops there) — anything else an io_error. The sticky
// last error is cleared either way, so the next call starts clean.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "replayssm/status.h"

namespace replayssm::cuda {

inline Status cuda_status(cudaError_t e, const std::string& context, const std::string& what) {
  if (e == cudaSuccess) return {};
  cudaGetLastError();
  const std::string m = context + ": " + what + ": " + cudaGetErrorString(e);
  return e == cudaErrorMemoryAllocation ? out_of_budget(m) : io_error(m);
}

}  // namespace replayssm::cuda
