// Gated DeltaNet chunk scan (see gdn_scan.h). One block per (value head,
// sequence, slice of 32 value columns) holds every row of its columns in
// registers from the first token to the last — columns are independent in
// the delta rule. A warp owns 4 columns: lane l holds column l % 4 at rows
// l/4 + 8r, so a token's Sᵀk and Sᵀq are per-lane sums finished by three
// shuffles within the warp, and no token waits at a barrier (H200: the
// layout of gdn_step_sliced.cu — a column per lane, rows over warps, a
// barrier a token — took 0.9 µs a token at batch 1, latency-bound). Tokens
// arrive in tiles of `tok` staged by the whole block, with k·q per token
// computed once there; rows l/4 + 8r keep a warp's shared-memory reads of
// k and q on distinct banks.
#include "ops/cuda/gdn_scan.h"

#include <algorithm>

#include "ops/cuda/gdn_token.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kScanWarps = 8;              // 32 columns a block, 4 a warp
constexpr int kScanMaxTok = 16;            // tokens per shared-memory tile
constexpr size_t kScanMaxShm = 48 * 1024;  // the default limit

// R rows a lane (8·R ≥ dk). kPaged: the log's rows through the block
// table (GdnScanArgs::pages).
template <int R, bool kPaged>
__global__ void __launch_bounds__(32 * kScanWarps) gdn_scan_kernel(GdnScanArgs a, int tok) {
  pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, kh = h / (a.Hv / a.Hk);
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, gi = lane / 4;
  const int dk = a.dk, dv = a.dv, c0 = blockIdx.z * kColumnSlice, cols = min(kColumnSlice, dv - c0);
  const int cl = 4 * w + lane % 4;  // this lane's column within the slice
  const bool live = cl < cols;
  const int64_t ldk = int64_t(a.Hk) * dk, ldv = int64_t(a.Hv) * dv;
  extern __shared__ float shm[];
  float* sK = shm;                      // (tok, dk)
  float* sQ = sK + tok * dk;            // (tok, dk)
  float* sV = sQ + tok * dk;            // (tok, 32) v at this block's columns (the prologue: the log's u)
  float* sA = sV + tok * kColumnSlice;  // (tok) α = e^g
  float* sBeta = sA + tok;              // (tok) β
  float* sKQ = sBeta + tok;             // (tok) k·q

  // This sequence's rows (ragged: its own count; none: nothing to touch).
  const int64_t row0 = a.cu_rows != nullptr ? a.cu_rows[b] : int64_t(b) * a.T;
  const int n_tok = a.cu_rows == nullptr ? a.T : a.n_rows != nullptr ? a.n_rows[b] : int(a.cu_rows[b + 1] - row0);
  const int n_log = a.n_log != nullptr ? a.n_log[b] : 0;
  if (n_tok <= 0 && !(a.apply_log_alone && n_log > 0)) return;
  const int64_t at = int64_t(h) * dk * dv + c0 + cl;  // this lane's column within a slot
  float S[R];
  {
    const float* src = a.state + int64_t(a.slot[b]) * a.Hv * dk * dv + at;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = gi + 8 * r;
      S[r] = live && row < dk ? src[int64_t(row) * dv] : 0.0f;
    }
  }
  // n tokens' values at the block's columns, v_col(t, c), into sV (zeros past the slice).
  auto stage_columns = [&](int n, auto&& v_col) {
    for (int i = threadIdx.x; i < n * kColumnSlice; i += blockDim.x) {
      const int t = i / kColumnSlice, c = i % kColumnSlice;
      sV[i] = c < cols ? v_col(t, c) : 0.0f;
    }
  };

  // Replay: the log since the checkpoint, S ← αS + k·uᵀ, rounded as the
  // step kernels round it (gdn_token.cuh).
  for (int e0 = 0; e0 < n_log; e0 += tok) {
    const int n = min(tok, n_log - e0);
    const int64_t e = int64_t(b) * a.W + e0;  // entry e0's row, contiguous
    __syncthreads();  // the tile before is read
    if constexpr (kPaged) {
      const PagedRows at{paged_log(a.pages, b), e0};
      load_bf_rows_at(sK, a.log_k + int64_t(kh) * dk, at, n, dk, ldk);
      stage_columns(n, [&](int t, int c) { return a.log_u[at(t) * ldv + int64_t(h) * dv + c0 + c]; });
      for (int i = threadIdx.x; i < n; i += blockDim.x) sA[i] = expf(a.log_g[at(i) * a.Hv + h]);
    } else {
      load_bf_rows(sK, a.log_k + e * ldk + int64_t(kh) * dk, n, dk, ldk);
      stage_columns(n, [&](int t, int c) { return a.log_u[(e + t) * ldv + int64_t(h) * dv + c0 + c]; });
      for (int i = threadIdx.x; i < n; i += blockDim.x) sA[i] = expf(a.log_g[(e + i) * a.Hv + h]);
    }
    __syncthreads();
    for (int i = 0; i < n; ++i) {
      const float alpha = sA[i], u = sV[i * kColumnSlice + cl];
      const float* ki = sK + i * dk;
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (gi + 8 * r < dk) S[r] = gdn_update(S[r], alpha, ki[gi + 8 * r], u);
    }
  }

  for (int t0 = 0; t0 < n_tok; t0 += tok) {
    const int n = min(tok, n_tok - t0);
    const int64_t r0 = row0 + t0;
    __syncthreads();
    load_bf_rows(sK, a.k + r0 * ldk + int64_t(kh) * dk, n, dk, ldk);
    load_bf_rows(sQ, a.q + r0 * ldk + int64_t(kh) * dk, n, dk, ldk);
    stage_columns(n, [&](int t, int c) { return bf(a.v, (r0 + t) * ldv + int64_t(h) * dv + c0 + c); });
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      sA[i] = expf(a.g[(r0 + i) * a.Hv + h]);
      sBeta[i] = a.beta[(r0 + i) * a.Hv + h];
    }
    __syncthreads();
    for (int i = w; i < n; i += kScanWarps) {  // k·q per token, a warp each
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
      // Two partial sums each: shorter dependent chains. Rows past dk are
      // skipped, not read as zeros (H200: 146 → 137 µs a 256-token chunk
      // at batch 1). Keeping the keys in registers for the update instead
      // of reading them again took 79 registers, 3 blocks an SM, and was
      // 20% slower at batch 1.
      float pk0 = 0.0f, pk1 = 0.0f, pq0 = 0.0f, pq1 = 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = gi + 8 * r;
        if (row >= dk) continue;
        const float kv = ki[row], qv = qi[row];
        if (r % 2 == 0) pk0 += S[r] * kv, pq0 += S[r] * qv;
        else pk1 += S[r] * kv, pq1 += S[r] * qv;
      }
      float mk = pk0 + pk1, mq = pq0 + pq1;
