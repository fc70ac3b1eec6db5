// Gated DeltaNet chunk scan (see gdn_scan.h). One block per (value head,
// sequence, slice of 32 value columns) holds every row of its columns in
// registers from the first token to the last — columns are independent in
// the delta rule — as gdn_step_sliced.cu's blocks do for one step: rows
// over warps, a column per lane. A token's Sᵀk and Sᵀq are per-thread
// partial sums finished across warps in shared memory, one barrier a token
// (the partials alternate between two buffers, so the next token's writes
// never meet this one's reads). Tokens arrive in tiles of `tok` staged by
// the whole block, with k·q per token computed once there.
#include "ops/cuda/gdn_scan.h"

#include <algorithm>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kScanMaxTok = 16;            // tokens per shared-memory tile
constexpr size_t kScanMaxShm = 48 * 1024;  // the default limit

template <typename TileT>
__global__ void __launch_bounds__(512) gdn_scan_kernel(GdnScanArgs a, int tok) {
  pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, kh = h / (a.Hv / a.Hk);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dk = a.dk, dv = a.dv, c0 = blockIdx.z * kColumnSlice, cols = min(kColumnSlice, dv - c0);
  const int64_t ldk = int64_t(a.Hk) * dk, ldv = int64_t(a.Hv) * dv;
  extern __shared__ float shm[];
  float* sK = shm;                      // (tok, dk)
  float* sQ = sK + tok * dk;            // (tok, dk)
  float* sV = sQ + tok * dk;            // (tok, 32) v at this block's columns (the prologue: the log's u)
  float* sA = sV + tok * kColumnSlice;  // (tok) α = e^g
  float* sBeta = sA + tok;              // (tok) β
  float* sKQ = sBeta + tok;             // (tok) k·q
  float* sRed = sKQ + tok;              // (2, 2, nw, 32) partials of Sᵀk, Sᵀq for two tokens

  const int64_t at = int64_t(h) * dk * dv + c0;  // the block's columns within a slot
  TileT S;
  S.load(a.state + int64_t(a.slot[b]) * a.Hv * dk * dv + at, dk, cols, dv, w, nw, lane);

  // Replay: the log since the checkpoint, S ← αS + k·uᵀ.
  const int n_log = a.n_log != nullptr ? a.n_log[b] : 0;
  for (int e0 = 0; e0 < n_log; e0 += tok) {
    const int n = min(tok, n_log - e0);
    const int64_t e = int64_t(b) * a.W + e0;
    __syncthreads();  // the tile before is read
    load_bf_rows(sK, a.log_k + e * ldk + int64_t(kh) * dk, n, dk, ldk);
    for (int i = threadIdx.x; i < n * kColumnSlice; i += blockDim.x) {
      const int t = i / kColumnSlice, c = i % kColumnSlice;
      sV[i] = c < cols ? a.log_u[(e + t) * ldv + int64_t(h) * dv + c0 + c] : 0.0f;
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) sA[i] = expf(a.log_g[(e + i) * a.Hv + h]);
    __syncthreads();
    for (int i = 0; i < n; ++i) {
      const float alpha = sA[i], u = sV[i * kColumnSlice + lane];
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int row = TileT::row(w, nw, r);
        if (row < dk) S.v[r][0][0] = S.v[r][0][0] * alpha + sK[i * dk + row] * u;
      }
    }
  }

  for (int t0 = 0; t0 < a.T; t0 += tok) {
    const int n = min(tok, a.T - t0);
    const int64_t r0 = int64_t(b) * a.T + t0;
    __syncthreads();
    load_bf_rows(sK, a.k + r0 * ldk + int64_t(kh) * dk, n, dk, ldk);
    load_bf_rows(sQ, a.q + r0 * ldk + int64_t(kh) * dk, n, dk, ldk);
    for (int i = threadIdx.x; i < n * kColumnSlice; i += blockDim.x) {
      const int t = i / kColumnSlice, c = i % kColumnSlice;
      sV[i] = c < cols ? bf(a.v, (r0 + t) * ldv + int64_t(h) * dv + c0 + c) : 0.0f;
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      sA[i] = expf(a.g[(r0 + i) * a.Hv + h]);
      sBeta[i] = a.beta[(r0 + i) * a.Hv + h];
    }
    __syncthreads();
    for (int i = w; i < n; i += nw) {  // k·q per token, a warp each
      float d = 0.0f;
      for (int j = lane; j < dk; j += 32) d += sK[i * dk + j] * sQ[i * dk + j];
      d = warp_sum(d);
      if (lane == 0) sKQ[i] = d;
    }
    __syncthreads();
    for (int i = 0; i < n; ++i) {
      const float alpha = sA[i], beta = sBeta[i];
      const float* ki = sK + i * dk;
      const float* qi = sQ + i * dk;
      float pk = 0.0f, pq = 0.0f;
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int row = TileT::row(w, nw, r);
        if (row < dk) pk += S.v[r][0][0] * ki[row], pq += S.v[r][0][0] * qi[row];
      }
      float* red = sRed + (i & 1) * 2 * nw * kColumnSlice;
      red[w * kColumnSlice + lane] = pk;
      red[(nw + w) * kColumnSlice + lane] = pq;
      __syncthreads();
      float mk = 0.0f, mq = 0.0f;
      for (int k = 0; k < nw; ++k) mk += red[k * kColumnSlice + lane], mq += red[(nw + k) * kColumnSlice + lane];
      const float u = (sV[i * kColumnSlice + lane] - alpha * mk) * beta;
      if (w == 0 && lane < cols) put_bf(a.o, (r0 + i) * ldv + int64_t(h) * dv + c0 + lane, alpha * mq + u * sKQ[i]);
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int row = TileT::row(w, nw, r);
        if (row < dk) S.v[r][0][0] = S.v[r][0][0] * alpha + ki[row] * u;
      }
    }
  }
  S.store(a.state + int64_t(a.out_slot[b]) * a.Hv * dk * dv + at, dk, cols, dv, w, nw, lane);
}

}  // namespace

