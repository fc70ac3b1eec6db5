// rope (see rope.h). Angles are formed as torch forms them: inv_freq in fp32,
// pos·inv_freq in fp32, then cos/sin of that fp32 value.
#include "ops/cpu/rope.h"

#include <cmath>
#include <vector>

namespace replayssm::ops::cpu {

void rope(float* x, int64_t ldx, int64_t T, int64_t pos0, int64_t heads, int64_t head_dim,
          int64_t rot_dim, float theta) {
  const int64_t half = rot_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half)), c(half), s(half);
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(rot_dim));
  for (int64_t t = 0; t < T; ++t) {
    const float pos = static_cast<float>(pos0 + t);
    for (int64_t i = 0; i < half; ++i) {
      const float f = pos * inv_freq[i];
      c[i] = std::cos(f);
      s[i] = std::sin(f);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + t * ldx + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = xh[i], b = xh[i + half];
        xh[i] = a * c[i] - b * s[i];
        xh[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

}  // namespace replayssm::ops::cpu
