// Causal depthwise conv1d + SiLU over a segment, carrying the conv window.
#pragma once

#include <cstdint>

#include "replayssm/op_params.h"

namespace replayssm::ops::cpu {

// window: (K-1, C), the K-1 pre-conv rows before this segment, oldest first;
//         on return it holds the last K-1 pre-conv rows including the segment.
// x:      (T, C) pre-conv rows, row stride ldx.
// y:      (T, C) silu(conv + bias), row stride ldy; must not alias x.
void conv1d_silu(const Conv1dParams& p, float* window, const float* x, int64_t ldx, int64_t T,
                 float* y, int64_t ldy);

}  // namespace replayssm::ops::cpu
