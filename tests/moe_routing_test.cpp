// MoE routing (ops/cpu/moe_routing.h) on cases small enough to work out by
// hand: softmax top-k and its renormalisation, sigmoid scores with the
// correction bias changing the choice but not the weight, group-limited
// choice by each group's two best, normalisation and scaling, ties to the
// lower index, rows independent of each other.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/cpu/moe_routing.h"

namespace replayssm {
namespace {

using ops::MoeRoutingParams;

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route(const MoeRoutingParams& p, const std::vector<float>& logits) {
  const int64_t rows = static_cast<int64_t>(logits.size()) / p.n_experts;
  Routed r{std::vector<int32_t>(size_t(rows * p.top_k)), std::vector<float>(size_t(rows * p.top_k))};
  ops::cpu::moe_route(p, logits.data(), p.n_experts, rows, r.experts.data(), r.weights.data());
  return r;
}

// The logit whose sigmoid is s.
float logit(double s) { return static_cast<float>(std::log(s / (1.0 - s))); }

MoeRoutingParams softmax(int64_t E, int64_t K, bool norm) {
  MoeRoutingParams p;
  p.scoring = MoeRoutingParams::kSoftmax;
  p.n_experts = E, p.top_k = K, p.norm_topk_prob = norm;
  return p;
}

MoeRoutingParams sigmoid(int64_t E, int64_t K, int64_t groups, int64_t keep, const float* bias) {
  MoeRoutingParams p;
  p.scoring = MoeRoutingParams::kSigmoid;
  p.n_experts = E, p.top_k = K, p.n_group = groups, p.topk_group = keep, p.correction_bias = bias;
  return p;
}

TEST(MoeRouting, SoftmaxTopKRenormalised) {
  // p ∝ (e^1, e^3, e^2, e^0): experts 1 and 2, weights e^3 : e^2 over their sum.
  const Routed r = route(softmax(4, 2, true), {1, 3, 2, 0});
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2}));  // ascending index
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(r.weights[1], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0, 1e-6);
}

TEST(MoeRouting, SoftmaxWithoutRenormalisationKeepsTheProbabilities) {
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
  const Routed r = route(softmax(4, 2, false), {1, 3, 2, 0});
  EXPECT_NEAR(r.weights[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(2.0) / z, 1e-6);
}

TEST(MoeRouting, TiesGoToTheLowerIndex) {
  // Three equal best logits, two places: experts 1 and 2, equal weights.
  Routed r = route(softmax(5, 2, true), {2, 5, 5, 5, 1});
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.weights[0], r.weights[1]);
  // The same under sigmoid scoring, and at the cutoff only: 0 is clear, then
  // the tie between 3 and 4 goes to 3.
  r = route(sigmoid(6, 2, 1, 1, nullptr), {3, 0, 0, 1, 1, -2});
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 3}));
  // Tied groups: groups {0,1} and {2,3} score alike; the lower one is kept.
  r = route(sigmoid(4, 2, 2, 1, nullptr), {1, 2, 2, 1});
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 1}));
}

TEST(MoeRouting, CorrectionBiasChangesTheChoiceNotTheWeight) {
  // Scores s = (0.5, 0.6, 0.7, 0.3); the bias lifts expert 0's choice to 1.5,
  // so 0 and 2 are chosen — weighted by their scores 0.5 and 0.7, not 1.5.
  const float bias[4] = {1.0f, 0.0f, 0.0f, 0.0f};
  MoeRoutingParams p = sigmoid(4, 2, 1, 1, bias);
  p.norm_topk_prob = false;
  const Routed r = route(p, {logit(0.5), logit(0.6), logit(0.7), logit(0.3)});
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 2}));
  EXPECT_NEAR(r.weights[0], 0.5, 1e-6);
  EXPECT_NEAR(r.weights[1], 0.7, 1e-6);
  // Without the bias the two best scores win.
  const Routed plain = route(sigmoid(4, 2, 1, 1, nullptr), {logit(0.5), logit(0.6), logit(0.7), logit(0.3)});
  EXPECT_EQ(plain.experts, (std::vector<int32_t>{1, 2}));
}

TEST(MoeRouting, SigmoidNormalisationThenScaling) {
  MoeRoutingParams p = sigmoid(4, 2, 1, 1, nullptr);
  p.routed_scaling_factor = 2.5f;
  const Routed r = route(p, {logit(0.5), logit(0.6), logit(0.7), logit(0.3)});
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2}));
  // 2.5 · s / (0.6 + 0.7 + 1e-20)
  EXPECT_NEAR(r.weights[0], 2.5 * 0.6 / 1.3, 1e-6);
  EXPECT_NEAR(r.weights[1], 2.5 * 0.7 / 1.3, 1e-6);
  // Unnormalised: 2.5 · s.
  p.norm_topk_prob = false;
  const Routed u = route(p, {logit(0.5), logit(0.6), logit(0.7), logit(0.3)});
  EXPECT_NEAR(u.weights[0], 2.5 * 0.6, 1e-6);
  EXPECT_NEAR(u.weights[1], 2.5 * 0.7, 1e-6);
}

