// Mamba2 selective scan, sequential: the specification of the recurrence.
#pragma once

#include <cstdint>

#include "replayssm/op_params.h"

namespace replayssm::ops::cpu {

// For t in [0, T), per head h (group g = h / (H/G)):
//   dt = clamp(softplus(dt_raw[t,h] + dt_bias[h]), dt_min, dt_max)
//   S[h] = exp(dt·A[h])·S[h] + (dt·B[t,g]) ⊗ x[t,h]      S[h]: (P, N)
//   y[t,h] = S[h]·C[t,g] + D[h]·x[t,h]
// state: (H, P, N) fp32, updated in place.
// x: (T, H·P) stride ldx; B, C: (T, G·N) stride ldbc; dt_raw: (T, H) stride
// lddt; y: (T, H·P) stride ldy.
void mamba2_scan(const Mamba2Params& p, float* state, const float* x, int64_t ldx,
                 const float* B, const float* C, int64_t ldbc, const float* dt_raw, int64_t lddt,
                 int64_t T, float* y, int64_t ldy);

}  // namespace replayssm::ops::cpu
