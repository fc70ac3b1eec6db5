// RMS norms of the two families (fp32 math, as transformers computes them).
#pragma once

#include <cstdint>

namespace replayssm::ops::cpu {

// y = x · rsqrt(mean(x²) + eps) · w', per row of `dim`, where w' = w, or
// 1 + w when `unit_offset` (Qwen3.5's zero-centred weights). In place is fine.
void rmsnorm(const float* x, int64_t ldx, int64_t rows, int64_t dim, const float* w, float eps,
             bool unit_offset, float* y, int64_t ldy);

// Mamba2 gated group norm: g = x ⊙ silu(z) (gate BEFORE the norm), then an
// RMS norm over each of `dim / group_size` groups, times w. In place is fine.
void rmsnorm_gated_group(const float* x, int64_t ldx, const float* z, int64_t ldz, int64_t rows,
                         int64_t dim, int64_t group_size, const float* w, float eps, float* y,
                         int64_t ldy);

// Gated DeltaNet output norm: RMS norm of each head row of `head_dim` (shared
// weight w), THEN ⊙ silu(z). x, z, y are (rows, heads·head_dim).
void rmsnorm_then_gate(const float* x, int64_t ldx, const float* z, int64_t ldz, int64_t rows,
                       int64_t heads, int64_t head_dim, const float* w, float eps, float* y,
                       int64_t ldy);

}  // namespace replayssm::ops::cpu
