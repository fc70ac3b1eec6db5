// moe_route (see moe_routing.h). Written as transformers 5.17 computes it
// (NemotronHMoE.route_tokens_to_experts, Qwen3_5MoeTopKRouter.forward) so
// the fp32 rounding matches: softmax as max-subtracted exponentials over
// their sequential sum; sigmoid as 1 / (1 + e^-x); the K weights summed in
// rank order (torch.topk's descending order) before the division.
//
// One deliberate difference: experts of the groups the sigmoid scoring drops
// are never chosen (DeepSeek-V3's reference and vLLM mask them with -inf).
// masked_fill(0.0), which some transformers versions use, would rank them
// above a kept expert whose corrected score is negative; Nemotron 3 Nano has
// a single group, where the two agree.
#include "ops/cpu/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "ops/cpu/activation.h"

namespace replayssm::ops::cpu {

namespace {

// A total order for ranking: larger first, lower index on ties, NaN last
// (a NaN logit must not break the sort's ordering contract).
struct RankDesc {
  const float* v;
  bool operator()(int32_t a, int32_t b) const {
    const bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na != nb) return nb;
    if (!na && v[a] != v[b]) return v[a] > v[b];
    return a < b;
  }
};

// The k best of `candidates` under RankDesc, best first.
void top(const float* v, std::vector<int32_t>& candidates, int64_t k) {
  std::partial_sort(candidates.begin(), candidates.begin() + k, candidates.end(), RankDesc{v});
  candidates.resize(static_cast<size_t>(k));
}

// The routing's shape, checked: groups (1 under softmax scoring) and the
// experts in each.
struct Groups {
  bool sigmoid_scoring;
  int64_t G, per_group;
};

Groups checked_groups(const MoeRoutingParams& p) {
  const int64_t E = p.n_experts, K = p.top_k;
  RSSM_CHECK(E >= 1 && K >= 1 && K <= E);
  const bool sigmoid_scoring = p.scoring == MoeRoutingParams::kSigmoid;
  const int64_t G = sigmoid_scoring ? p.n_group : 1;
  RSSM_CHECK(G >= 1 && E % G == 0 && p.topk_group >= 1 && p.topk_group <= G);
  RSSM_CHECK(!sigmoid_scoring || (E / G >= 2 && p.topk_group * (E / G) >= K));
  return {sigmoid_scoring, G, E / G};
}

}  // namespace

void moe_route(const MoeRoutingParams& p, const float* logits, int64_t ld, int64_t rows, int32_t* experts,
               float* weights) {
  const int64_t E = p.n_experts, K = p.top_k;
  const auto [sigmoid_scoring, G, per_group] = checked_groups(p);

  std::vector<float> score(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  std::vector<float> group_score(static_cast<size_t>(G));
  std::vector<int32_t> idx, gidx;
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * ld;
    idx.clear();
    if (!sigmoid_scoring) {
      float m = l[0];
      for (int64_t e = 1; e < E; ++e) m = std::max(m, l[e]);
      float sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) sum += (score[e] = std::exp(l[e] - m));
      for (int64_t e = 0; e < E; ++e) choice[e] = score[e] = score[e] / sum;
      idx.resize(static_cast<size_t>(E));
      std::iota(idx.begin(), idx.end(), 0);
    } else {
      for (int64_t e = 0; e < E; ++e) {
        score[e] = ops::sigmoid(l[e]);
        choice[e] = p.correction_bias != nullptr ? score[e] + p.correction_bias[e] : score[e];
      }
      // Each group's score: its two largest choices, the larger first.
      for (int64_t g = 0; g < G; ++g) {
        const float* c = choice.data() + g * per_group;
        float a = -std::numeric_limits<float>::infinity(), b = a;
        int64_t ia = -1;
        for (int64_t j = 0; j < per_group; ++j)
          if (ia < 0 || RankDesc{c}(int32_t(j), int32_t(ia))) a = c[j], ia = j;
        int64_t ib = -1;
        for (int64_t j = 0; j < per_group; ++j)
          if (j != ia && (ib < 0 || RankDesc{c}(int32_t(j), int32_t(ib)))) b = c[j], ib = j;
        group_score[g] = a + b;
      }
      gidx.resize(static_cast<size_t>(G));
      std::iota(gidx.begin(), gidx.end(), 0);
      top(group_score.data(), gidx, p.topk_group);
      std::sort(gidx.begin(), gidx.end());
      for (int32_t g : gidx)
        for (int64_t j = 0; j < per_group; ++j) idx.push_back(static_cast<int32_t>(g * per_group + j));
    }
    top(choice.data(), idx, K);
    // Weights from the uncorrected scores, summed best first.
    float sum = 0.0f;
    for (int32_t e : idx) sum += score[e];
    if (sigmoid_scoring) sum += 1e-20f;
    std::vector<std::pair<int32_t, float>> picked;
    for (int32_t e : idx) {
      float w = score[e];
      if (p.norm_topk_prob) w /= sum;
      picked.push_back({e, w * p.routed_scaling_factor});
    }
    std::sort(picked.begin(), picked.end());
    for (int64_t j = 0; j < K; ++j) {
      experts[r * K + j] = picked[j].first;
      weights[r * K + j] = picked[j].second;
    }
  }
}

void moe_route_margin(const MoeRoutingParams& p, const float* logits, int64_t ld, int64_t rows, float* margin) {
  const int64_t E = p.n_experts, K = p.top_k;
  const auto [sigmoid_scoring, G, per_group] = checked_groups(p);
  std::vector<float> choice(static_cast<size_t>(E)), group_score(static_cast<size_t>(G));
  std::vector<int32_t> idx, gidx;
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * ld;
    float m = std::numeric_limits<float>::infinity();
    idx.clear();
    if (!sigmoid_scoring) {
      std::copy_n(l, E, choice.begin());  // softmax keeps the logits' order
      idx.resize(static_cast<size_t>(E));
      std::iota(idx.begin(), idx.end(), 0);
    } else {
      for (int64_t e = 0; e < E; ++e)
        choice[e] = ops::sigmoid(l[e]) + (p.correction_bias != nullptr ? p.correction_bias[e] : 0.0f);
      for (int64_t g = 0; g < G; ++g) {
        std::vector<float> c(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
        std::partial_sort(c.begin(), c.begin() + 2, c.end(), std::greater<float>());
        group_score[g] = c[0] + c[1];
      }
      gidx.resize(static_cast<size_t>(G));
      std::iota(gidx.begin(), gidx.end(), 0);
      std::sort(gidx.begin(), gidx.end(), RankDesc{group_score.data()});
      if (p.topk_group < G)
        m = std::min(m, 2.0f * (group_score[gidx[p.topk_group - 1]] - group_score[gidx[p.topk_group]]));
      gidx.resize(static_cast<size_t>(p.topk_group));
      for (int32_t g : gidx)
        for (int64_t j = 0; j < per_group; ++j) idx.push_back(static_cast<int32_t>(g * per_group + j));
    }
    if (K < int64_t(idx.size())) {
      std::sort(idx.begin(), idx.end(), RankDesc{choice.data()});
      const float gap = choice[idx[K - 1]] - choice[idx[K]];
      m = std::min(m, sigmoid_scoring ? 4.0f * gap : gap);
    }
    margin[r] = m;
  }
}

}  // namespace replayssm::ops::cpu
