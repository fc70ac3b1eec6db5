// matmul: one cblas_sgemm call; the pthread OpenBLAS build spreads it over
// every core, which is where the CPU reference spends most of its time.
#include "ops/cpu/gemm.h"

#include <cblas.h>

namespace replayssm::ops::cpu {

void matmul(const float* x, int64_t ldx, int64_t M, int64_t K, const float* w, int64_t N,
            const float* bias, float* y, int64_t ldy) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), 1.0f, x, static_cast<int>(ldx), w, static_cast<int>(K), 0.0f, y,
              static_cast<int>(ldy));
  if (bias != nullptr)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * ldy + n] += bias[n];
}

}  // namespace replayssm::ops::cpu
