// One Gated DeltaNet state element advanced by one token — the single
// definition of the update's rounding that the standard steps, the exact
// replay and the chunk scan all use, so that a state rebuilt from the log
// (S ← αS + k·uᵀ with the logged u) has the bits the step wrote.
#pragma once

#include "ops/cuda/gdn_decode.h"

namespace replayssm::ops::cuda {

// αs + k·u: the decay rounded first, then one fused multiply-add. Spelled
// with intrinsics so that no kernel's contraction rounds it otherwise.
__device__ __forceinline__ float gdn_update(float s, float alpha, float k, float u) {
  return __fmaf_rn(k, u, __fmul_rn(s, alpha));
}

// A replay step's place in sequence b's log (every GDN replay kernel): the
// step's T tokens are the last T of n_log entries, from `base`; the first
// f ≤ base fold (kFold false: none). Zeros without kLog (a standard step).
struct GdnLogSpan {
  int n_log = 0, base = 0, f = 0;
};
template <bool kLog, bool kFold = true>
__device__ __forceinline__ GdnLogSpan gdn_log_span(const GdnDecodeArgs& a, int b) {
  GdnLogSpan s;
  if constexpr (kLog) {
    s.n_log = min(max(a.n_log[b], a.T), a.W);
    s.base = s.n_log - a.T;
    s.f = kFold && a.fold != nullptr ? min(max(a.fold[b], 0), min(s.base, a.max_fold)) : 0;
  }
  return s;
}

}  // namespace replayssm::ops::cuda
