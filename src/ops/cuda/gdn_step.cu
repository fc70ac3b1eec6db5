// Gated DeltaNet standard decode (see gdn_decode.h). One block per (slice
// of value columns, value head, sequence) copies its columns of the
// state's rows into shared memory (cp.async, all requested at once) and
// sums Sᵀk and Sᵀq over them as they land; the update — which needs all of
// Sᵀk first — reads the rows from shared memory: the state is read from
// DRAM once and written once per token. Columns are independent in the
// delta rule, so a block needs only its slice: narrower slices hold less
// shared memory and let more blocks stream at once (a head's slices are
// neighbours in the grid, so its rows are read together). Small batches,
// and heads whose slice does not fit in shared memory, use
// gdn_step_sliced.cu; other batches with keys of dk ≤ 128 (Qwen3.5,
// Qwen3-Next) the register-resident warps of gdn_step_warps.cu, faster on
// the H200 (docs/perf) — this kernel is theirs for taller keys.
//
// Exact replay (GdnDecodeArgs::exact) runs these same kernels with kLog:
// the log's entries before the step's T tokens are applied to the slice
// first (S ← αS + k·uᵀ, gdn_token.cuh), then the T tokens by the standard
// arithmetic, their u written to the log and no state but the fold. The
// launcher picks the kernel and block shape as for the standard step, so
// every output, u and folded state has the bits stepping would give.
#include "ops/cuda/gdn_decode.h"

#include <algorithm>

#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/gdn_token.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

cudaError_t gdn_step_sliced(const GdnDecodeArgs& a, bool log, cudaStream_t stream);
cudaError_t gdn_step_warps(const GdnDecodeArgs& a, bool log, cudaStream_t stream);

