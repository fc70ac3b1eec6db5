// Sampler (see sampler.h). Probabilities are formed in double so top-p cut
// points do not depend on summation order.
#include "decode/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace replayssm {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (p_.temperature <= 0.0f) return argmax(logits);
  const size_t V = logits.size();
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> prob(V);
  double sum = 0.0;
  for (size_t i = 0; i < V; ++i) {
    prob[i] = std::exp(static_cast<double>(logits[i] - mx) / p_.temperature);
    sum += prob[i];
  }
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return prob[a] > prob[b]; });
  // Nucleus: the shortest prefix of the sorted tokens whose mass reaches top_p.
  size_t keep = V;
  if (p_.top_p < 1.0f) {
    double acc = 0.0;
    for (size_t i = 0; i < V; ++i) {
      acc += prob[order[i]] / sum;
      if (acc >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += prob[order[i]];
  std::uniform_real_distribution<double> u(0.0, kept);
  double r = u(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= prob[order[i]];
    if (r <= 0.0) return order[i];
  }
  return order[keep - 1];
}

}  // namespace replayssm
