// Dense projections on the CPU: every output summed in one fixed order,
// independent of the batch (gemm.cpp), on every core.
#pragma once

#include <cstdint>

namespace replayssm::ops::cpu {

// y (M, N) = x (M, K) · w (N, K)ᵀ [+ bias (N)]. Weights are stored as
// Hugging Face stores nn.Linear: (out_features, in_features), row-major.
// Row strides ldx, ldy are in elements (ldx ≥ K, ldy ≥ N). Row m of y
// depends on row m of x alone: the same bits whatever M is.
void matmul(const float* x, int64_t ldx, int64_t M, int64_t K, const float* w, int64_t N,
            const float* bias, float* y, int64_t ldy);

}  // namespace replayssm::ops::cpu
