// mamba2_scan (see mamba2_scan.h). The per-head arithmetic lives in
// ssm_step.h and follows the transformers decode step (state·dA + (dt·B)·x,
// then S·C + D·x), so the two round alike.
#include "ops/cpu/mamba2_scan.h"

#include <algorithm>
#include <cmath>

#include "ops/cpu/activation.h"
#include "ops/cpu/ssm_step.h"

namespace replayssm::ops::cpu {

void mamba2_scan(const Mamba2Params& p, float* state, const float* x, int64_t ldx,
                 const float* B, const float* C, int64_t ldbc, const float* dt_raw, int64_t lddt,
                 int64_t T, float* y, int64_t ldy) {
  const int64_t H = p.n_heads, P = p.head_dim, N = p.state_size;
  const int64_t heads_per_group = H / p.n_groups;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / heads_per_group;
      const float A = -std::exp(p.A_log[h]);
      float dt = softplus(dt_raw[t * lddt + h] + p.dt_bias[h]);
      dt = std::min(std::max(dt, p.dt_min), p.dt_max);
      const float dA = std::exp(dt * A);
      const float* xt = x + t * ldx + h * P;
      const float* Bt = B + t * ldbc + g * N;
      const float* Ct = C + t * ldbc + g * N;
      float* S = state + h * P * N;
      mamba2_update_head(S, P, N, dA, dt, Bt, xt);
      mamba2_output_head(S, P, N, Ct, p.D[h], xt, y + t * ldy + h * P);
    }
  }
}

}  // namespace replayssm::ops::cpu