cudaError_t gdn_scan_cuda(const GdnScanArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  if (a.batch < 0 || a.batch > 65535 || a.Hk < 1 || a.Hv < a.Hk || a.Hv % a.Hk != 0 || a.dk < 1 || a.dk > 512 ||
      a.dv < 1 || a.T < 1 || a.state == nullptr || a.slot == nullptr || a.out_slot == nullptr || a.q == nullptr ||
      a.k == nullptr || a.v == nullptr || a.g == nullptr || a.beta == nullptr || a.o == nullptr)
    return cudaErrorInvalidValue;
  if (a.n_log != nullptr && (a.W < 1 || a.log_k == nullptr || a.log_u == nullptr || a.log_g == nullptr))
    return cudaErrorInvalidValue;
  const int slices = (a.dv + kColumnSlice - 1) / kColumnSlice;
  if (slices > 65535) return cudaErrorInvalidValue;
  return with_column_slice_tile(a.dk, [&](auto tag, int nw) {
    using TileT = decltype(tag);
    const size_t fixed = sizeof(float) * 4 * size_t(nw) * kColumnSlice;
    const size_t per_tok = sizeof(float) * (2 * size_t(a.dk) + kColumnSlice + 3);
    const int tok = int(std::min<size_t>(kScanMaxTok, (kScanMaxShm - fixed) / per_tok));
    if (tok < 1) return cudaErrorInvalidValue;
    launch_kernel(gdn_scan_kernel<TileT>, dim3(a.Hv, a.batch, slices), 32 * nw, fixed + per_tok * size_t(tok), stream, a,
                  tok);
    return cudaGetLastError();
  });
}

}  // namespace replayssm::ops::cuda
