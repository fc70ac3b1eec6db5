// CPU reference kernels against naive double-precision formulas (DESIGN.md
// §2), and segment invariance: running T tokens at once or in pieces,
// carrying the conv window and state, gives the same outputs and state.
// Inputs are in the valid domain (A < 0, dt > 0, decays in (0, 1)) at odd
// sizes; states are checked as well as outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/cpu/activation.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/conv1d.h"
#include "ops/cpu/gdn_scan.h"
#include "ops/cpu/mamba2_scan.h"
#include "ops/cpu/norm.h"
#include "ops/cpu/rope.h"
#include "ops/cpu/ssm_mixer.h"

namespace replayssm::ops::cpu {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

void expect_close(const std::vector<float>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << "at " << i;
}

TEST(Conv1d, MatchesFormulaAndCarriesWindow) {
  const int64_t C = 7, K = 4, T = 9;
  auto w = randn(C * K, 1), b = randn(C, 2), x = randn(T * C, 3);
  Conv1dParams p{C, K, w.data(), b.data()};
  std::vector<float> win(static_cast<size_t>((K - 1) * C), 0.0f), y(T * C);
  conv1d_silu(p, win.data(), x.data(), C, T, y.data(), C);
  std::vector<double> ref(T * C);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double acc = b[c];
      for (int64_t j = 0; j < K; ++j) {
        const int64_t src = t - (K - 1) + j;
        if (src >= 0) acc += static_cast<double>(w[c * K + j]) * x[src * C + c];
      }
      ref[t * C + c] = acc / (1 + std::exp(-acc));
    }
  expect_close(y, ref, 1e-6);
  // Window = last K-1 input rows.
  for (int64_t r = 0; r < K - 1; ++r)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(win[r * C + c], x[(T - (K - 1) + r) * C + c]);
  // Pieces shorter and longer than the window give identical results.
  std::vector<float> win2((K - 1) * C, 0.0f), y2(T * C);
  int64_t t0 = 0;
  for (int64_t len : {1, 2, 4, 2}) {
    conv1d_silu(p, win2.data(), x.data() + t0 * C, C, len, y2.data() + t0 * C, C);
    t0 += len;
  }
  EXPECT_EQ(y, y2);
  EXPECT_EQ(win, win2);
}

struct Mamba2Case {
  int64_t H = 6, P = 5, N = 11, G = 3, T = 13;
  std::vector<float> A_log, D, dt_bias, x, B, C, dt;
  Mamba2Params p;
  explicit Mamba2Case(uint32_t s) {
    A_log = randn(H, s, 0.5f);
    D = randn(H, s + 1);
    dt_bias = randn(H, s + 2, 0.5f);
    x = randn(T * H * P, s + 3);
    B = randn(T * G * N, s + 4);
    C = randn(T * G * N, s + 5);
    dt = randn(T * H, s + 6);
    p = {H, P, N, G, A_log.data(), D.data(), dt_bias.data(), 0.0f, INFINITY};
  }
};

TEST(Mamba2Scan, MatchesRecurrenceInDouble) {
  Mamba2Case c(10);
  const int64_t H = c.H, P = c.P, N = c.N, G = c.G, T = c.T;
  std::vector<float> state(H * P * N), y(T * H * P);
  auto s0 = randn(H * P * N, 99);  // non-zero initial state
  state = s0;
  mamba2_scan(c.p, state.data(), c.x.data(), H * P, c.B.data(), c.C.data(), G * N, c.dt.data(), H, T,
              y.data(), H * P);
  std::vector<double> S(s0.begin(), s0.end()), yr(T * H * P);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      const double dt = std::log1p(std::exp(double(c.dt[t * H + h]) + c.dt_bias[h]));
      const double a = std::exp(-dt * std::exp(double(c.A_log[h])));
      ASSERT_GT(a, 0.0);
      ASSERT_LT(a, 1.0);
      for (int64_t i = 0; i < P; ++i) {
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& s = S[(h * P + i) * N + n];
          s = a * s + dt * c.x[t * H * P + h * P + i] * c.B[t * G * N + g * N + n];
          acc += s * c.C[t * G * N + g * N + n];
        }
        yr[t * H * P + h * P + i] = acc + c.D[h] * c.x[t * H * P + h * P + i];
      }
    }
  expect_close(y, yr, 1e-5);
  expect_close(state, S, 1e-5);
}

