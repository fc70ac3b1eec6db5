// embedding and argmax (see sampling.h). The gather is one thread per
// element (coalesced along H); the argmax a block per row, each thread
// scanning a strided slice and keeping its first maximum, then a warp and
// block reduction ordered by (value, lower index) so the result does not
// depend on the thread count.
#include "ops/cuda/sampling.h"

#include <cmath>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kEmbedThreads = 256;
constexpr int kArgmaxThreads = 1024;  // one block scans a 131k-vocab row: as many threads as a block has

__global__ void __launch_bounds__(kEmbedThreads) embedding_kernel(const int32_t* token, const uint16_t* table,
                                                                  int64_t V, int64_t H, int64_t ldt, float* h,
                                                                  int64_t ldh) {
  pdl_begin();
  const int64_t c = int64_t(blockIdx.y) * blockDim.x + threadIdx.x, r = blockIdx.x;
  if (c >= H) return;
  const int64_t t = token[r];
  h[r * ldh + c] = t >= 0 && t < V ? bf(table, t * ldt + c) : 0.0f;
}

__global__ void __launch_bounds__(kArgmaxThreads) argmax_kernel(const float* logits, int64_t ld, int64_t V,
                                                                int32_t* out) {
  pdl_begin();
  __shared__ float rv[kMaxBlockWarps];
  __shared__ int32_t ri[kMaxBlockWarps];
  const float* row = logits + int64_t(blockIdx.x) * ld;
  float bv = -INFINITY;
  int32_t bi = 0x7fffffff;
  auto consider = [&](float v, int64_t i) {
    if (argmax_better(v, int32_t(i), bv, bi)) bv = v, bi = int32_t(i);
  };
  // One block scans a 131k-vocab row at batch 1: 16-byte loads, several in
  // flight, or the scan is a chain of dependent scalar loads (34 µs, ncu).
  int64_t i0 = 0;
  if (ld % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    i0 = V / 4 * 4;
#pragma unroll 4
    for (int64_t j = threadIdx.x; j < V / 4; j += blockDim.x) {
      const float4 q = row4[j];
      consider(q.x, 4 * j), consider(q.y, 4 * j + 1), consider(q.z, 4 * j + 2), consider(q.w, 4 * j + 3);
    }
  }
  for (int64_t i = i0 + threadIdx.x; i < V; i += blockDim.x) consider(row[i], i);
  block_argmax(bv, bi, rv, ri);
  if (threadIdx.x == 0) out[blockIdx.x] = isnan(row[0]) || bi == 0x7fffffff ? 0 : bi;
}

// Σ over the block in fp64; every thread gets it. red: kMaxBlockWarps doubles.
// Pass 0 finds the maximum, then the log-sum-exp as the CPU sums it
// (exp of the float difference, in fp64); pass j picks the best element
// ordered after pass j−1's pick (smaller value, or equal value and higher
// id) — log-probabilities order as the logits do.
__global__ void __launch_bounds__(kArgmaxThreads) top_logprobs_kernel(const float* logits, int64_t ld, int64_t V,
                                                                      int k, int32_t* ids, double* lp) {
  pdl_begin();
  __shared__ float rv[kMaxBlockWarps];
  __shared__ int32_t ri[kMaxBlockWarps];
  __shared__ double rd[kMaxBlockWarps];
  const float* row = logits + int64_t(blockIdx.x) * ld;
  float pv = INFINITY;
  int32_t pi = -1;
  double lse = 0.0;
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY;
    int32_t bi = 0x7fffffff;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      const float v = row[i];
      const bool after = v < pv || (v == pv && int32_t(i) > pi);
      if (after && argmax_better(v, int32_t(i), bv, bi)) bv = v, bi = int32_t(i);
    }
    block_argmax(bv, bi, rv, ri);
    if (j == 0) {
      double s = 0.0;
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) s += exp(double(row[i] - bv));
      lse = log(block_sum_f64(s, rd)) + double(bv);
    }
    if (threadIdx.x == 0) {
      const int64_t o = int64_t(blockIdx.x) * k + j;
      ids[o] = bi == 0x7fffffff ? 0 : bi;  // only NaNs left: a row the model broke
      lp[o] = bi == 0x7fffffff ? -INFINITY : double(bv) - lse;
    }
    pv = bv, pi = bi;
  }
}

