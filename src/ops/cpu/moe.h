// A mixture-of-experts feed-forward on the CPU (MoeParams in
// replayssm/op_params.h has the math): the reference of the device version
// of the same name. Tokens are grouped by expert, so each chosen expert's
// matrices are read once per call however many rows chose it — the shape a
// grouped GEMM has — and each row's result is the same bits whatever other
// rows share the call.
#pragma once

#include <cstdint>

#include "replayssm/op_params.h"

namespace replayssm::ops::cpu {

// x:   (rows, D), row stride ldx.
// out: (rows, D) written, row stride ldo; must not alias x.
// experts, weights: (rows, K) each, written when not null: the routing
// (moe_route's), for callers that count or check what was chosen.
void moe(const MoeParams& p, const float* x, int64_t ldx, int64_t rows, float* out, int64_t ldo,
         int32_t* experts = nullptr, float* weights = nullptr);

}  // namespace replayssm::ops::cpu
