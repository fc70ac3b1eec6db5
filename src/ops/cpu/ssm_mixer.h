// The stateful body of an SSM layer for one sequence segment on the CPU:
// conv window → conv1d+SiLU → split → recurrence. Storage strategies call
// these with whichever window and state they hold for that sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "replayssm/op_params.h"

namespace replayssm::ops::cpu {

// window: (K-1, C) and state: (H, P, N), both updated. xbc: (T, C) pre-conv,
// C = H·P + 2·G·N split as x | B | C after the conv. y: (T, H·P).
// scratch is resized as needed (reuse it across calls to avoid allocation).
void mamba2_mixer(const Conv1dParams& conv, const Mamba2Params& p, float* window, float* state,
                  const float* xbc, int64_t ldxbc, const float* dt, int64_t lddt, int64_t T,
                  float* y, int64_t ldy, std::vector<float>* scratch);

// window: (K-1, C), state: (Hv, dk, dv), both updated. qkv: (T, C) pre-conv,
// C = 2·Hk·dk + Hv·dv split as q | k | v after the conv. o: (T, Hv·dv).
void gdn_mixer(const Conv1dParams& conv, const GdnParams& p, float* window, float* state,
               const float* qkv, int64_t ldqkv, const float* a, int64_t lda, const float* b,
               int64_t ldb, int64_t T, float* o, int64_t ldo, std::vector<float>* scratch);

}  // namespace replayssm::ops::cpu