TEST(MoeRouting, GroupsAreScoredByTheirTwoBest) {
  // Groups {0,1} {2,3} {4,5} with scores (0.9, 0.1), (0.7, 0.7), (0.6, 0.55):
  // sums 1.0, 1.4, 1.15. One group kept: group 1, although expert 0 has
  // the best single score.
  const std::vector<float> l = {logit(0.9), logit(0.1), logit(0.7), logit(0.7), logit(0.6), logit(0.55)};
  Routed r = route(sigmoid(6, 2, 3, 1, nullptr), l);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(r.weights[0], 0.5, 1e-6);
  // Two groups kept (1 and 2), three experts: 2, 3 and then 4 (0.6 > 0.55);
  // expert 0 (0.9) is in a dropped group.
  r = route(sigmoid(6, 3, 3, 2, nullptr), l);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_NEAR(r.weights[2], 0.6 / 2.0, 1e-6);
  // The bias enters the group scores too: +0.5 on expert 1 makes group 0
  // sum 1.5 and puts experts 0 and 1 back.
  const float bias[6] = {0, 0.5f, 0, 0, 0, 0};
  r = route(sigmoid(6, 2, 3, 1, bias), l);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(r.weights[0], 0.9, 1e-6);  // scores 0.9, 0.1: normalised by 1.0
  EXPECT_NEAR(r.weights[1], 0.1, 1e-6);
}

TEST(MoeRouting, DroppedGroupsAreNeverChosen) {
  // Every corrected choice is negative: the kept group's experts are still
  // the ones chosen (a 0.0 fill for the dropped group would prefer them).
  const float bias[4] = {-1, -1, -5, -5};
  const Routed r = route(sigmoid(4, 2, 2, 1, bias), {0, 0.1f, 0, 0});
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 1}));
}

TEST(MoeRouting, RowsAreIndependent) {
  const MoeRoutingParams p = softmax(5, 3, true);
  const std::vector<float> a = {0.3f, -1, 2, 0.7f, 1.1f}, b = {4, 0, 0, -3, 0.5f};
  std::vector<float> both = a;
  both.insert(both.end(), b.begin(), b.end());
  const Routed ra = route(p, a), rb = route(p, b), rab = route(p, both);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(rab.experts[j], ra.experts[j]);
    EXPECT_EQ(rab.weights[j], ra.weights[j]);
    EXPECT_EQ(rab.experts[3 + j], rb.experts[j]);
    EXPECT_EQ(rab.weights[3 + j], rb.weights[j]);
  }
}

// The margin names the cutoff's gap: softmax in logits, sigmoid over its
// steepest slope, dropped groups by their score; +inf where nothing is cut.
TEST(MoeRouting, MarginIsTheGapAtTheCutoff) {
  float m = 0.0f;
  const std::vector<float> l = {3.0f, 0.5f, 2.0f, 1.25f};
  ops::cpu::moe_route_margin(softmax(4, 2, true), l.data(), 4, 1, &m);
  EXPECT_FLOAT_EQ(m, 0.75f);  // 2.0 (2nd) against 1.25 (3rd)
  ops::cpu::moe_route_margin(softmax(4, 4, true), l.data(), 4, 1, &m);
  EXPECT_TRUE(std::isinf(m));
  const std::vector<float> s = {logit(0.9), logit(0.6), logit(0.5), logit(0.2)};
  ops::cpu::moe_route_margin(sigmoid(4, 2, 1, 1, nullptr), s.data(), 4, 1, &m);
  EXPECT_NEAR(m, 4.0f * 0.1f, 1e-5f);
  // Two groups of two, one kept: 0.9 + 0.6 against 0.5 + 0.2.
  ops::cpu::moe_route_margin(sigmoid(4, 1, 2, 1, nullptr), s.data(), 4, 1, &m);
  EXPECT_NEAR(m, std::min(2.0f * 0.8f, 4.0f * 0.3f), 1e-5f);
}

// Moving every logit by less than half the margin never changes the choice;
// in a softmax, moving the two at the cutoff past it does.
TEST(MoeRouting, ChoiceHoldsWithinTheMargin) {
  std::mt19937 g(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const std::vector<float> bias = {0.05f, 0.0f, 0.1f, 0.02f, 0.0f, 0.07f, 0.03f, 0.0f, 0.01f};
  for (const MoeRoutingParams& p : {softmax(9, 3, true), sigmoid(9, 3, 3, 2, bias.data()), sigmoid(9, 2, 1, 1, nullptr)}) {
    for (int t = 0; t < 200; ++t) {
      std::vector<float> l(9);
      for (float& v : l) v = n(g);
      float m = 0.0f;
      ops::cpu::moe_route_margin(p, l.data(), 9, 1, &m);
      ASSERT_GT(m, 0.0f);
      std::vector<float> moved(l);
      for (float& v : moved) v += (g() % 2 ? 0.49f : -0.49f) * m / 2.0f;  // each side under half the margin
      EXPECT_EQ(route(p, l).experts, route(p, moved).experts) << "trial " << t;
    }
  }
  std::vector<float> l = {3.0f, 0.5f, 2.0f, 1.25f};
  float m = 0.0f;
  ops::cpu::moe_route_margin(softmax(4, 2, true), l.data(), 4, 1, &m);
  l[2] -= 0.51f * m, l[3] += 0.51f * m;
  EXPECT_EQ(route(softmax(4, 2, true), l).experts, (std::vector<int32_t>{0, 3}));
}

}  // namespace
}  // namespace replayssm