// top_logprobs_kernel's first pass alone (the maximum, then the same
// sum), for one token of a named row.
__global__ void __launch_bounds__(kArgmaxThreads) logprob_of_kernel(const float* logits, int64_t ld, int64_t V,
                                                                    const int32_t* rows, const int32_t* tokens,
                                                                    double* out) {
  pdl_begin();
  __shared__ float rv[kMaxBlockWarps];
  __shared__ int32_t ri[kMaxBlockWarps];
  __shared__ double rd[kMaxBlockWarps];
  const float* row = logits + int64_t(rows[blockIdx.x]) * ld;
  const float pv = INFINITY;
  const int32_t pi = -1;
  float bv = -INFINITY;
  int32_t bi = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float v = row[i];
    const bool after = v < pv || (v == pv && int32_t(i) > pi);
    if (after && argmax_better(v, int32_t(i), bv, bi)) bv = v, bi = int32_t(i);
  }
  block_argmax(bv, bi, rv, ri);
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) s += exp(double(row[i] - bv));
  const double lse = log(block_sum_f64(s, rd)) + double(bv);
  if (threadIdx.x == 0) out[blockIdx.x] = bi == 0x7fffffff ? -INFINITY : double(row[tokens[blockIdx.x]]) - lse;
}

}  // namespace

cudaError_t logprob_of_cuda(const float* logits, int64_t ld, int64_t V, int64_t n, const int32_t* row,
                            const int32_t* token, double* out, cudaStream_t stream) {
  if (n < 0 || V < 1 || V > 0x7fffffff - 1 || ld < V || n > 0x7fffffff || logits == nullptr || row == nullptr ||
      token == nullptr || out == nullptr)
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  launch_kernel(logprob_of_kernel, unsigned(n), kArgmaxThreads, 0, stream, logits, ld, V, row, token, out);
  return cudaGetLastError();
}

cudaError_t embedding_cuda(const int32_t* token, int64_t rows, const uint16_t* table, int64_t V, int64_t H,
                           int64_t ldt, float* h, int64_t ldh, cudaStream_t stream) {
  if (rows < 0 || V < 1 || H < 1 || ldt < H || ldh < H || token == nullptr || table == nullptr || h == nullptr ||
      rows > 0x7fffffff || (H + kEmbedThreads - 1) / kEmbedThreads > 65535)  // grid x, y
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  launch_kernel(embedding_kernel, dim3(unsigned(rows), unsigned((H + kEmbedThreads - 1) / kEmbedThreads)),
                kEmbedThreads, 0, stream, token, table, V, H, ldt, h, ldh);
  return cudaGetLastError();
}

cudaError_t argmax_cuda(const float* logits, int64_t ld, int64_t rows, int64_t V, int32_t* out, cudaStream_t stream) {
  if (rows < 0 || V < 1 || V > 0x7fffffff - 1 || ld < V || logits == nullptr || out == nullptr || rows > 0x7fffffff)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  launch_kernel(argmax_kernel, unsigned(rows), kArgmaxThreads, 0, stream, logits, ld, V, out);
  return cudaGetLastError();
}

cudaError_t top_logprobs_cuda(const float* logits, int64_t ld, int64_t rows, int64_t V, int k, int32_t* ids,
                              double* lp, cudaStream_t stream) {
  if (rows < 0 || V < 1 || V > 0x7fffffff - 1 || ld < V || k < 1 || k > kTopLogprobsMaxK || k > V ||
      logits == nullptr || ids == nullptr || lp == nullptr || rows > 0x7fffffff)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  launch_kernel(top_logprobs_kernel, unsigned(rows), kArgmaxThreads, 0, stream, logits, ld, V, k, ids, lp);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
