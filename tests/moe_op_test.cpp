// The MoE op (ops/cpu/moe.h) against a dense reference that runs every
// expert on every row in double precision and sums them under the routing
// weights (zero for the experts a row did not choose): both routers, gated
// and plain experts, shared experts with and without gate and biases, odd
// widths. Then what the grouped form promises besides: a row's result does
// not depend on the rows beside it, and an expert no row chose is never read.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/cpu/activation.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/moe.h"
#include "ops/cpu/moe_routing.h"

namespace replayssm {
namespace {

using ops::MoeParams;
using ops::MoeRoutingParams;

std::vector<float> uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// The weights of one test layer, owned here; params() points into them.
struct Layer {
  int64_t E, K, D, I, Is;
  bool gated;
  std::vector<float> router, up, down, bias, s_gate, s_up, s_down, s_gate_b, s_up_b, s_down_b, s_sigmoid;
  MoeParams p;

  Layer(MoeRoutingParams::Scoring scoring, int64_t E_, int64_t K_, int64_t D_, int64_t I_, int64_t Is_, bool gated_,
        uint32_t seed)
      : E(E_), K(K_), D(D_), I(I_), Is(Is_), gated(gated_) {
    const float kd = std::sqrt(3.0f / float(D)), ki = std::sqrt(3.0f / float(I));
    router = uniform(size_t(E * D), -kd, kd, seed);
    up = uniform(size_t(E * (gated ? 2 : 1) * I * D), -kd, kd, seed + 1);
    down = uniform(size_t(E * D * I), -ki, ki, seed + 2);
    bias = uniform(size_t(E), -0.2f, 0.2f, seed + 3);
    p.routing.scoring = scoring;
    p.routing.n_experts = E, p.routing.top_k = K;
    p.hidden = D, p.inter = I, p.gated = gated;
    p.act = gated ? Activation::kSilu : Activation::kRelu2;
    p.router = router.data(), p.up = up.data(), p.down = down.data();
    if (scoring == MoeRoutingParams::kSigmoid) p.routing.correction_bias = bias.data();
    p.shared_inter = Is;
    if (Is > 0) {
      const float ks = std::sqrt(3.0f / float(Is));
      s_gate = uniform(size_t(Is * D), -kd, kd, seed + 4);
      s_up = uniform(size_t(Is * D), -kd, kd, seed + 5);
      s_down = uniform(size_t(D * Is), -ks, ks, seed + 6);
      p.shared_up = s_up.data(), p.shared_down = s_down.data();
      if (gated) p.shared_gate_proj = s_gate.data();
    }
  }
  void with_shared_biases(uint32_t seed) {
    s_gate_b = uniform(size_t(Is), -0.3f, 0.3f, seed);
    s_up_b = uniform(size_t(Is), -0.3f, 0.3f, seed + 1);
    s_down_b = uniform(size_t(D), -0.3f, 0.3f, seed + 2);
    if (gated) p.shared_gate_proj_b = s_gate_b.data();
    p.shared_up_b = s_up_b.data(), p.shared_down_b = s_down_b.data();
  }
  void with_shared_sigmoid(uint32_t seed) {
    s_sigmoid = uniform(size_t(D), -1.0f, 1.0f, seed);
    p.shared_gate = s_sigmoid.data();
  }
};

double act(const MoeParams& p, double x) { return ops::activate(p.act, static_cast<float>(x)); }

// One MLP in double: down(act(gate x) ⊙ up x) or down(act(up x)).
std::vector<double> mlp(const MoeParams& p, const float* x, const float* gate, const float* up, const float* down,
                        int64_t width, const float* gate_b, const float* up_b, const float* down_b) {
  const int64_t D = p.hidden;
  std::vector<double> h(static_cast<size_t>(width)), y(static_cast<size_t>(D));
  for (int64_t j = 0; j < width; ++j) {
    double u = up_b ? up_b[j] : 0.0, g = gate_b ? gate_b[j] : 0.0;
    for (int64_t d = 0; d < D; ++d) {
      u += double(up[j * D + d]) * x[d];
      if (p.gated) g += double(gate[j * D + d]) * x[d];
    }
    h[size_t(j)] = p.gated ? act(p, g) * u : act(p, u);
  }
  for (int64_t d = 0; d < D; ++d) {
    double s = down_b ? down_b[d] : 0.0;
    for (int64_t j = 0; j < width; ++j) s += double(down[d * width + j]) * h[size_t(j)];
    y[size_t(d)] = s;
  }
  return y;
}

// Every expert on every row, weighted by the routing (its rule is
// moe_routing_test's; the logits are the op's own fp32 ones, so the chosen
// sets agree however close a tie).
std::vector<double> dense_reference(const Layer& L, const std::vector<float>& x, int64_t rows) {
  const MoeParams& p = L.p;
  std::vector<float> logits(size_t(rows * L.E)), w(size_t(rows * L.K));
  std::vector<int32_t> chosen(size_t(rows * L.K));
  ops::cpu::matmul(x.data(), L.D, rows, L.D, p.router, L.E, nullptr, logits.data(), L.E);
  ops::cpu::moe_route(p.routing, logits.data(), L.E, rows, chosen.data(), w.data());
  std::vector<double> out(size_t(rows * L.D), 0.0);
  const int64_t U = L.gated ? 2 * L.I : L.I;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * L.D;
    for (int64_t e = 0; e < L.E; ++e) {
      double weight = 0.0;
      for (int64_t j = 0; j < L.K; ++j)
        if (chosen[size_t(r * L.K + j)] == e) weight = w[size_t(r * L.K + j)];
      const float* ue = p.up + e * U * L.D;
      const std::vector<double> y =
          mlp(p, xr, ue, L.gated ? ue + L.I * L.D : ue, p.down + e * L.D * L.I, L.I, nullptr, nullptr, nullptr);
      for (int64_t d = 0; d < L.D; ++d) out[size_t(r * L.D + d)] += weight * y[size_t(d)];
    }
    if (L.Is > 0) {
      const std::vector<double> s = mlp(p, xr, p.shared_gate_proj, p.shared_up, p.shared_down, L.Is,
                                        p.shared_gate_proj_b, p.shared_up_b, p.shared_down_b);
      double g = 1.0;
      if (p.shared_gate != nullptr) {
        double z = 0.0;
        for (int64_t d = 0; d < L.D; ++d) z += double(p.shared_gate[d]) * xr[d];
        g = 1.0 / (1.0 + std::exp(-z));
      }
      for (int64_t d = 0; d < L.D; ++d) out[size_t(r * L.D + d)] += g * s[size_t(d)];
    }
  }
  return out;
}

std::vector<float> run(const Layer& L, const std::vector<float>& x, int64_t rows) {
  std::vector<float> out(size_t(rows * L.D), std::numeric_limits<float>::quiet_NaN());
  ops::cpu::moe(L.p, x.data(), L.D, rows, out.data(), L.D);
  return out;
}

void expect_matches_dense(const Layer& L, int64_t rows, uint32_t seed) {
  const std::vector<float> x = uniform(size_t(rows * L.D), -1.5f, 1.5f, seed);
  const std::vector<float> got = run(L, x, rows);
  const std::vector<double> want = dense_reference(L, x, rows);
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])));
  EXPECT_LT(worst, 2e-5);
}

