// Sampler (see sampler.h).
#include "workloads/sampler.h"

#include <vector>

namespace replayssm {

int32_t Sampler::sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f) return ops::cpu::argmax(logits);
  return ops::cpu::sample_at(logits, p_, uniform());
}

int32_t Sampler::draw(std::span<const double> probs) { return ops::cpu::draw_at(probs, uniform()); }

Status choose_tokens(Backend& backend, std::span<const int64_t> rows, std::span<Sampler* const> samplers,
                     int32_t* out, double* lp) {
  std::vector<int64_t> greedy, greedy_at;
  std::vector<SampleRequest> draws;
  std::vector<size_t> draws_at;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SamplingParams& p = samplers[i]->params();
    if (p.temperature <= 0.0f && lp == nullptr) {
      greedy.push_back(rows[i]);
      greedy_at.push_back(static_cast<int64_t>(i));
      continue;
    }
    draws.push_back({rows[i], p, p.temperature <= 0.0f ? 0.0 : samplers[i]->uniform()});
    draws_at.push_back(i);
  }
  if (!greedy.empty()) {
    std::vector<int32_t> ids(greedy.size());
    RSSM_RETURN_IF_ERROR(backend.argmax(greedy, ids.data()));
    for (size_t j = 0; j < ids.size(); ++j) out[greedy_at[j]] = ids[j];
  }
  if (!draws.empty()) {
    std::vector<int32_t> ids(draws.size());
    std::vector<double> lps(draws.size());
    RSSM_RETURN_IF_ERROR(backend.sample(draws, ids.data(), lps.data()));
    for (size_t j = 0; j < ids.size(); ++j) {
      out[draws_at[j]] = ids[j];
      if (lp != nullptr) lp[draws_at[j]] = lps[j];
    }
  }
  return {};
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

}  // namespace replayssm
