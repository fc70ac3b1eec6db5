// Gated DeltaNet: input preparation and the sequential delta-rule scan.
#pragma once

#include <cstdint>

#include "replayssm/op_params.h"

namespace replayssm::ops::cpu {

// In place on post-conv rows: q ← l2norm(q)·dk^-½, k ← l2norm(k) per key head;
// g[t,h] = -exp(A_log[h])·softplus(a[t,h] + dt_bias[h]); beta[t,h] = sigmoid(b[t,h]).
// q, k: (T, Hk·dk) stride ldqk; a, b: (T, Hv) strides lda, ldb; g, beta: (T, Hv) dense.
void gdn_prepare(const GdnParams& p, float* q, float* k, int64_t ldqk, const float* a,
                 int64_t lda, const float* b, int64_t ldb, int64_t T, float* g, float* beta);

// One token's keys k: (Hk·dk), l2-normalised in place per key head — the k
// half of gdn_prepare, which replay calls to rebuild logged keys from the
// pre-conv rows with the same arithmetic (ops/cpu/replay.cpp).
void gdn_normalize_k(const GdnParams& p, float* k);

// For t in [0, T), per value head h with key head kh = h / (Hv/Hk):
//   S ← exp(g)·S ;  u = beta·(v − Sᵀk) ;  S ← S + k·uᵀ ;  o = Sᵀq
// state: (Hv, dk, dv) fp32, in place. q, k: (T, Hk·dk) stride ldqk (prepared);
// v: (T, Hv·dv) stride ldv; g, beta: (T, Hv) dense; o: (T, Hv·dv) stride ldo.
void gdn_scan(const GdnParams& p, float* state, const float* q, const float* k, int64_t ldqk,
              const float* v, int64_t ldv, const float* g, const float* beta, int64_t T, float* o,
              int64_t ldo);

}  // namespace replayssm::ops::cpu
