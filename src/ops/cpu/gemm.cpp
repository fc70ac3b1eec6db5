// matmul: every output y[m, n] summed in one fixed order, whatever the
// batch — so a row's result does not depend on which rows share its step
// (a BLAS library picks kernels by the matrix's shape, and its rows then
// round differently at M = 1 than at M = 8: measured on OpenBLAS). The
// continuous-batching engine relies on it: a request's tokens are those it
// gets decoded alone, bit for bit.
//
// The order: eight partial sums, lane j taking k ≡ j (mod 8) over the
// first 8·⌊K/8⌋ terms in ascending k; the lanes added pairwise,
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)); the remaining terms
// added one by one; then the bias. Products and sums are single IEEE
// operations (the library is built without contraction), so any vector
// width computes the same bits. Tiles of up to 4 rows × 2 outputs keep
// their 8-lane sums in registers and share each loaded x and w vector;
// threads split the outputs (core/parallel.h).
#include "ops/cpu/gemm.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace replayssm::ops::cpu {

namespace {

// Every helper is inlined into block(), which is compiled once per target
// (target_clones): no vector crosses a call, so the ABI note GCC gives for
// 32-byte vectors without AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v8 __attribute__((vector_size(32)));

__attribute__((always_inline)) inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

__attribute__((always_inline)) inline float reduce8(v8 a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// Rows [m0, m0 + MR) × outputs [n0, n0 + NR).
template <int MR, int NR>
void tile(const float* x, int64_t ldx, int64_t m0, int64_t K, const float* w, int64_t n0, float* y, int64_t ldy) {
  v8 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = v8{};
  const int64_t K8 = K / 8 * 8;
  for (int64_t k = 0; k < K8; k += 8) {
    v8 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load8(w + (n0 + j) * K + k);
    for (int i = 0; i < MR; ++i) {
      const v8 xv = load8(x + (m0 + i) * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] += xv * wv[j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      const float* xr = x + (m0 + i) * ldx;
      const float* wr = w + (n0 + j) * K;
      float s = reduce8(acc[i][j]);
      for (int64_t k = K8; k < K; ++k) s += xr[k] * wr[k];
      y[(m0 + i) * ldy + n0 + j] = s;
    }
}

template <int NR>
void rows(const float* x, int64_t ldx, int64_t M, int64_t K, const float* w, int64_t n0, float* y, int64_t ldy) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) tile<4, NR>(x, ldx, m, K, w, n0, y, ldy);
  switch (M - m) {
    case 3: tile<3, NR>(x, ldx, m, K, w, n0, y, ldy); break;
    case 2: tile<2, NR>(x, ldx, m, K, w, n0, y, ldy); break;
    case 1: tile<1, NR>(x, ldx, m, K, w, n0, y, ldy); break;
    default: break;
  }
}

// Outputs [n_begin, n_end) of every row, a block of outputs at a time so
// the block's weight rows stay in cache across the rows.
__attribute__((target_clones("avx2", "default"), flatten)) void block(const float* x, int64_t ldx, int64_t M, int64_t K,
                                                              const float* w, int64_t n_begin, int64_t n_end,
                                                              float* y, int64_t ldy) {
  const int64_t NB = std::max<int64_t>(2, (int64_t{64} << 10) / std::max<int64_t>(K * 4, 1) / 2 * 2);
  for (int64_t nb = n_begin; nb < n_end; nb += NB) {
    const int64_t ne = std::min(n_end, nb + NB);
    int64_t n = nb;
    for (; n + 2 <= ne; n += 2) rows<2>(x, ldx, M, K, w, n, y, ldy);
    if (n < ne) rows<1>(x, ldx, M, K, w, n, y, ldy);
  }
}

}  // namespace

void matmul(const float* x, int64_t ldx, int64_t M, int64_t K, const float* w, int64_t N, const float* bias,
            float* y, int64_t ldy) {
  if (M == 0 || N == 0) return;
  // Pairs of outputs per task, so a thread's range never splits a tile.
  const int64_t pairs = (N + 1) / 2;
  const int64_t work = M * N * K;
  auto run = [&](int64_t b, int64_t e) { block(x, ldx, M, K, w, 2 * b, std::min(N, 2 * e), y, ldy); };
  if (work < (int64_t{1} << 16)) run(0, pairs);  // not worth waking the pool
  else parallel_for(pairs, run);
  if (bias != nullptr)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * ldy + n] += bias[n];
}

}  // namespace replayssm::ops::cpu