TEST(Mamba2Scan, DtClampApplies) {
  Mamba2Case c(20);
  Mamba2Params clamped = c.p;
  clamped.dt_min = 0.5f;
  clamped.dt_max = 0.5f;  // every dt becomes exactly 0.5
  std::vector<float> s1(c.H * c.P * c.N), s2(s1.size()), y1(c.T * c.H * c.P), y2(y1.size());
  std::vector<float> dt2(c.dt.size());
  for (int64_t t = 0; t < c.T; ++t)  // raw dt whose softplus(dt + bias) is 0.5
    for (int64_t h = 0; h < c.H; ++h) dt2[t * c.H + h] = std::log(std::exp(0.5f) - 1.0f) - c.dt_bias[h];
  mamba2_scan(clamped, s1.data(), c.x.data(), c.H * c.P, c.B.data(), c.C.data(), c.G * c.N, c.dt.data(), c.H, c.T, y1.data(), c.H * c.P);
  mamba2_scan(c.p, s2.data(), c.x.data(), c.H * c.P, c.B.data(), c.C.data(), c.G * c.N, dt2.data(), c.H, c.T, y2.data(), c.H * c.P);
  for (size_t i = 0; i < y1.size(); ++i) ASSERT_NEAR(y1[i], y2[i], 1e-4 * (1 + std::abs(y2[i])));
}

TEST(Mamba2Mixer, SegmentsEqualWhole) {
  const int64_t H = 4, P = 3, N = 7, G = 2, K = 4, T = 11;
  const int64_t C = H * P + 2 * G * N;
  auto A_log = randn(H, 1, 0.5f), D = randn(H, 2), dtb = randn(H, 3), cw = randn(C * K, 4), cb = randn(C, 5);
  auto xbc = randn(T * C, 6), dt = randn(T * H, 7);
  Conv1dParams conv{C, K, cw.data(), cb.data()};
  Mamba2Params p{H, P, N, G, A_log.data(), D.data(), dtb.data(), 0.0f, INFINITY};
  std::vector<float> scratch;
  std::vector<float> w1((K - 1) * C), s1(H * P * N), y1(T * H * P);
  mamba2_mixer(conv, p, w1.data(), s1.data(), xbc.data(), C, dt.data(), H, T, y1.data(), H * P, &scratch);
  std::vector<float> w2((K - 1) * C), s2(H * P * N), y2(T * H * P);
  for (int64_t t = 0; t < T; ++t)
    mamba2_mixer(conv, p, w2.data(), s2.data(), xbc.data() + t * C, C, dt.data() + t * H, H, 1,
                 y2.data() + t * H * P, H * P, &scratch);
  EXPECT_EQ(y1, y2);  // same operation order: bit-identical
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(w1, w2);
}

