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

// How close each row's choice came to its cutoff, in router-logit units: a
// lower bound on how far the logits must move (summed over the two sides)
// to change the chosen set — the K-th against the (K+1)-th candidate
// (softmax: their logits' difference; sigmoid: their corrected scores'
// difference over the sigmoid's steepest slope, 1/4) and, where the
// sigmoid scoring drops groups, the last kept group against the next (its
// score's difference over 1/2: a group score is two sigmoids). +inf where
// nothing is cut (K = E). margin: (rows). A device that routes logits a
// little off the reference's (bf16 activations) can choose otherwise only
// where this margin is within its error: tests count such rows, not fail.
void moe_route_margin(const MoeRoutingParams& p, const float* logits, int64_t ld, int64_t rows, float* margin);

}  // namespace replayssm::ops::cpu
