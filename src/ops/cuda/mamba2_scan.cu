// Mamba2 chunk scan (see mamba2_scan.h). One block per (head, sequence,
// slice of one pass of rows) holds its rows of the state in registers from
// the first token to the last: rows are independent in the recurrence, so
// a block never needs another's, and the state is read once and written
// once however long the chunk. The tokens' B, C, x and dt arrive in tiles
// of `tok` tokens staged in shared memory by the whole block; each token
// is mamba2_token_rows on the register tile (the step kernel's arithmetic),
// and the y rows of kSum tokens are summed in one transposed butterfly —
// the state's update does not wait for y, so the next token's runs while
// a sum's shuffles are in flight, and kSum·kRows sums take fewer shuffles
// than kSum butterflies of kRows.
#include "ops/cuda/mamba2_scan.h"

#include <algorithm>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mamba2_launch.h"
#include "ops/cuda/mamba2_token.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kScanMaxTok = 32;           // tokens per shared-memory tile
constexpr size_t kScanMaxShm = 48 * 1024;  // the default limit: several blocks an SM
constexpr int kScanTokensPerSum = 2;       // Mamba2ScanArgs::tokens_per_sum's default (H200: 1 is 7% slower, 4 20%)

// kPaged: the log's rows through the block table (Mamba2ScanArgs::pages).
template <typename TileT, int kSum, bool kPaged>
__global__ void __launch_bounds__(32 * kMamba2Warps) mamba2_scan_kernel(Mamba2ScanArgs a, int tok) {
  pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, g = h / (a.H / a.G);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, N = a.N, N4 = (N + 3) & ~3, pass_rows = nw * TileT::kRows;
  const int p0 = blockIdx.z * pass_rows, rows = min(pass_rows, P - p0);  // this block's rows
  extern __shared__ float shm[];
  float* sB = shm;                    // (tok, N4): 16-byte aligned rows for TileT::columns
  float* sC = sB + tok * N4;          // (tok, N4)
  float* sX = sC + tok * N4;          // (tok, pass_rows) x at this block's rows
  float* sDt = sX + tok * pass_rows;  // (tok) dt, then
  float* sDA = sDt + tok;             // (tok) e^{dt·A}

  // This sequence's rows (ragged: its own count; none: nothing to touch).
  const int64_t row0 = a.cu_rows != nullptr ? a.cu_rows[b] : int64_t(b) * a.T;
  const int n_tok = a.cu_rows == nullptr ? a.T : a.n_rows != nullptr ? a.n_rows[b] : int(a.cu_rows[b + 1] - row0);
  const int n_log = a.n_log != nullptr ? a.n_log[b] : 0;
  if (n_tok <= 0 && !(a.apply_log_alone && n_log > 0)) return;
  const float A = -expf(a.A_log[h]);
  const int64_t at = (int64_t(h) * P + p0) * N;  // the block's rows within a slot
  TileT cur;
  cur.load(a.state + int64_t(a.slot[b]) * a.H * P * N + at, rows, N, N, w, nw, lane);
  constexpr int kR = TileT::kRows, kM = kSum * kR;
  float Bc[TileT::kColChunks][TileT::kVec], Cc[TileT::kColChunks][TileT::kVec], acc[kR];

  // Replay: the log since the checkpoint, state updates only.
  for (int e0 = 0; e0 < n_log; e0 += tok) {
    const int n = min(tok, n_log - e0);
    const int64_t e = int64_t(b) * a.W + e0;  // entry e0's row, contiguous
    __syncthreads();  // the tile before is read
    if constexpr (kPaged) {
      const PagedRows at{paged_log(a.pages, b), e0};
      load_bf_rows_at(sB, a.log_B + int64_t(g) * N, at, n, N, int64_t(a.G) * N, N4);
      load_bf_rows_at(sX, a.log_x + int64_t(h) * P + p0, at, n, rows, int64_t(a.H) * P, pass_rows);
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float dt = a.log_dt[at(i) * a.H + h];
        sDt[i] = dt, sDA[i] = expf(A * dt);
      }
    } else {
      load_bf_rows(sB, a.log_B + e * a.G * N + int64_t(g) * N, n, N, int64_t(a.G) * N, N4);
      load_bf_rows(sX, a.log_x + e * a.H * P + int64_t(h) * P + p0, n, rows, int64_t(a.H) * P, pass_rows);
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float dt = a.log_dt[(e + i) * a.H + h];
        sDt[i] = dt, sDA[i] = expf(A * dt);
      }
    }
    __syncthreads();
    for (int i = 0; i < n; ++i) {
      TileT::columns(sB + i * N4, N, lane, Bc);
      mamba2_token_rows<TileT, false>(cur, sDA[i], sDt[i], Bc, Bc, sX + i * pass_rows, rows, nw, w, acc);
    }
  }

  const float Dh = a.D[h];
  for (int t0 = 0; t0 < n_tok; t0 += tok) {
    const int n = min(tok, n_tok - t0);
    const int64_t r0 = row0 + t0;
    __syncthreads();
    load_bf_rows(sB, a.Bm + r0 * a.ldbc + int64_t(g) * N, n, N, a.ldbc, N4);
    load_bf_rows(sC, a.Cm + r0 * a.ldbc + int64_t(g) * N, n, N, a.ldbc, N4);
    load_bf_rows(sX, a.x + r0 * a.ldx + int64_t(h) * P + p0, n, rows, a.ldx, pass_rows);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      // mamba2_append_cuda's dt, so a chunk sees the dt a step would.
      const float dt = fminf(fmaxf(softplus_f(bf(a.dt_raw, (r0 + i) * a.lddt + h) + a.dt_bias[h]), a.dt_min), a.dt_max);
      sDt[i] = dt, sDA[i] = expf(A * dt);
    }
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += kSum) {
      float sums[kM];  // token j's row r at j·kR + r
#pragma unroll
      for (int j = 0; j < kSum; ++j) {
        const int i = i0 + j;
        if (i < n) {
          TileT::columns(sB + i * N4, N, lane, Bc);
          TileT::columns(sC + i * N4, N, lane, Cc);
          mamba2_token_rows(cur, sDA[i], sDt[i], Bc, Cc, sX + i * pass_rows, rows, nw, w, acc);
        }
#pragma unroll
        for (int r = 0; r < kR; ++r) sums[j * kR + r] = i < n ? acc[r] : 0.0f;
      }
      transposed_sums<kM>(sums, lane);
      const int k = summed_index<kM>(lane), i = i0 + k / kR, r = TileT::row(w, nw, k % kR);
      if (sum_writer<kM>(lane) && i < n && r < rows)
        put_bf(a.y, (r0 + i) * a.ldy + int64_t(h) * P + p0 + r, sums[0] + Dh * sX[i * pass_rows + r]);
    }
  }
  cur.store(a.state + int64_t(a.out_slot[b]) * a.H * P * N + at, rows, N, N, w, nw, lane);
}

}  // namespace

