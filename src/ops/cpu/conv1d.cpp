// conv1d_silu: out[t,c] = silu(b[c] + Σ_j w[c,j]·row[t-K+1+j, c]), where rows
// before the segment come from the window. Same as torch's conv1d with K-1
// left padding truncated to T, when the window starts as zeros.
#include "ops/cpu/conv1d.h"

#include <cstring>

#include "ops/cpu/activation.h"

namespace replayssm::ops::cpu {

void conv1d_silu(const Conv1dParams& p, float* window, const float* x, int64_t ldx, int64_t T,
                 float* y, int64_t ldy) {
  const int64_t C = p.channels, K = p.width;
  // Row r of the virtual sequence [window; x]: r < K-1 is the window.
  auto row = [&](int64_t r) -> const float* {
    return r < K - 1 ? window + r * C : x + (r - (K - 1)) * ldx;
  };
  for (int64_t t = 0; t < T; ++t) {
    float* out = y + t * ldy;
    for (int64_t c = 0; c < C; ++c) {
      float acc = p.bias != nullptr ? p.bias[c] : 0.0f;
      for (int64_t j = 0; j < K; ++j) acc += p.weight[c * K + j] * row(t + j)[c];
      out[c] = silu(acc);
    }
  }
  // New window = last K-1 rows of [window; x].
  if (T >= K - 1) {
    for (int64_t r = 0; r < K - 1; ++r)
      std::memcpy(window + r * C, x + (T - (K - 1) + r) * ldx, sizeof(float) * C);
  } else {
    // Shift the window left by T rows, then append the segment.
    std::memmove(window, window + T * C, sizeof(float) * C * (K - 1 - T));
    for (int64_t r = 0; r < T; ++r)
      std::memcpy(window + (K - 1 - T + r) * C, x + r * ldx, sizeof(float) * C);
  }
}

}  // namespace replayssm::ops::cpu
