// Gated DeltaNet standard decode, the column-sliced variant (see
// gdn_decode.h, gdn_step.cu): one block per (value head, sequence, slice of
// 32 columns), for small batches and states too large for gdn_step.cu's
// shared memory. Columns are independent in the delta rule, so a block holds every row of
// its columns in registers (rows over warps, one column per lane), and
// Sᵀk, Sᵀq are per-thread sums finished across warps in shared memory.
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/gdn_token.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kLogGroup = 4;  // exact replay: log entries staged in shared memory at a time

// kLog: exact replay (gdn_step.cu); kPaged (with kLog): the log's rows
// through the block table (GdnDecodeArgs::pages).
template <typename TileT, bool kLog, bool kPaged>
__global__ void __launch_bounds__(512) gdn_step_sliced_kernel(GdnDecodeArgs a) {
  static_assert(kLog || !kPaged);
  const int h = blockIdx.x, b = blockIdx.y, kh = h / (a.Hv / a.Hk);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dk = a.dk, dv = a.dv, T = a.T, c0 = blockIdx.z * kColumnSlice, cols = min(kColumnSlice, dv - c0);
  const int64_t r0 = decode_row0(a.row, b, T);  // this sequence's first row of q, v, β, o (k, g, out_slot)
  if (r0 < 0) return pdl_leave();               // not in this launch (block-uniform)
  extern __shared__ float shm[];
  float* sQ = shm;                   // (T, dk)
  float* sK = sQ + T * dk;           // (T, dk)
  float* sV = sK + T * dk;           // (T, 32)
  float* sU = sV + T * kColumnSlice;  // (32) this token's mem, then o
  float* sRed = sU + kColumnSlice;   // (nw, 32)
  float* sGB = sRed + nw * kColumnSlice;  // (T, 2): e^g, β
  float* sLK = sGB + 2 * T;               // kLog: (kLogGroup, dk) a group of log keys
  float* sLU = sLK + kLogGroup * dk;      //       (kLogGroup, 32) their u at this slice
  float* sLA = sLU + kLogGroup * kColumnSlice;  // (kLogGroup) their e^g
  const GdnLogSpan span = gdn_log_span<kLog>(a, b);
  const PagedLog pl = paged_log_if<kPaged>(a.pages, b);  // the log's rows, kPaged
  // The step's keys and decays (paged: the keys' columns, rows from the table).
  const uint16_t* kin = kPaged ? a.log_k + int64_t(kh) * dk
                        : kLog ? a.log_k + ((int64_t(b) * a.W + span.base) * a.Hk + kh) * dk
                               : a.k + (r0 * a.Hk + kh) * dk;
  const float* gin = kLog ? a.log_g + (int64_t(b) * a.W + span.base) * a.Hv + h : a.g + r0 * a.Hv + h;

  // Everything read so far is the plan (slots, log lengths, folds, rows),
  // which no kernel writes (launch.cuh): read while the kernel before ends.
  pdl_begin();
  TileT tile;
  tile.load(a.state + (int64_t(a.slot[b]) * a.Hv + h) * dk * dv + c0, dk, cols, dv, w, nw, lane);
  load_bf_rows(sQ, a.q + (r0 * a.Hk + kh) * dk, T, dk, int64_t(a.Hk) * dk);
  if constexpr (kPaged) load_bf_rows_at(sK, kin, PagedRows{pl, span.base}, T, dk, int64_t(a.Hk) * dk);
  else load_bf_rows(sK, kin, T, dk, int64_t(a.Hk) * dk);
  for (int i = threadIdx.x; i < T * kColumnSlice; i += blockDim.x)
    sV[i] = i % kColumnSlice < cols
                ? bf(a.v, ((r0 + i / kColumnSlice) * a.Hv + h) * dv + c0 + i % kColumnSlice)
                : 0.0f;
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    if constexpr (kPaged) sGB[2 * t] = expf(a.log_g[pl.row(span.base + t) * a.Hv + h]);
    else sGB[2 * t] = expf(gin[int64_t(t) * a.Hv]);
    sGB[2 * t + 1] = a.beta[(r0 + t) * a.Hv + h];
  }
  if constexpr (kLog) {
    // The log before the step, in registers (S ← αS + k·uᵀ), its entries
    // staged kLogGroup at a time: their loads overlap instead of each
    // entry waiting on its own.
    for (int s0 = 0; s0 < span.base; s0 += kLogGroup) {
      const int n = min(kLogGroup, span.base - s0);
      const int64_t e0 = int64_t(b) * a.W + s0;
      auto row = [&](int q) -> int64_t {  // entry s0 + q's row
        if constexpr (kPaged) return pl.row(s0 + q);
        else return e0 + q;
      };
      __syncthreads();  // the group before is applied (and, first, sQ… are loaded)
      if constexpr (kPaged)
        load_bf_rows_at(sLK, a.log_k + int64_t(kh) * dk, PagedRows{pl, s0}, n, dk, int64_t(a.Hk) * dk);
      else load_bf_rows(sLK, a.log_k + (e0 * a.Hk + kh) * dk, n, dk, int64_t(a.Hk) * dk);
      for (int i = threadIdx.x; i < n * kColumnSlice; i += blockDim.x) {
        const int c = i % kColumnSlice;
        sLU[i] = c < cols ? a.log_u[(row(i / kColumnSlice) * a.Hv + h) * dv + c0 + c] : 0.0f;
      }
      for (int i = threadIdx.x; i < n; i += blockDim.x) sLA[i] = expf(a.log_g[row(i) * a.Hv + h]);
      __syncthreads();
      for (int q = 0; q < n; ++q) {
        const float alpha = sLA[q], u = sLU[q * kColumnSlice + lane];
#pragma unroll
        for (int r = 0; r < TileT::kRows; ++r) {
          const int i = TileT::row(w, nw, r);
          if (i < dk) tile.v[r][0][0] = gdn_update(tile.v[r][0][0], alpha, sLK[q * dk + i], u);
        }
        if (s0 + q + 1 == span.f)
          tile.store(a.state + (int64_t(a.fold_slot[b]) * a.Hv + h) * dk * dv + c0, dk, cols, dv, w, nw, lane);
      }
    }
  }
  __syncthreads();

  for (int t = 0; t < T; ++t) {
    const float alpha = sGB[2 * t], beta = sGB[2 * t + 1];
    // mem = (αS)ᵀk, then u = β(v − mem)
    column_sums(1, [&](int) {
      float part = 0.0f;
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int i = TileT::row(w, nw, r);
        tile.v[r][0][0] *= alpha;
        if (i < dk) part += tile.v[r][0][0] * sK[t * dk + i];
      }
      return part;
    }, sRed, sU, nw, w, lane);
    const float u = (sV[t * kColumnSlice + lane] - sU[lane]) * beta;
    if constexpr (kPaged) {
      if (w == 0 && lane < cols) a.log_u[(pl.row(span.base + t) * a.Hv + h) * dv + c0 + lane] = u;
    } else if (kLog && w == 0 && lane < cols) {
      a.log_u[((int64_t(b) * a.W + span.base + t) * a.Hv + h) * dv + c0 + lane] = u;
    }
    // S ← S + k·uᵀ (the decay is in already: gdn_update's rounding) ; o = Sᵀq
    float part = 0.0f;
