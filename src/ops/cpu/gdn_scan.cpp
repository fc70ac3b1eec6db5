// Gated DeltaNet reference (see gdn_scan.h). Operation order follows the
// transformers torch_recurrent_gated_delta_rule (decay, read, correct,
// write, output) so that decode rounds as the oracle does.
#include "ops/cpu/gdn_scan.h"

#include <cmath>
#include <vector>

#include "ops/cpu/activation.h"
#include "ops/cpu/ssm_step.h"

namespace replayssm::ops::cpu {

namespace {

void l2norm_scaled(float* x, int64_t n, float eps, float scale) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = (x[i] * inv) * scale;
}

}  // namespace

void gdn_normalize_k(const GdnParams& p, float* k) {
  for (int64_t h = 0; h < p.n_k_heads; ++h) l2norm_scaled(k + h * p.k_dim, p.k_dim, p.l2_eps, 1.0f);
}

void gdn_prepare(const GdnParams& p, float* q, float* k, int64_t ldqk, const float* a,
                 int64_t lda, const float* b, int64_t ldb, int64_t T, float* g, float* beta) {
  const int64_t Hk = p.n_k_heads, Hv = p.n_v_heads, dk = p.k_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < Hk; ++h) l2norm_scaled(q + t * ldqk + h * dk, dk, p.l2_eps, scale);
    gdn_normalize_k(p, k + t * ldqk);
    for (int64_t h = 0; h < Hv; ++h) {
      g[t * Hv + h] = -std::exp(p.A_log[h]) * softplus(a[t * lda + h] + p.dt_bias[h]);
      beta[t * Hv + h] = sigmoid(b[t * ldb + h]);
    }
  }
}

void gdn_scan(const GdnParams& p, float* state, const float* q, const float* k, int64_t ldqk,
              const float* v, int64_t ldv, const float* g, const float* beta, int64_t T, float* o,
              int64_t ldo) {
  const int64_t Hk = p.n_k_heads, Hv = p.n_v_heads, dk = p.k_dim, dv = p.v_dim;
  const int64_t rep = Hv / Hk;
  std::vector<float> u(static_cast<size_t>(dv));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < Hv; ++h) {
      const int64_t kh = h / rep;
      const float* qt = q + t * ldqk + kh * dk;
      const float* kt = k + t * ldqk + kh * dk;
      const float* vt = v + t * ldv + h * dv;
      const float alpha = std::exp(g[t * Hv + h]);
      const float bt = beta[t * Hv + h];
      float* S = state + h * dk * dv;  // S[i*dv + j], i over dk, j over dv
      gdn_decay_head(S, dk, dv, alpha);
      gdn_correct_head(S, dk, dv, kt, vt, bt, u.data());
      gdn_rank1_head(S, dk, dv, kt, u.data());
      gdn_output_head(S, dk, dv, qt, o + t * ldo + h * dv);
    }
  }
}

}  // namespace replayssm::ops::cpu
