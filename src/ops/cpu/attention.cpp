// Reference attention (see attention.h): plain two-pass softmax per query.
#include "ops/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace replayssm::ops::cpu {

void attention(const AttentionParams& p, const float* q, int64_t ldq, int64_t pos0, int64_t T,
               const KvView& kv, float* out, int64_t ldo) {
  const int64_t Hq = p.n_heads, D = p.head_dim, rep = p.n_heads / p.n_kv_heads;
  std::vector<float> s(static_cast<size_t>(pos0 + T));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t L = pos0 + t + 1;
    for (int64_t h = 0; h < Hq; ++h) {
      const float* qh = q + t * ldq + h * D;
      const int64_t kvh = h / rep;
      float mx = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        const float* kj = kv.k(j) + kvh * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += qh[d] * kj[d];
        s[j] = dot * p.scale;
        mx = std::max(mx, s[j]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < L; ++j) {
        s[j] = std::exp(s[j] - mx);
        sum += s[j];
      }
      const float inv = 1.0f / sum;
      float* oh = out + t * ldo + h * D;
      std::fill(oh, oh + D, 0.0f);
      for (int64_t j = 0; j < L; ++j) {
        const float* vj = kv.v(j) + kvh * D;
        const float w = s[j] * inv;
        for (int64_t d = 0; d < D; ++d) oh[d] += w * vj[d];
      }
    }
  }
}

}  // namespace replayssm::ops::cpu
