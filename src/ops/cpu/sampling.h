// Token choice from one row of logits, the CPU reference: argmax, the
// sampling distribution (temperature, then top-p), a draw from it at a
// given uniform, log-probabilities and the top k of them. The
// specification of the device versions (ops/cuda/sampling.h): a backend's
// draw at uniform r is the host sampler's draw at r. Probabilities are
// formed in double so top-p cut points do not depend on summation order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "replayssm/sampling.h"

namespace replayssm::ops::cpu {

// Lowest id on ties.
int32_t argmax(std::span<const float> logits);

// The distribution a draw comes from: one-hot at the argmax when
// temperature is 0, else softmax(logits / T) cut to the top-p nucleus (the
// shortest prefix by descending probability, ties by id, whose mass
// reaches top_p) and renormalised.
std::vector<double> sampling_probs(std::span<const float> logits, const SamplingParams& p);

// log-softmax of one row at `token` (temperature 1). `token` must index
// the row (a caller's bug otherwise: checked, aborts).
double log_prob(std::span<const float> logits, int32_t token);

// The first token in id order whose cumulative probability passes r ∈
// [0, 1) (the last token with mass if rounding leaves none).
int32_t draw_at(std::span<const double> probs, double r);
// draw_at(sampling_probs(logits, p), r); the argmax at temperature 0.
int32_t sample_at(std::span<const float> logits, const SamplingParams& p, double r);

// A row's k largest log-probabilities log_softmax(row)[id] (the
// log-sum-exp in fp64), largest first, lower id on ties.
std::vector<TokenLogprob> top_logprobs(std::span<const float> row, int64_t k);

}  // namespace replayssm::ops::cpu
