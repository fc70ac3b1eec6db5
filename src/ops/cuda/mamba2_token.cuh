// One Mamba2 token applied to a pass of state rows in registers — the
// single definition of the per-token arithmetic that the standard step,
// the exact and wide replays and the chunk scan all run, so that they are
// bit-identical to stepping (as ops/cpu/ssm_step.h is for the CPU kernels).
#pragma once

#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

// S ← S·dA + B ⊗ (dt·x) on the pass's rows, and acc[r] = S_r·C (this
// thread's part; finish with TileT::row_sums). x: the token's x at the
// pass's rows (index by row within the pass), rows: rows in the pass.
// kOut = false: the state update alone (a token with no output; C and acc
// are not touched).
template <typename TileT, bool kOut = true>
__device__ __forceinline__ void mamba2_token_rows(TileT& cur, float dA, float dt,
                                                  const float (&Bc)[TileT::kColChunks][TileT::kVec],
                                                  const float (&Cc)[TileT::kColChunks][TileT::kVec], const float* x,
                                                  int rows, int nw, int w, float (&acc)[TileT::kRows]) {
#pragma unroll
  for (int r = 0; r < TileT::kRows; ++r) {
    const int i = TileT::row(w, nw, r);
    const float dtx = i < rows ? __fmul_rn(dt, x[i]) : 0.0f;
    if constexpr (kOut) acc[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
      for (int e = 0; e < TileT::kVec; ++e) {
        // Explicit roundings: no contraction choice may differ between kernels.
        const float s = __fmaf_rn(cur.v[r][j][e], dA, __fmul_rn(Bc[j][e], dtx));
        cur.v[r][j][e] = s;
        if constexpr (kOut) acc[r] = __fmaf_rn(s, Cc[j][e], acc[r]);
      }
  }
}

}  // namespace replayssm::ops::cuda