#pragma unroll
    for (int r = 0; r < TileT::kRows; ++r) {
      const int i = TileT::row(w, nw, r);
      if (i >= dk) continue;
      tile.v[r][0][0] = __fmaf_rn(sK[t * dk + i], u, tile.v[r][0][0]);
      part += tile.v[r][0][0] * sQ[t * dk + i];
    }
    if (!kLog)
      tile.store(a.state + (int64_t(a.out_slot[r0 + t]) * a.Hv + h) * dk * dv + c0, dk, cols, dv, w, nw, lane);
    column_sums(1, [&](int) { return part; }, sRed, sU, nw, w, lane);
    if (threadIdx.x < cols) put_bf(a.o, ((r0 + t) * a.Hv + h) * dv + c0 + threadIdx.x, sU[threadIdx.x]);
    __syncthreads();  // sU is reused by the next token
  }
}

}  // namespace

cudaError_t gdn_step_sliced(const GdnDecodeArgs& a, bool log, cudaStream_t stream) {
  return with_column_slice_tile(a.dk, [&](auto tag, int nw) {
    using TileT = decltype(tag);
    // dk ≤ 512 and T ≤ 8: at most 36 KB, 45 KB with exact replay's group.
    const size_t shm = sizeof(float) * (2 * a.T * a.dk + (a.T + 1 + nw) * kColumnSlice + 2 * a.T +
                                        (log ? kLogGroup * (a.dk + kColumnSlice + 1) : 0));
    if (shm > 48 * 1024) return cudaErrorInvalidValue;
    const int slices = (a.dv + kColumnSlice - 1) / kColumnSlice;
    const dim3 grid(a.Hv, a.batch, slices);
    auto* kernel = !log                       ? gdn_step_sliced_kernel<TileT, false, false>
                   : a.pages.page != nullptr ? gdn_step_sliced_kernel<TileT, true, true>
                                             : gdn_step_sliced_kernel<TileT, true, false>;
    launch_kernel(kernel, grid, 32 * nw, shm, stream, a);
    return cudaGetLastError();
  });
}

}  // namespace replayssm::ops::cuda