#pragma unroll
      for (int o = 4; o < 32; o *= 2) {  // over the warp's 8 row groups
        mk += __shfl_xor_sync(0xffffffffu, mk, o);
        mq += __shfl_xor_sync(0xffffffffu, mq, o);
      }
      const float u = (sV[i * kColumnSlice + cl] - alpha * mk) * beta;
      if (gi == 0 && live) {
        put_bf(a.o, (r0 + i) * ldv + int64_t(h) * dv + c0 + cl, alpha * mq + u * sKQ[i]);
        if (a.u != nullptr) a.u[(r0 + i) * ldv + int64_t(h) * dv + c0 + cl] = u;
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (gi + 8 * r < dk) S[r] = gdn_update(S[r], alpha, ki[gi + 8 * r], u);
    }
  }
  float* dst = a.state + int64_t(a.out_slot[b]) * a.Hv * dk * dv + at;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = gi + 8 * r;
    if (live && row < dk) dst[int64_t(row) * dv] = S[r];
  }
}

// Calls f(kernel instance) for the rows a lane holds: R with 8·R ≥ dk.
template <bool kPaged, typename F>
cudaError_t with_scan_rows(int dk, F&& f) {
  if (dk <= 8) return f(gdn_scan_kernel<1, kPaged>);
  if (dk <= 16) return f(gdn_scan_kernel<2, kPaged>);
  if (dk <= 32) return f(gdn_scan_kernel<4, kPaged>);
  if (dk <= 64) return f(gdn_scan_kernel<8, kPaged>);
  if (dk <= 128) return f(gdn_scan_kernel<16, kPaged>);
  if (dk <= 256) return f(gdn_scan_kernel<32, kPaged>);
  if (dk <= 512) return f(gdn_scan_kernel<64, kPaged>);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t gdn_scan_cuda(const GdnScanArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  if (a.batch < 0 || a.batch > 65535 || a.Hk < 1 || a.Hv < a.Hk || a.Hv % a.Hk != 0 || a.dk < 1 || a.dk > 512 ||
      a.dv < 1 || a.T < 1 || a.state == nullptr || a.slot == nullptr || a.out_slot == nullptr || a.q == nullptr ||
      a.k == nullptr || a.v == nullptr || a.g == nullptr || a.beta == nullptr || a.o == nullptr)
    return cudaErrorInvalidValue;
  if (a.n_log != nullptr && ((a.pages.page == nullptr && a.W < 1) || a.log_k == nullptr || a.log_u == nullptr ||
                             a.log_g == nullptr))
    return cudaErrorInvalidValue;
  if (!log_pages_valid(a.pages)) return cudaErrorInvalidValue;
  const int slices = (a.dv + kColumnSlice - 1) / kColumnSlice;
  if (slices > 65535) return cudaErrorInvalidValue;
  const size_t per_tok = sizeof(float) * (2 * size_t(a.dk) + kColumnSlice + 3);
  const int tok = int(std::min<size_t>(kScanMaxTok, kScanMaxShm / per_tok));
  if (tok < 1) return cudaErrorInvalidValue;
  auto launch = [&](auto kernel) {
    launch_kernel(kernel, dim3(a.Hv, a.batch, slices), 32 * kScanWarps, per_tok * size_t(tok), stream, a, tok);
    return cudaGetLastError();
  };
  return a.pages.page != nullptr && a.n_log != nullptr ? with_scan_rows<true>(a.dk, launch)
                                                       : with_scan_rows<false>(a.dk, launch);
}

}  // namespace replayssm::ops::cuda
