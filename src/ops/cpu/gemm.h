// Dense projections on the CPU through OpenBLAS (all cores).
#pragma once

#include <cstdint>

namespace replayssm::ops::cpu {

// y (M, N) = x (M, K) · w (N, K)ᵀ [+ bias (N)]. Weights are stored as
// Hugging Face stores nn.Linear: (out_features, in_features), row-major.
// Row strides ldx, ldy are in elements (ldx ≥ K, ldy ≥ N).
void matmul(const float* x, int64_t ldx, int64_t M, int64_t K, const float* w, int64_t N,
            const float* bias, float* y, int64_t ldy);

}  // namespace replayssm::ops::cpu
