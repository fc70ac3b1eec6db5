// Filling a device bf16 (fp32) matrix with uniform pseudo-random values in
// [−bound, bound), from a counter-based hash of (seed, index): no state, any
// grid, the same values on every run — the device side of
// Model::random_without_matrices (device_model.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::cuda {

cudaError_t fill_uniform_bf16(uint16_t* out, int64_t n, float bound, uint64_t seed, cudaStream_t stream);
// fp32 in [lo, hi) from the same hash (benches: inputs that are not zeros);
// lo > hi or NaN bounds are refused.
cudaError_t fill_uniform_f32(float* out, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream);

}  // namespace replayssm::cuda
