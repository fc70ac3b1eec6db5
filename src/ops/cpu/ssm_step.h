// One token of each recurrence, for one head: the single definition of the
// arithmetic that the dense scans, the replay kernels' sequential passes
// and flushes all call, so that exact mode is bit-identical to stepping.
#pragma once

#include <cstdint>

namespace replayssm::ops::cpu {

// Mamba2: S (P, N) ← dA·S + (dt·B) ⊗ x.
inline void mamba2_update_head(float* S, int64_t P, int64_t N, float dA, float dt, const float* B,
                               const float* x) {
  for (int64_t i = 0; i < P; ++i) {
    float* Si = S + i * N;
    for (int64_t n = 0; n < N; ++n) Si[n] = Si[n] * dA + (dt * B[n]) * x[i];
  }
}

// Mamba2 output: y = S·C + D·x.
inline void mamba2_output_head(const float* S, int64_t P, int64_t N, const float* C, float D,
                               const float* x, float* y) {
  for (int64_t i = 0; i < P; ++i) {
    const float* Si = S + i * N;
    float acc = 0.0f;
    for (int64_t n = 0; n < N; ++n) acc += Si[n] * C[n];
    y[i] = acc + D * x[i];
  }
}

// Gated DeltaNet, logged form: S (dk, dv) ← α·S + k·uᵀ.
inline void gdn_decay_head(float* S, int64_t dk, int64_t dv, float alpha) {
  for (int64_t i = 0; i < dk * dv; ++i) S[i] *= alpha;
}
inline void gdn_rank1_head(float* S, int64_t dk, int64_t dv, const float* k, const float* u) {
  for (int64_t i = 0; i < dk; ++i)
    for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += k[i] * u[j];
}

// Gated DeltaNet, one new token after the decay: u = β·(v − Sᵀk).
inline void gdn_correct_head(const float* S, int64_t dk, int64_t dv, const float* k, const float* v,
                             float beta, float* u) {
  for (int64_t j = 0; j < dv; ++j) {
    float mem = 0.0f;
    for (int64_t i = 0; i < dk; ++i) mem += S[i * dv + j] * k[i];
    u[j] = (v[j] - mem) * beta;
  }
}

// o = Sᵀq.
inline void gdn_output_head(const float* S, int64_t dk, int64_t dv, const float* q, float* o) {
  for (int64_t j = 0; j < dv; ++j) {
    float acc = 0.0f;
    for (int64_t i = 0; i < dk; ++i) acc += S[i * dv + j] * q[i];
    o[j] = acc;
  }
}

}  // namespace replayssm::ops::cpu
