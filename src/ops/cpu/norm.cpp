// Reference RMS norms (see norm.h). Sums run in fp32 in index order, the
// order the CUDA kernels' parity test tolerates and torch approximates.
#include "ops/cpu/norm.h"

#include <cmath>
#include <vector>

#include "ops/cpu/activation.h"

namespace replayssm::ops::cpu {

namespace {

// y[0..n) = x · rsqrt(mean(x²) + eps) · (w or 1 + w); w may be nullptr (= 1).
void rms_row(const float* x, int64_t n, const float* w, float eps, bool unit_offset, float* y) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float wi = w == nullptr ? 1.0f : (unit_offset ? 1.0f + w[i] : w[i]);
    y[i] = wi * (x[i] * inv);
  }
}

}  // namespace

void rmsnorm(const float* x, int64_t ldx, int64_t rows, int64_t dim, const float* w, float eps,
             bool unit_offset, float* y, int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r) rms_row(x + r * ldx, dim, w, eps, unit_offset, y + r * ldy);
}

void rmsnorm_gated_group(const float* x, int64_t ldx, const float* z, int64_t ldz, int64_t rows,
                         int64_t dim, int64_t group_size, const float* w, float eps, float* y,
                         int64_t ldy) {
  std::vector<float> g(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) g[i] = x[r * ldx + i] * silu(z[r * ldz + i]);
    for (int64_t g0 = 0; g0 < dim; g0 += group_size)
      rms_row(g.data() + g0, group_size, w + g0, eps, false, y + r * ldy + g0);
  }
}

void rmsnorm_then_gate(const float* x, int64_t ldx, const float* z, int64_t ldz, int64_t rows,
                       int64_t heads, int64_t head_dim, const float* w, float eps, float* y,
                       int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      float* yr = y + r * ldy + h * head_dim;
      rms_row(x + r * ldx + h * head_dim, head_dim, w, eps, false, yr);
      const float* zr = z + r * ldz + h * head_dim;
      for (int64_t i = 0; i < head_dim; ++i) yr[i] *= silu(zr[i]);
    }
}

}  // namespace replayssm::ops::cpu