TEST(GdnScan, MatchesDeltaRuleInDouble) {
  const int64_t Hk = 2, Hv = 6, dk = 5, dv = 7, T = 9;
  auto q = randn(T * Hk * dk, 1), k = randn(T * Hk * dk, 2), v = randn(T * Hv * dv, 3);
  auto a = randn(T * Hv, 4), b = randn(T * Hv, 5), A_log = randn(Hv, 6, 0.5f), dtb = randn(Hv, 7, 0.5f);
  GdnParams p{Hk, Hv, dk, dv, A_log.data(), dtb.data()};
  std::vector<float> g(T * Hv), beta(T * Hv);
  auto qn = q, kn = k;
  gdn_prepare(p, qn.data(), kn.data(), Hk * dk, a.data(), Hv, b.data(), Hv, T, g.data(), beta.data());
  auto s0 = randn(Hv * dk * dv, 8, 0.3f);
  std::vector<float> state = s0, o(T * Hv * dv);
  gdn_scan(p, state.data(), qn.data(), kn.data(), Hk * dk, v.data(), Hv * dv, g.data(), beta.data(), T, o.data(), Hv * dv);
  std::vector<double> S(s0.begin(), s0.end()), oref(T * Hv * dv);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hv; ++h) {
      const int64_t kh = h / (Hv / Hk);
      std::vector<double> qq(dk), kk(dk);
      double nq = 0, nk = 0;
      for (int64_t i = 0; i < dk; ++i) {
        qq[i] = q[t * Hk * dk + kh * dk + i];
        kk[i] = k[t * Hk * dk + kh * dk + i];
        nq += qq[i] * qq[i];
        nk += kk[i] * kk[i];
      }
      for (int64_t i = 0; i < dk; ++i) {
        qq[i] = qq[i] / std::sqrt(nq + 1e-6) / std::sqrt(double(dk));
        kk[i] = kk[i] / std::sqrt(nk + 1e-6);
      }
      const double gg = -std::exp(double(A_log[h])) * std::log1p(std::exp(double(a[t * Hv + h]) + dtb[h]));
      const double alpha = std::exp(gg), bt = 1 / (1 + std::exp(-double(b[t * Hv + h])));
      ASSERT_GT(alpha, 0.0);
      ASSERT_LT(alpha, 1.0);
      double* Sh = S.data() + h * dk * dv;
      for (int64_t i = 0; i < dk * dv; ++i) Sh[i] *= alpha;
      for (int64_t j = 0; j < dv; ++j) {
        double mem = 0;
        for (int64_t i = 0; i < dk; ++i) mem += Sh[i * dv + j] * kk[i];
        const double u = bt * (v[t * Hv * dv + h * dv + j] - mem);
        for (int64_t i = 0; i < dk; ++i) Sh[i * dv + j] += kk[i] * u;
      }
      for (int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < dk; ++i) acc += Sh[i * dv + j] * qq[i];
        oref[t * Hv * dv + h * dv + j] = acc;
      }
    }
  expect_close(o, oref, 1e-5);
  expect_close(state, S, 1e-5);
}

TEST(GdnMixer, SegmentsEqualWhole) {
  const int64_t Hk = 1, Hv = 3, dk = 4, dv = 6, K = 4, T = 10;
  const int64_t C = 2 * Hk * dk + Hv * dv;
  auto cw = randn(C * K, 1), qkv = randn(T * C, 2), a = randn(T * Hv, 3), b = randn(T * Hv, 4);
  auto A_log = randn(Hv, 5, 0.5f), dtb = randn(Hv, 6);
  Conv1dParams conv{C, K, cw.data(), nullptr};
  GdnParams p{Hk, Hv, dk, dv, A_log.data(), dtb.data()};
  std::vector<float> scratch;
  std::vector<float> w1((K - 1) * C), s1(Hv * dk * dv), o1(T * Hv * dv);
  gdn_mixer(conv, p, w1.data(), s1.data(), qkv.data(), C, a.data(), Hv, b.data(), Hv, T, o1.data(), Hv * dv, &scratch);
  std::vector<float> w2((K - 1) * C), s2(Hv * dk * dv), o2(T * Hv * dv);
  for (int64_t t0 = 0; t0 < T; t0 += 3) {
    const int64_t n = std::min<int64_t>(3, T - t0);
    gdn_mixer(conv, p, w2.data(), s2.data(), qkv.data() + t0 * C, C, a.data() + t0 * Hv, Hv,
              b.data() + t0 * Hv, Hv, n, o2.data() + t0 * Hv * dv, Hv * dv, &scratch);
  }
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(w1, w2);
}