namespace {

constexpr int kGdnStepWarps = 4;
constexpr size_t kGdnStepMaxShm = 110 * 1024;  // two blocks per SM

// Adds this thread's partial column sums into its warp's row of red.
template <typename TileT>
__device__ __forceinline__ void add_partials(float* red, const float (&part)[TileT::kColChunks][TileT::kVec], int dv,
                                             int lane) {
#pragma unroll
  for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
    for (int e = 0; e < TileT::kVec; ++e)
      if (TileT::col(lane, j, e) < dv) red[TileT::col(lane, j, e)] += part[j][e];
}

// kPaged (with kLog): the log's rows through the block table (GdnDecodeArgs::pages).
template <typename TileT, bool kLog, bool kPaged>
__global__ void __launch_bounds__(32 * kGdnStepWarps) gdn_step_kernel(GdnDecodeArgs a) {
  static_assert(kLog || !kPaged);
  const int h = blockIdx.y, b = blockIdx.z, kh = h / (a.Hv / a.Hk);
  constexpr int nw = kGdnStepWarps;  // a constant: see docs/perf (GDN block shapes)
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dk = a.dk, dv = a.dv, T = a.T, pass_rows = nw * TileT::kRows;
  // This block's columns [c0, c0 + cw) of every row; shared arrays hold
  // only those (dv: the state's row stride).
  const int c0 = blockIdx.x * TileT::kCols, cw = dv - c0 < TileT::kCols ? dv - c0 : TileT::kCols;
  const int K4 = (dk + 3) & ~3, V4 = (cw + 3) & ~3;
  const int64_t r0 = decode_row0(a.row, b, T);  // this sequence's first row of q, v, β, o (k, g, out_slot)
  if (r0 < 0) return pdl_leave();               // not in this launch (block-uniform)
  extern __shared__ float shm[];   // every array a multiple of 4 floats from the start: 16-byte aligned
  float* sS = shm;                 // (dk, cw) the state rows
  float* sRed = sS + dk * V4;      // (2, nw, cw) per-warp column partials of Sᵀk, Sᵀq
  float* sU = sRed + 2 * nw * V4;  // (cw) u
  float* sQ = sU + V4;             // (T, dk)
  float* sK = sQ + T * K4;         // (T, dk)
  float* sV = sK + T * K4;         // (T, cw)
  float* sGB = sV + T * V4;        // (T, 3): e^g, β, k·q
  // kLog: the log's entries [0, base) come before the step's tokens,
  // which are its last T (their keys and decays read from there); the
  // first f go to the fold slot.
  const GdnLogSpan span = gdn_log_span<kLog>(a, b);
  const PagedLog pl = paged_log_if<kPaged>(a.pages, b);  // the log's rows, kPaged
  // The step's keys and decays (paged: the keys' columns, rows from the table).
  const uint16_t* kin = kPaged ? a.log_k + int64_t(kh) * dk
                        : kLog ? a.log_k + ((int64_t(b) * a.W + span.base) * a.Hk + kh) * dk
                               : a.k + (r0 * a.Hk + kh) * dk;
  const float* gin = kLog ? a.log_g + (int64_t(b) * a.W + span.base) * a.Hv + h : a.g + r0 * a.Hv + h;

  // The whole slice is requested at once, straight into shared memory (two
  // groups: the first half of the passes, then the rest), before anything
  // else: the block's read is in flight while the token's inputs arrive.
  // Each thread later reads back exactly the elements it copied.
  const float* src = a.state + (int64_t(a.slot[b]) * a.Hv + h) * dk * dv + c0;
  const int passes = (dk + pass_rows - 1) / pass_rows, first = (passes + 1) / 2;
  // Everything read so far is the plan (slots, log lengths, folds, rows),
  // which no kernel writes (launch.cuh): read while the kernel before ends.
  pdl_begin();
  for (int p = 0; p < passes; ++p) {
    const int p0 = p * pass_rows;
    TileT::copy_async(sS + p0 * V4, src + int64_t(p0) * dv, min(pass_rows, dk - p0), cw, dv, V4, w, nw, lane);
    if (p + 1 == first) cp_async_commit();
  }
  cp_async_commit();
  load_bf_rows(sQ, a.q + (r0 * a.Hk + kh) * dk, T, dk, int64_t(a.Hk) * dk, K4);
  if constexpr (kPaged) load_bf_rows_at(sK, kin, PagedRows{pl, span.base}, T, dk, int64_t(a.Hk) * dk, K4);
  else load_bf_rows(sK, kin, T, dk, int64_t(a.Hk) * dk, K4);
  load_bf_rows(sV, a.v + (r0 * a.Hv + h) * dv + c0, T, cw, int64_t(a.Hv) * dv, V4);
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    if constexpr (kPaged) sGB[3 * t] = expf(a.log_g[pl.row(span.base + t) * a.Hv + h]);
    else sGB[3 * t] = expf(gin[int64_t(t) * a.Hv]);
    sGB[3 * t + 1] = a.beta[(r0 + t) * a.Hv + h];
  }
  for (int i = threadIdx.x; i < 2 * nw * V4; i += blockDim.x) sRed[i] = 0.0f;
  __syncthreads();
  for (int t = w; t < T; t += nw) {  // k·q per token, a warp each
    float d = 0.0f;
    for (int i = lane; i < dk; i += 32) d += sK[t * K4 + i] * sQ[t * K4 + i];
    d = warp_sum(d);
    if (lane == 0) sGB[3 * t + 2] = d;
  }
  if constexpr (kLog) {
    // The log before the step, over the whole slice: each thread updates
    // the elements it copied, a pass of rows at a time through a group of
    // up to 2·nw entries whose u wait in sRed (free until the tokens' sums;
    // zeroed again after) — one barrier pair and one trip through shared
    // memory per group, not per entry.
    constexpr int kGroup = 2 * kGdnStepWarps;
    cp_async_wait<0>();
    float* fold_dst = span.f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.Hv + h) * dk * dv + c0 : nullptr;
    for (int s0 = 0; s0 < span.base; s0 += kGroup) {
      const int n = min(kGroup, span.base - s0);
      const int64_t e0 = int64_t(b) * a.W + s0;
      auto row = [&](int q) -> int64_t {  // entry s0 + q's row
        if constexpr (kPaged) return pl.row(s0 + q);
        else return e0 + q;
      };
      __syncthreads();  // the group before is done with sRed
      for (int i = threadIdx.x; i < n * V4; i += blockDim.x) {
        const int c = i % V4;
        sRed[i] = c < cw ? a.log_u[(row(i / V4) * a.Hv + h) * dv + c0 + c] : 0.0f;
      }
      float alpha[kGroup];
#pragma unroll
      for (int q = 0; q < kGroup; ++q) alpha[q] = q < n ? expf(a.log_g[row(q) * a.Hv + h]) : 0.0f;
      __syncthreads();
      for (int p = 0; p < passes; ++p) {
        const int p0 = p * pass_rows, rows = min(pass_rows, dk - p0);
        TileT rowsv;
        rowsv.load(sS + p0 * V4, rows, cw, V4, w, nw, lane);
#pragma unroll
        for (int q = 0; q < kGroup; ++q) {
          if (q >= n) break;
          const uint16_t* ks = a.log_k + (row(q) * a.Hk + kh) * dk + p0;
          float Uc[TileT::kColChunks][TileT::kVec];
          TileT::columns(sRed + q * V4, cw, lane, Uc);
#pragma unroll
          for (int r = 0; r < TileT::kRows; ++r) {
            const int i = TileT::row(w, nw, r);
            const float ki = i < rows ? bf(ks, i) : 0.0f;
#pragma unroll
            for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
              for (int e = 0; e < TileT::kVec; ++e) rowsv.v[r][j][e] = gdn_update(rowsv.v[r][j][e], alpha[q], ki, Uc[j][e]);
          }
          if (s0 + q + 1 == span.f) rowsv.store(fold_dst + int64_t(p0) * dv, rows, cw, dv, w, nw, lane);
        }
        rowsv.store(sS + p0 * V4, rows, cw, V4, w, nw, lane);
      }
    }
    __syncthreads();  // sRed back to zeros for the tokens' sums
    for (int i = threadIdx.x; i < 2 * nw * V4; i += blockDim.x) sRed[i] = 0.0f;
    __syncthreads();
  }

  // The delta rule by columns: mem = (αS)ᵀk, u = β(v − mem), S ← αS + k·uᵀ,
  // o = Sᵀq = α·(Sᵀq) + u·(k·q) — both sums over rows in one pass, then the
  // update. Later tokens (verify) find the rows in shared memory.
  for (int t = 0; t < T; ++t) {
    const float alpha = sGB[3 * t], beta = sGB[3 * t + 1];
    for (int p = 0; p < passes; ++p) {
      const int p0 = p * pass_rows, rows = min(pass_rows, dk - p0);
      if (t == 0 && p == 0) cp_async_wait<1>();
      if (t == 0 && p == first) cp_async_wait<0>();
      TileT rowsv;
      rowsv.load(sS + p0 * V4, rows, cw, V4, w, nw, lane);
      float pk[TileT::kColChunks][TileT::kVec] = {}, pq[TileT::kColChunks][TileT::kVec] = {};
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int i = TileT::row(w, nw, r);
        const float ki = i < rows ? sK[t * K4 + p0 + i] : 0.0f, qi = i < rows ? sQ[t * K4 + p0 + i] : 0.0f;
#pragma unroll
        for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
          for (int e = 0; e < TileT::kVec; ++e) pk[j][e] += rowsv.v[r][j][e] * ki, pq[j][e] += rowsv.v[r][j][e] * qi;
      }
      add_partials<TileT>(sRed + w * V4, pk, cw, lane);
      add_partials<TileT>(sRed + (nw + w) * V4, pq, cw, lane);
    }
    __syncthreads();
    for (int c = threadIdx.x; c < cw; c += blockDim.x) {
      float mk = 0.0f, mq = 0.0f;
      for (int k = 0; k < nw; ++k) {
        mk += sRed[k * V4 + c], mq += sRed[(nw + k) * V4 + c];
        sRed[k * V4 + c] = sRed[(nw + k) * V4 + c] = 0.0f;
      }
      const float u = (sV[t * V4 + c] - alpha * mk) * beta;
      sU[c] = u;
      if constexpr (kPaged) a.log_u[(pl.row(span.base + t) * a.Hv + h) * dv + c0 + c] = u;
      else if constexpr (kLog) a.log_u[((int64_t(b) * a.W + span.base + t) * a.Hv + h) * dv + c0 + c] = u;
      put_bf(a.o, ((r0 + t) * a.Hv + h) * dv + c0 + c, alpha * mq + u * sGB[3 * t + 2]);
    }
    __syncthreads();
    if (kLog && t + 1 == T) break;  // output-only: the last token's state is not kept
    float Uc[TileT::kColChunks][TileT::kVec];
    TileT::columns(sU, cw, lane, Uc);
    float* dst = kLog ? nullptr : a.state + (int64_t(a.out_slot[r0 + t]) * a.Hv + h) * dk * dv + c0;
    for (int p = 0; p < passes; ++p) {
      const int p0 = p * pass_rows, rows = min(pass_rows, dk - p0);
      TileT rowsv;
      rowsv.load(sS + p0 * V4, rows, cw, V4, w, nw, lane);
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int i = TileT::row(w, nw, r);
        const float ki = i < rows ? sK[t * K4 + p0 + i] : 0.0f;
#pragma unroll
        for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
          for (int e = 0; e < TileT::kVec; ++e) rowsv.v[r][j][e] = gdn_update(rowsv.v[r][j][e], alpha, ki, Uc[j][e]);
      }
      if (!kLog) rowsv.store(dst + int64_t(p0) * dv, rows, cw, dv, w, nw, lane);
      if (t + 1 < T) rowsv.store(sS + p0 * V4, rows, cw, V4, w, nw, lane);
    }
    __syncthreads();  // sU is reused by the next token
  }
}

