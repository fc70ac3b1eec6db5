// Sampler: a seeded source of uniforms and the host's draw of a token from
// one row of logits. Workloads draw through a backend (Backend::sample)
// with a request's own Sampler's uniforms, so a run is reproducible from
// its seed on every backend: the device draws what this would.
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "ops/cpu/sampling.h"
#include "replayssm/backend.h"
#include "replayssm/sampling.h"

namespace replayssm {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  // ops::cpu::sample_at(logits, params, uniform()); greedy takes no uniform.
  int32_t sample(std::span<const float> logits);
  // A draw from an explicit distribution (sums to 1 up to rounding).
  int32_t draw(std::span<const double> probs);
  double uniform();  // in [0, 1)
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
};

// The next token of each kept row rows[i] of the backend's last step: its
// argmax where samplers[i] is greedy, else its draw at samplers[i]'s next
// uniform (what samplers[i]->sample(row) gives on the host). lp, when
// given, gets each token's log-probability at temperature 1.
Status choose_tokens(Backend& backend, std::span<const int64_t> rows, std::span<Sampler* const> samplers,
                     int32_t* out, double* lp = nullptr);

}  // namespace replayssm
