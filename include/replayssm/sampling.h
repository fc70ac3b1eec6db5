// Sampling parameters and token log-probabilities: what a request asks of
// the next token, and what a backend reports back.
#pragma once

#include <cstdint>
#include <string>

#include "replayssm/status.h"

namespace replayssm {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // keep the smallest set of tokens with mass ≥ top_p
  uint64_t seed = 0;
};

// OK for a finite temperature >= 0 and top_p in (0, 1]; the message starts
// with `who` ("request", "generate").
Status check_sampling(const SamplingParams& p, const std::string& who);

// One token's log-probability under the model (log-softmax at temperature 1).
struct TokenLogprob {
  int32_t token;
  double logprob;
};

}  // namespace replayssm
