// Token sampling from one row of logits: greedy, or temperature + top-p
// (nucleus) with a seeded generator so runs are reproducible. The
// distribution a sample is drawn from is exposed (sampling_probs) because
// speculative rejection sampling must compare target and draft
// distributions exactly as they are sampled.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

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

int32_t argmax(std::span<const float> logits);

// The distribution Sampler draws from: one-hot at the argmax when
// temperature is 0, else softmax(logits / T) cut to the top-p nucleus and
// renormalised.
std::vector<double> sampling_probs(std::span<const float> logits, const SamplingParams& p);

// log-softmax of one row at `token` (temperature 1), for scores. `token`
// must index the row (a caller's bug otherwise: checked, aborts).
double log_prob(std::span<const float> logits, int32_t token);

// The token Sampler::sample draws when its uniform is r ∈ [0, 1): the
// first token in id order whose cumulative sampling_probs pass r (the
// last token with mass if rounding leaves none). The specification of
// the device sampler (ops/cuda/sampling.h sample_cuda).
int32_t sample_at(std::span<const float> logits, const SamplingParams& p, double r);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  int32_t sample(std::span<const float> logits);
  // A draw from an explicit distribution (sums to 1 up to rounding).
  int32_t draw(std::span<const double> probs);
  double uniform();  // in [0, 1)
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
};

}  // namespace replayssm