cudaError_t mamba2_scan_cuda(const Mamba2ScanArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  const int64_t HP = int64_t(a.H) * a.P, GN = int64_t(a.G) * a.N;
  if (a.batch < 0 || a.batch > 65535 || a.H <= 0 || a.G <= 0 || a.H % a.G != 0 || a.P <= 0 || a.N < 1 ||
      a.N > kMaxTileCols || a.T < 1 || (a.tile_rows != 0 && a.tile_rows != 2 && a.tile_rows != kMamba2Rows) ||
      (a.tokens_per_sum != 0 && a.tokens_per_sum != 1 && a.tokens_per_sum != 2) ||
      a.ldx < HP || a.ldbc < GN || a.lddt < a.H || a.ldy < HP || !(a.dt_min <= a.dt_max) || a.A_log == nullptr ||
      a.D == nullptr || a.dt_bias == nullptr || a.state == nullptr || a.slot == nullptr || a.out_slot == nullptr ||
      a.x == nullptr || a.Bm == nullptr || a.Cm == nullptr || a.dt_raw == nullptr || a.y == nullptr)
    return cudaErrorInvalidValue;
  if (a.n_log != nullptr && ((a.pages.page == nullptr && a.W < 1) || a.log_x == nullptr || a.log_B == nullptr ||
                             a.log_dt == nullptr))
    return cudaErrorInvalidValue;
  if (!log_pages_valid(a.pages)) return cudaErrorInvalidValue;
  // Rows a warp: the step kernel's (tile_rows; 8 measured no faster on the
  // H200 at batch 1–64: shared memory's reads of B and C do not bound this loop).
  return with_mamba2_tile(a, [&](auto tag) {
    using TileT = decltype(tag);
    const int nw = mamba2_warps(a.P, TileT::kRows), pass_rows = nw * TileT::kRows;
    const int slices = (a.P + pass_rows - 1) / pass_rows;
    const size_t per_tok = sizeof(float) * (2 * size_t((a.N + 3) & ~3) + size_t(pass_rows) + 2);
    const int tok = int(std::min<size_t>(kScanMaxTok, kScanMaxShm / per_tok));
    if (tok < 1 || slices > 65535) return cudaErrorInvalidValue;
    auto launch = [&](auto kernel) {
      launch_kernel(kernel, dim3(a.H, a.batch, slices), 32 * nw, per_tok * size_t(tok), stream, a, tok);
      return cudaGetLastError();
    };
    const bool one = (a.tokens_per_sum != 0 ? a.tokens_per_sum : kScanTokensPerSum) == 1;
    if (a.pages.page != nullptr && a.n_log != nullptr)
      return one ? launch(mamba2_scan_kernel<TileT, 1, true>) : launch(mamba2_scan_kernel<TileT, 2, true>);
    return one ? launch(mamba2_scan_kernel<TileT, 1, false>) : launch(mamba2_scan_kernel<TileT, 2, false>);
  });
}

}  // namespace replayssm::ops::cuda
