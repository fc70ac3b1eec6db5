// Rotary position embedding on the first `rot_dim` dims of each head
// (partial rotary), rotate-half convention (Llama/Qwen, not interleaved).
#pragma once

#include <cstdint>

namespace replayssm::ops::cpu {

// x: (T, heads·head_dim) stride ldx, positions pos0 .. pos0+T-1, in place.
// inv_freq[i] = theta^(-2i/rot_dim), i < rot_dim/2; for pair (i, i+rot_dim/2):
//   x_i' = x_i·cos − x_{i+r/2}·sin ;  x_{i+r/2}' = x_{i+r/2}·cos + x_i·sin
void rope(float* x, int64_t ldx, int64_t T, int64_t pos0, int64_t heads, int64_t head_dim,
          int64_t rot_dim, float theta);

}  // namespace replayssm::ops::cpu
