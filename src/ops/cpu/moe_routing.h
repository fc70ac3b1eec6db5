// MoE routing on the CPU: which K of E experts each token runs, and with
// what weight (MoeRoutingParams in replayssm/op_params.h has the math). The
// reference of the device version of the same name: fp32 throughout, every
// tie to the lower index, so the chosen set is a function of the logits
// alone and a parity test can compare sets exactly away from near-ties.
#pragma once

#include <cstdint>

#include "replayssm/op_params.h"

namespace replayssm::ops::cpu {

// logits:  (rows, E) router logits, row stride ld.
// experts: (rows, K) written: each row's chosen experts in ascending index.
// weights: (rows, K) written: the weight of experts[r, j].
// Rows are independent: a row's result does not depend on the others.
void moe_route(const MoeRoutingParams& p, const float* logits, int64_t ld, int64_t rows, int32_t* experts,
               float* weights);

}  // namespace replayssm::ops::cpu
