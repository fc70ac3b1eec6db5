// What the attention decode kernels share (attention_decode.cu,
// attention_decode_mma.cu): a context row's address through the page
// table, and a block's end — its warps' partial softmaxes merged and
// written out, or left in the scratch for the splits' combine.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "ops/cuda/attention_decode.h"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

__device__ __forceinline__ const uint16_t* kv_row(const uint16_t* const* pages, const PagedKv& kv, int b, int64_t p) {
  return pages[kv.page_table[int64_t(b) * kv.max_pages + p / kv.page_size]] + (p % kv.page_size) * kv.row_stride;
}

// Split sp's rows [j0, j1) of a sequence of L rows (AttentionSplits); false
// where it has none — past the sequence's end, which the combine skips.
// One split takes every row.
__device__ __forceinline__ bool split_span(const AttentionSplits& s, int sp, int L, int64_t& j0, int64_t& j1) {
  if (s.n == 1) return j0 = 0, j1 = L, true;
  // Most of the grid under a large bound: the block leaves before the division.
  if (attention_split_past_end(s, sp, L)) return false;
  const int64_t rows = attention_split_rows_of(s, L);
  j0 = sp * rows, j1 = sp == s.n - 1 ? L : min(int64_t(L), j0 + rows);
  return j0 < j1;
}
// The splits holding rows of a sequence of L rows (split_span true).
__device__ __forceinline__ int splits_used(const AttentionSplits& s, int L) {
  if (L <= 0) return 0;
  return min(s.n, (L - 1) / attention_split_rows_of(s, L) + 1);
}

// The final value of head h, dim d of sequence b: gated, rounded, stored.
__device__ __forceinline__ void write_out(const AttentionDecodeArgs& a, int b, int h, int d, float o) {
  if (a.gate != nullptr) o *= sigmoid_f(bf(a.gate, int64_t(b) * a.ldg + int64_t(h) * a.g_head_stride + d));
  put_bf(a.out, int64_t(b) * a.ldo + int64_t(h) * a.D + d, o);
}

// The block's end: the nw warps' partials (sM, sL: (nw, rep); sA: (nw,
// rep, D)) merged per query head and dim, then written out (one split) or
// left in the scratch for attention_combine_kernel.
__device__ inline void merge_warps(const AttentionDecodeArgs& a, int b, int kvh, int sp, int n_splits, int nw,
                                   const float* sM, const float* sL, const float* sA) {
  const int rep = a.Hq / a.Hkv, D = a.D;
  __syncthreads();
  for (int i = threadIdx.x; i < rep * D; i += blockDim.x) {
    const int r = i / D, d = i % D, h = kvh * rep + r;
    float M = -INFINITY, Ls = 0.0f, A = 0.0f;
    for (int k = 0; k < nw; ++k) M = fmaxf(M, sM[k * rep + r]);
    if (M != -INFINITY)
      for (int k = 0; k < nw; ++k) {
        const float f = expf(sM[k * rep + r] - M);  // 0 for a warp without rows
        Ls += sL[k * rep + r] * f;
        A += sA[(k * rep + r) * D + d] * f;
      }
    if (n_splits == 1) {
      write_out(a, b, h, d, Ls > 0.0f ? A / Ls : 0.0f);
    } else {
      float* part = a.scratch + ((int64_t(b) * a.Hq + h) * n_splits + sp) * (D + 2);  // (D) A | M | L
      part[d] = A;
      if (d == 0) part[D] = M, part[D + 1] = Ls;
    }
  }
}

}  // namespace replayssm::ops::cuda