// The standard step, or with `log` exact replay (arguments checked by
// gdn_replay_cuda): one choice of kernel and block shape for both.
cudaError_t gdn_step_launch(const GdnDecodeArgs& a, bool log, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  if (!gdn_has_common_arrays(a) || (!log && (a.k == nullptr || a.g == nullptr || a.out_slot == nullptr)))
    return cudaErrorInvalidValue;
  if (a.batch < 0 || a.Hk <= 0 || a.Hv % a.Hk != 0 || a.dk < 1 || a.dv < 1 || a.T < 1 || a.T > kGdnMaxT ||
      a.variant < 0 || a.variant > 3 || (a.variant == 3 && a.dk > kGdnStepWarpsMaxDk) ||
      (a.tile_rows != 0 && a.tile_rows != 4 && a.tile_rows != 8) ||
      (a.slice_cols != 0 && a.slice_cols != 64 && a.slice_cols != 128 && a.slice_cols != 256))
    return cudaErrorInvalidValue;
  // Block shape (H200, Qwen3-Next shapes, docs/perf): 8 rows per warp per
  // pass; slices of 128 columns, or of 64 where there are few (head,
  // sequence) pairs per SM or the wider slice would not fit.
  const int K4 = (a.dk + 3) & ~3, nw = kGdnStepWarps;
  auto shm_for = [&](int slice) {
    const int S4 = (std::min(slice, a.dv) + 3) & ~3;
    return sizeof(float) * (size_t(a.dk) * S4 + 2 * nw * S4 + S4 + 2 * a.T * K4 + a.T * S4 + 3 * a.T);
  };
  // Every refusal before the device is asked anything: the narrowest slice
  // the launcher may take decides whether a streaming block fits.
  const int narrow = gdn_slice_cols(a.dv, a.slice_cols != 0 ? a.slice_cols : 64);
  const bool fits = narrow > 0 && shm_for(narrow) <= kGdnStepMaxShm, sliced_fits = a.dk <= 512;
  if ((a.variant == 1 && !fits) || (a.variant == 2 && !sliced_fits) || (!fits && !sliced_fits))
    return cudaErrorInvalidValue;
  int sms = 0;
  if (cudaError_t e = device_sms(&sms); e != cudaSuccess) return e;
  // With dk ≤ 128 the register-resident warps at every batch, whatever dv
  // (H200, docs/perf: 72 against the streaming blocks' 81 µs at batch 64,
  // 275 against 294 at 256, 546 against 566 at 512, 551758c and 09680ff; at
  // batch 1–4 one token 3.7–6.9 against the column slices' 6.9–11.7 µs, a
  // verify 7.1–17.0 against 15.6–28.2, 50211f1 — one rule for both,
  // since exact replay must pick what stepping picks); else column slices
  // where (head, sequence) pairs are fewer than SMs or heads too large for
  // shared memory, streaming blocks otherwise.
  const bool small = int64_t(a.batch) * a.Hv < sms;
  if (a.variant == 3 || (a.variant == 0 && a.dk <= kGdnStepWarpsMaxDk)) return gdn_step_warps(a, log, stream);
  if (a.variant == 2 || !fits || (a.variant == 0 && small)) return gdn_step_sliced(a, log, stream);
  int slice = a.slice_cols != 0 ? narrow : gdn_slice_cols(a.dv, int64_t(a.batch) * a.Hv < 32 * sms ? 64 : 128);
  if (shm_for(slice) > kGdnStepMaxShm) slice = narrow;
  const size_t shm = shm_for(slice);
  auto launch = [&](auto tag) {
    using TileT = decltype(tag);
    auto go = [&](auto kernel) {
      if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
      const dim3 grid((a.dv + TileT::kCols - 1) / TileT::kCols, a.Hv, a.batch);
      launch_kernel(kernel, grid, 32 * nw, shm, stream, a);
      return cudaGetLastError();
    };
    if (!log) return go(gdn_step_kernel<TileT, false, false>);
    return a.pages.page != nullptr ? go(gdn_step_kernel<TileT, true, true>) : go(gdn_step_kernel<TileT, true, false>);
  };
  return a.tile_rows == 4 ? with_gdn_slice_tile<4>(a.dv, slice, launch) : with_gdn_slice_tile<8>(a.dv, slice, launch);
}

}  // namespace

cudaError_t gdn_step_cuda(const GdnDecodeArgs& a, cudaStream_t stream) { return gdn_step_launch(a, false, stream); }

// Called by gdn_replay_cuda for a.exact, its arguments checked there.
cudaError_t gdn_replay_exact(const GdnDecodeArgs& a, cudaStream_t stream) { return gdn_step_launch(a, true, stream); }

}  // namespace replayssm::ops::cuda