TEST(Attention, MatchesSoftmaxInDoubleWithGqa) {
  const int64_t Hq = 6, Hkv = 2, D = 5, pos0 = 4, T = 3, L = pos0 + T;
  auto q = randn(T * Hq * D, 1), k = randn(L * Hkv * D, 2), v = randn(L * Hkv * D, 3);
  AttentionParams p{Hq, Hkv, D, 1.0f / std::sqrt(5.0f)};
  std::vector<float> o(T * Hq * D);
  // Pages of 3 rows: the view must stitch them.
  std::vector<const float*> kp, vp;
  for (int64_t r = 0; r < L; r += 3) {
    kp.push_back(k.data() + r * Hkv * D);
    vp.push_back(v.data() + r * Hkv * D);
  }
  attention(p, q.data(), Hq * D, pos0, T, KvView{kp.data(), vp.data(), 3, Hkv * D}, o.data(), Hq * D);
  std::vector<double> ref(T * Hq * D, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / 3, n = pos0 + t + 1;
      std::vector<double> s(n);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += double(q[(t * Hq + h) * D + i]) * k[(j * Hkv + kh) * D + i];
        s[j] = d / std::sqrt(5.0);
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < D; ++i) ref[(t * Hq + h) * D + i] += s[j] / sum * v[(j * Hkv + kh) * D + i];
    }
  expect_close(o, ref, 1e-5);
}

TEST(Rope, PartialRotationOfPairs) {
  const int64_t H = 2, D = 8, rot = 4, T = 3;
  auto x = randn(T * H * D, 1);
  auto y = x;
  rope(y.data(), H * D, T, 5, H, D, rot, 10000.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const float* a = x.data() + (t * H + h) * D;
      const float* b = y.data() + (t * H + h) * D;
      for (int64_t i = rot; i < D; ++i) EXPECT_EQ(a[i], b[i]);  // pass-through dims
      for (int64_t i = 0; i < rot / 2; ++i) {
        const double ang = (5 + t) * std::pow(10000.0, -2.0 * i / rot);
        EXPECT_NEAR(b[i], a[i] * std::cos(ang) - a[i + rot / 2] * std::sin(ang), 1e-5);
        EXPECT_NEAR(b[i + rot / 2], a[i + rot / 2] * std::cos(ang) + a[i] * std::sin(ang), 1e-5);
      }
    }
}

TEST(Norm, GatedGroupNormGatesBeforeNormalising) {
  const int64_t dim = 12, gs = 4;
  auto x = randn(dim, 1), z = randn(dim, 2), w = randn(dim, 3);
  std::vector<float> y(dim);
  rmsnorm_gated_group(x.data(), dim, z.data(), dim, 1, dim, gs, w.data(), 1e-5f, y.data(), dim);
  std::vector<double> ref(dim);
  for (int64_t g0 = 0; g0 < dim; g0 += gs) {
    double ss = 0;
    std::vector<double> v(gs);
    for (int64_t i = 0; i < gs; ++i) {
      v[i] = x[g0 + i] * (z[g0 + i] / (1 + std::exp(-double(z[g0 + i]))));
      ss += v[i] * v[i];
    }
    for (int64_t i = 0; i < gs; ++i) ref[g0 + i] = w[g0 + i] * v[i] / std::sqrt(ss / gs + 1e-5);
  }
  expect_close(y, ref, 1e-5);
}

TEST(Norm, UnitOffsetWeights) {
  auto x = randn(6, 1), w = randn(6, 2);
  std::vector<float> a(6), b(6);
  rmsnorm(x.data(), 6, 1, 6, w.data(), 1e-6f, true, a.data(), 6);
  std::vector<float> w1(6);
  for (int i = 0; i < 6; ++i) w1[i] = 1.0f + w[i];
  rmsnorm(x.data(), 6, 1, 6, w1.data(), 1e-6f, false, b.data(), 6);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace replayssm::ops::cpu
