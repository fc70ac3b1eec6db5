// SSM layer bodies (see ssm_mixer.h): conv, then the reference scans.
#include "ops/cpu/ssm_mixer.h"

#include <cstddef>

#include "ops/cpu/conv1d.h"
#include "ops/cpu/gdn_scan.h"
#include "ops/cpu/mamba2_scan.h"

namespace replayssm::ops::cpu {

void mamba2_mixer(const Conv1dParams& conv, const Mamba2Params& p, float* window, float* state,
                  const float* xbc, int64_t ldxbc, const float* dt, int64_t lddt, int64_t T,
                  float* y, int64_t ldy, std::vector<float>* scratch) {
  const int64_t C = conv.channels;
  scratch->resize(static_cast<size_t>(T * C));
  float* post = scratch->data();
  conv1d_silu(conv, window, xbc, ldxbc, T, post, C);
  const int64_t d_x = p.n_heads * p.head_dim, d_bc = p.n_groups * p.state_size;
  mamba2_scan(p, state, post, C, post + d_x, post + d_x + d_bc, C, dt, lddt, T, y, ldy);
}

void gdn_mixer(const Conv1dParams& conv, const GdnParams& p, float* window, float* state,
               const float* qkv, int64_t ldqkv, const float* a, int64_t lda, const float* b,
               int64_t ldb, int64_t T, float* o, int64_t ldo, std::vector<float>* scratch) {
  const int64_t C = conv.channels, Hv = p.n_v_heads;
  scratch->resize(static_cast<size_t>(T * (C + 2 * Hv)));
  float* post = scratch->data();
  float* g = post + T * C;
  float* beta = g + T * Hv;
  conv1d_silu(conv, window, qkv, ldqkv, T, post, C);
  const int64_t d_qk = p.n_k_heads * p.k_dim;
  float* q = post;
  float* k = post + d_qk;
  const float* v = post + 2 * d_qk;
  gdn_prepare(p, q, k, C, a, lda, b, ldb, T, g, beta);
  gdn_scan(p, state, q, k, C, v, C, g, beta, T, o, ldo);
}

}  // namespace replayssm::ops::cpu
