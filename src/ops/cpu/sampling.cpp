// Token choice from one row of logits (see sampling.h).
#include "ops/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace replayssm {

Status check_sampling(const SamplingParams& p, const std::string& who) {
  if (!(p.temperature >= 0.0f && std::isfinite(p.temperature)))
    return invalid_argument(who + ": temperature must be a finite number >= 0, got " + std::to_string(p.temperature));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return invalid_argument(who + ": top_p must be in (0, 1], got " + std::to_string(p.top_p));
  return {};
}

namespace ops::cpu {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

std::vector<double> sampling_probs(std::span<const float> logits, const SamplingParams& p) {
  const size_t V = logits.size();
  std::vector<double> prob(V, 0.0);
  if (p.temperature <= 0.0f) {
    prob[argmax(logits)] = 1.0;
    return prob;
  }
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (size_t i = 0; i < V; ++i) {
    prob[i] = std::exp(static_cast<double>(logits[i] - mx) / p.temperature);
    sum += prob[i];
  }
  for (double& x : prob) x /= sum;
  if (p.top_p >= 1.0f) return prob;
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return prob[a] > prob[b]; });
  double acc = 0.0;
  size_t keep = V;
  for (size_t i = 0; i < V; ++i) {
    acc += prob[order[i]];
    if (acc >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += prob[order[i]];
  for (size_t i = keep; i < V; ++i) prob[order[i]] = 0.0;
  for (double& x : prob) x /= kept;
  return prob;
}

namespace {

// log Σ exp(row), in fp64 from the row's maximum.
double log_sum_exp(std::span<const float> row) {
  const float mx = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float x : row) sum += std::exp(static_cast<double>(x - mx));
  return std::log(sum) + mx;
}

}  // namespace

// top_logprobs' formula, so a token's log-probability is the same number
// whichever way it is asked for.
double log_prob(std::span<const float> logits, int32_t token) {
  RSSM_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size());
  return static_cast<double>(logits[token]) - log_sum_exp(logits);
}

int32_t draw_at(std::span<const double> probs, double r) {
  int32_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    last = static_cast<int32_t>(i);
    r -= probs[i];
    if (r < 0.0) return last;
  }
  return last;  // rounding left r ≥ 0: the last token with mass
}

int32_t sample_at(std::span<const float> logits, const SamplingParams& p, double r) {
  if (p.temperature <= 0.0f) return argmax(logits);
  return draw_at(sampling_probs(logits, p), r);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> row, int64_t k) {
  if (row.empty()) return {};
  const double lse = log_sum_exp(row);
  std::vector<double> lp(row.size());
  for (size_t i = 0; i < row.size(); ++i) lp[i] = static_cast<double>(row[i]) - lse;
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::clamp<int64_t>(k, 0, static_cast<int64_t>(row.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t c) { return lp[a] != lp[c] ? lp[a] > lp[c] : a < c; });
  std::vector<TokenLogprob> out;
  for (int64_t i = 0; i < k; ++i) out.push_back({ids[size_t(i)], lp[size_t(ids[size_t(i)])]});
  return out;
}

}  // namespace ops::cpu
}  // namespace replayssm