TEST(MoeOp, SigmoidRoutedRelu2ExpertsWithBiasedSharedExpert) {
  // NemotronH's form at odd sizes: groups, scaling, an ungated shared expert.
  Layer L(MoeRoutingParams::kSigmoid, 9, 3, 37, 11, 13, false, 100);
  L.p.routing.n_group = 3, L.p.routing.topk_group = 2, L.p.routing.routed_scaling_factor = 2.5f;
  L.with_shared_biases(110);
  expect_matches_dense(L, 13, 1);
  L.p.routing.norm_topk_prob = false;
  expect_matches_dense(L, 5, 2);
}

TEST(MoeOp, SoftmaxRoutedSwigluExpertsWithGatedSharedExpert) {
  // Qwen3.5-MoE's form: gate|up experts, a shared expert behind a sigmoid.
  Layer L(MoeRoutingParams::kSoftmax, 7, 3, 24, 9, 10, true, 200);
  L.with_shared_sigmoid(210);
  expect_matches_dense(L, 11, 3);
}

TEST(MoeOp, WithoutASharedExpertAndWithEveryExpertChosen) {
  Layer none(MoeRoutingParams::kSoftmax, 5, 2, 16, 8, 0, true, 300);
  expect_matches_dense(none, 6, 4);
  Layer all(MoeRoutingParams::kSigmoid, 4, 4, 12, 6, 0, false, 400);  // K = E: a dense mixture
  expect_matches_dense(all, 3, 5);
}

TEST(MoeOp, RowsDoNotDependOnEachOther) {
  Layer L(MoeRoutingParams::kSoftmax, 7, 2, 40, 12, 8, true, 500);
  L.with_shared_sigmoid(510);
  const int64_t rows = 9;
  const std::vector<float> x = uniform(size_t(rows * L.D), -1.0f, 1.0f, 6);
  const std::vector<float> all = run(L, x, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> one(x.begin() + r * L.D, x.begin() + (r + 1) * L.D);
    const std::vector<float> alone = run(L, one, 1);
    for (int64_t d = 0; d < L.D; ++d) ASSERT_EQ(alone[size_t(d)], all[size_t(r * L.D + d)]) << "row " << r;
  }
}

TEST(MoeOp, ExpertsNoRowChoseAreNeverRead) {
  // NaN in every expert the rows did not choose: the output stays the same
  // bits, so decoding reads only the chosen experts' weights.
  Layer L(MoeRoutingParams::kSigmoid, 8, 2, 20, 6, 6, false, 600);
  L.p.routing.n_group = 2, L.p.routing.topk_group = 1;
  const int64_t rows = 2;
  const std::vector<float> x = uniform(size_t(rows * L.D), -1.0f, 1.0f, 7);
  std::vector<int32_t> chosen(size_t(rows * L.K));
  std::vector<float> w(chosen.size()), out(size_t(rows * L.D));
  ops::cpu::moe(L.p, x.data(), L.D, rows, out.data(), L.D, chosen.data(), w.data());
  std::vector<bool> used(size_t(L.E), false);
  for (int32_t e : chosen) used[size_t(e)] = true;
  int poisoned = 0;
  for (int64_t e = 0; e < L.E; ++e) {
    if (used[size_t(e)]) continue;
    ++poisoned;
    std::fill_n(L.up.begin() + e * L.I * L.D, L.I * L.D, std::numeric_limits<float>::quiet_NaN());
    std::fill_n(L.down.begin() + e * L.D * L.I, L.D * L.I, std::numeric_limits<float>::quiet_NaN());
  }
  ASSERT_GT(poisoned, 0);
  const std::vector<float> again = run(L, x, rows);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(again[i], out[i]) << i;
}

}  // namespace
}  // namespace replayssm
