// Token sampling from one row of logits: greedy, or temperature + top-p
// (nucleus) with a seeded generator so runs are reproducible.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace replayssm {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // keep the smallest set of tokens with mass ≥ top_p
  uint64_t seed = 0;
};

int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  int32_t sample(std::span<const float> logits);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
};

}  // namespace replayssm
