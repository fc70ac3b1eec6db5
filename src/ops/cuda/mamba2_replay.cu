// Mamba2 replay decode (see mamba2_decode.h). One block per (head,
// sequence) streams the checkpoint in passes of rows (mamba2_launch.h).
// Dual form, with L_s = Σ_{r≤s} dt_r·A from the checkpoint:
//   y_t = e^{L_t}·S_c·C_t + Σ_{s≤t} e^{L_t−L_s}·dt_s·(B_s·C_t)·x_s + D·x_t
//   fold f: S ← e^{L_{f−1}}·S_c + Σ_{s<f} e^{L_{f−1}−L_s}·dt_s·x_s ⊗ B_s
// The first pass of the checkpoint is requested before the log (a few KB,
// 16-byte loads) is read and the next pass during each pass, so the log's
// latency-bound work overlaps the state read. A fold reuses the rows in
// registers: the flush costs one state write, not a second read. At small
// batch the launcher takes the sequential recurrence in wide blocks
// instead (mamba2_replay_wide.cu).
#include <type_traits>

#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_launch.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/mamba2_replay_scratch.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

// The sequential recurrence (mamba2_replay_exact.cu): arguments already checked.
cudaError_t mamba2_replay_exact(const Mamba2DecodeArgs& a, cudaStream_t stream);
// The sequential recurrence in wide blocks, for few blocks
// (mamba2_replay_wide.cu): arguments already checked, no fork groups;
// cudaErrorNotSupported when its shared memory would not fit.
cudaError_t mamba2_replay_wide(const Mamba2DecodeArgs& a, cudaStream_t stream);
// The log's part of y and the decays into scratch, per (group, sequence):
// the split path's first kernel (mamba2_replay_log.cu).
cudaError_t mamba2_replay_log(const Mamba2DecodeArgs& a, cudaStream_t stream);
// The split path's per-head pass on tensor cores (mamba2_replay_mma.cu),
// where N % 16 == 0 and a block has at most 8 outputs (…_fits): the log
// kernel, then the pass.
bool mamba2_replay_mma_fits(const Mamba2DecodeArgs& a);
cudaError_t mamba2_replay_mma(const Mamba2DecodeArgs& a, cudaStream_t stream);
// The log's part and the pass in one kernel, for full tiles
// (mamba2_replay_fused.cu): no fork groups, N 128 or 256, P % 16 == 0, T ≤ 4.
bool mamba2_replay_fused_fits(const Mamba2DecodeArgs& a);
cudaError_t mamba2_replay_fused(const Mamba2DecodeArgs& a, cudaStream_t stream);

namespace {

// What a replay block's passes read, in shared memory: the outputs it
// produces (a token of one sequence each; several sequences when a fork
// group shares the checkpoint) and the log entries it folds.
struct ReplayLog {
  const float* C;        // (n_out, N4) C of each output's token
  const float* decay;    // (n_out) e^{L_t}
  const float* Y;        // (n_out, ld) the log's part of y, with D·x
  const int64_t* yoff;   // (n_out) where output u's row of y starts
  float* Acc;            // (n_out, ld) the split path's S_c·C_t, combined once the scratch has come
  int n_out;
  const float* L;   // (W) L_s of the folding sequence
  const float* F;   // (W) fold coefficients e^{L_{f−1}−L_s}·dt_s
  const float* X;   // (W, ld) x_s
  const float* U;   // (P, ldu) the split path's fold rows F_s·x_s[p], zeros past f to a multiple of 4 entries
  const float* B;   // (W, N4) B_s
  int ld;           // row stride of Y and X (P rounded up to 4)
  int ldu;          // row stride of U (W rounded up to 4)
  int f;            // entries to fold
};

// One pass of rows [p0, p0 + rows): their outputs, then their fold.
// kGrouped (the split path): several outputs reduced together and the fold
// from U (H200, ncu: a butterfly and an output per token, and a shared
// load and a product per entry and row, made the verify pass issue-bound).
// The one-kernel path (batch ≤ 16 at H = 128) keeps the per-token form:
// in 64 registers 8 blocks fit an SM, one wave at batch 8.
template <typename TileT, bool kGrouped>
__device__ __forceinline__ void replay_pass(const Mamba2DecodeArgs& a, TileT& cur, const ReplayLog& lg, float* Sf,
                                            int p0, int rows, int nw, int w, int lane) {
  const int N = a.N, N4 = (N + 3) & ~3;  // C and B rows are N4 apart
  // Several outputs (a verify's tokens, a fork group's members), grouped:
  // kG at a time, their kG·kRows row sums in one transposed butterfly and
  // one store a lane. Otherwise each output's rows alone.
  constexpr int kG = 4, kM = kG * TileT::kRows;
  if (!kGrouped || lg.n_out == 1) {  // block-uniform
    for (int t = 0; t < lg.n_out; ++t) {
      float Cc[TileT::kColChunks][TileT::kVec], acc[TileT::kRows];
      TileT::columns(lg.C + t * N4, N, lane, Cc);
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        acc[r] = 0.0f;
#pragma unroll
        for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
          for (int e = 0; e < TileT::kVec; ++e) acc[r] += cur.v[r][j][e] * Cc[j][e];
      }
      TileT::row_sums(acc, lane);
      const int i = TileT::row(w, nw, TileT::summed_row(lane));
      if (TileT::row_writer(lane) && i < rows) {
        if constexpr (kGrouped) lg.Acc[t * lg.ld + p0 + i] = acc[0];
        else put_bf(a.y, lg.yoff[t] + p0 + i, lg.decay[t] * acc[0] + lg.Y[t * lg.ld + p0 + i]);
      }
    }
  } else {
    for (int t0 = 0; t0 < lg.n_out; t0 += kG) {
      float acc[kM];
#pragma unroll
      for (int k = 0; k < kG; ++k) {
        float Cc[TileT::kColChunks][TileT::kVec] = {};
        if (t0 + k < lg.n_out) TileT::columns(lg.C + (t0 + k) * N4, N, lane, Cc);  // block-uniform
#pragma unroll
        for (int r = 0; r < TileT::kRows; ++r) {
          float d = 0.0f;
#pragma unroll
          for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
            for (int e = 0; e < TileT::kVec; ++e) d += cur.v[r][j][e] * Cc[j][e];
          acc[k * TileT::kRows + r] = d;
        }
      }
      transposed_sums<kM>(acc, lane);
      const int v = summed_index<kM>(lane);  // the (output, row) whose sum this lane holds
      const int t = t0 + v / TileT::kRows, i = TileT::row(w, nw, v % TileT::kRows);
      if (sum_writer<kM>(lane) && t < lg.n_out && i < rows) lg.Acc[t * lg.ld + p0 + i] = acc[0];
    }
  }
  if (lg.f == 0) return;  // block-uniform
  const float decay = expf(lg.L[lg.f - 1]);
#pragma unroll
  for (int r = 0; r < TileT::kRows; ++r)
#pragma unroll
    for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
      for (int e = 0; e < TileT::kVec; ++e) cur.v[r][j][e] *= decay;
  if constexpr (!kGrouped) {
    for (int s = 0; s < lg.f; ++s) {
      float Bc[TileT::kColChunks][TileT::kVec];
      TileT::columns(lg.B + s * N4, N, lane, Bc);
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int i = min(TileT::row(w, nw, r), rows - 1);  // rows past the pass are never stored
        const float c = lg.F[s] * lg.X[s * lg.ld + p0 + i];
#pragma unroll
        for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
          for (int e = 0; e < TileT::kVec; ++e) cur.v[r][j][e] += c * Bc[j][e];
      }
    }
  }
  if constexpr (kGrouped) {
    // U and B hold zeros past f up to a multiple of 4 entries (of kE
    // here), so the chunks run whole with no bound checked, and every lane loads its
    // columns of B unmasked (TileT::columns_unmasked). H200, ncu at batch
    // 64: the fold step was issue-bound, with 50 address, bound and
    // branch instructions for every 64 FMAs here. Two entries a chunk:
    // four held the 16-row tile's B loads of a chunk at once and spilled
    // at 7 blocks an SM.
    constexpr int kE = 2;
    const float* u0 = lg.U + p0 * lg.ldu;
    const int fe = (lg.f + kE - 1) / kE * kE;  // not to 4: a verify's 14 entries would run 16
    for (int s0 = 0; s0 < fe; s0 += kE) {
      float u[TileT::kRows][kE];
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int i = min(TileT::row(w, nw, r), rows - 1);  // rows past the pass are never stored
        const float2 x = *reinterpret_cast<const float2*>(u0 + i * lg.ldu + s0);
        u[r][0] = x.x, u[r][1] = x.y;
      }
      const float* b = lg.B + s0 * N4;
#pragma unroll
      for (int k = 0; k < kE; ++k, b += N4) {
        float Bc[TileT::kColChunks][TileT::kVec];
        TileT::columns_unmasked(b, N4, lane, Bc);
#pragma unroll
        for (int r = 0; r < TileT::kRows; ++r)
#pragma unroll
          for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
            for (int e = 0; e < TileT::kVec; ++e) cur.v[r][j][e] += u[r][k] * Bc[j][e];
      }
    }
  }
  cur.store(Sf + int64_t(p0) * N, rows, N, N, w, nw, lane);
}

// Blocks an SM the compiler must fit: 7 (≤ 72 registers) for the split
// path's 128-column tile of 4 rows, whose grouped outputs and fold
// otherwise take 86 (5 blocks), and 8 (64) for its instance without the
// fold's code (kFold: the steps that do not fold, H200: AR 1.71 → 1.74×
// at batch 64); 4 (≤ 128) for its 256-column tile, which
// ptxas otherwise put at 125–153 as unrelated code moved (4 or 3 blocks);
// 0 (no bound) elsewhere.
template <typename TileT, bool kSplit, bool kFold>
constexpr int kMamba2ReplayBlocks =
    kSplit && TileT::kVec == 4 && TileT::kColChunks == 1 && TileT::kRows == 4   ? (kFold ? 7 : 8)
    : kSplit && TileT::kVec == 4 && TileT::kColChunks == 2 && TileT::kRows == 4 ? 4
                                                                                : 0;

// kFold: the fold's code, for steps given fold arrays; the launcher takes
// the instance without it where none are (the backend's steps that do not
// fold). kSplit: the log's part of y and the decays come from the scratch that
// mamba2_replay_log (mamba2_replay_log.cu) wrote, and a block decodes a
// fork group (the sequences group_start[k] .. group_start[k+1] − 1, sharing
// a checkpoint): the checkpoint is read once for all of them. The log is
// read only to fold (a sequence alone in its group). Without kSplit: one
// sequence, its log's part computed here. kPaged: the log's rows through
// the block table (Mamba2DecodeArgs::pages).
template <typename TileT, bool kSplit, bool kFold, bool kPaged>
__global__ void __launch_bounds__(32 * kMamba2Warps, kMamba2ReplayBlocks<TileT, kSplit, kFold>) mamba2_replay_kernel(
    Mamba2DecodeArgs a) {
  // The one-kernel path: the checkpoint's first pass before the wait under
  // `early`. Not the log's older entries: loading them there held back the
  // release of the next kernel (launch.cuh) and cost 20% at batch 8
  // (docs/perf). The split path waits only before its last pass: the
  // kernel just before, the log's part, writes only the scratch, which is
  // read last, and every kernel before that one has finished (launch.cuh),
  // so the checkpoint streams while the log's part still runs.
  const bool early = kSplit || a.early;
  if (!early) pdl_begin();
  if (kSplit && a.release_early) pdl_release();
  const int h = blockIdx.x, g = h / (a.H / a.G);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, N = a.N, T = a.T, W = a.W, pass_rows = nw * TileT::kRows;
  // A fork group: its first position in the decode order, and the
  // sequence there, whose checkpoint (and, alone, whose fold) the block takes.
  const ReplayGroup fg = kSplit ? replay_group(a, blockIdx.y) : ReplayGroup{int(blockIdx.y), 1, int(blockIdx.y), true};
  if (fg.members <= 0) return pdl_leave();  // an empty group (block-uniform)
  const int first = fg.first, members = fg.members, b = fg.b, n_out = members * T;
  // Member m's first row of Cm and y (decode_rows.cuh; a row map has no groups).
  auto first_row = [&](int m) { return decode_row0(a.row, replay_seq(a, first + m), T); };
  if (first_row(0) < 0) return pdl_leave();  // not in this launch (block-uniform)
  const int n_log = min(max(a.n_log[b], T), W), base = n_log - T;
  const int f = kFold && a.fold != nullptr && fg.alone ? min(max(a.fold[b], 0), min(n_log, a.max_fold)) : 0;
  extern __shared__ float shm[];  // every array a multiple of 4 floats from the start: 16-byte aligned
  const int W4 = (W + 3) & ~3, P4 = (P + 3) & ~3, N4 = (N + 3) & ~3, O4 = (n_out + 3) & ~3;
  int64_t* sYoff = reinterpret_cast<int64_t*>(shm);  // (n_out)
  float* sC = shm + 2 * O4;     // (n_out, N) C of each output's token
  float* sDecay = sC + n_out * N4;  // (n_out) e^{L_t}
  float* sY = sDecay + O4;      // (n_out, P)
  float* sB = sY + n_out * P4;  // (W4, N) B_s
  float* sL = sB + W4 * N4;     // (W) L_s
  float* sDt = sL + W4;         // (W) dt_s
  float* sF = sDt + W4;         // (W) fold coefficients
  float* sWt = sF + W4;         // (T, W) output weights
  float* sX = sWt + T * W4;     // (W, P) x_s
  float* sU = sX + W * P4;      // (P, W4) fold rows F_s·x_s[p] (split path only)
  float* sAcc = sU + P * W4;    // (n_out, P) S_c·C_t (split path only)

  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * P * N;
  TileT cur;
  cur.load(S, min(pass_rows, P), N, N, w, nw, lane);

  if (!kSplit && early) pdl_begin();  // the log's newest entries and C come from the kernel before
  // The log rows: all of them to compute y here, or the folded ones only.
  const int rows_needed = kSplit ? f : n_log;
  const float A = -expf(a.A_log[h]);
  if constexpr (kPaged) {
    const PagedLog pl = paged_log(a.pages, b);
    for (int s = threadIdx.x; s < rows_needed; s += blockDim.x) {
      const float dt = a.log_dt[pl.row(s) * a.H + h];
      sDt[s] = dt;
      sL[s] = dt * A;
    }
    load_bf_rows_at(sB, a.log_B + int64_t(g) * N, PagedRows{pl, 0}, rows_needed, N, int64_t(a.G) * N, N4);
    load_bf_rows_at(sX, a.log_x + int64_t(h) * P, PagedRows{pl, 0}, rows_needed, P, int64_t(a.H) * P, P4);
  } else {
    for (int s = threadIdx.x; s < rows_needed; s += blockDim.x) {
      const float dt = a.log_dt[(int64_t(b) * W + s) * a.H + h];
      sDt[s] = dt;
      sL[s] = dt * A;
    }
    load_bf_rows(sB, a.log_B + (int64_t(b) * W * a.G + g) * N, rows_needed, N, int64_t(a.G) * N, N4);
    load_bf_rows(sX, a.log_x + (int64_t(b) * W * a.H + h) * P, rows_needed, P, int64_t(a.H) * P, P4);
  }
  for (int m = 0; m < members; ++m)
    load_bf_rows(sC + m * T * N4, a.Cm + (first_row(m) * a.G + g) * N, T, N, int64_t(a.G) * N, N4);
  for (int u = threadIdx.x; u < n_out; u += blockDim.x)
    sYoff[u] = ((first_row(u / T) + u % T) * a.H + h) * P;
  __syncthreads();
  if (rows_needed > 0) {  // block-uniform
    if (w == 0) warp_prefix_sum(sL, rows_needed, lane);
    __syncthreads();
  }

  if constexpr (!kSplit) {
    // Output weights: one warp per (token, entry) pair, a dot over N.
    for (int k = w; k < T * n_log; k += nw) {
      const int t = k / n_log, s = k % n_log;
      if (s > base + t) continue;  // warp-uniform
      float d = 0.0f;
      for (int n = lane; n < N; n += 32) d += sB[s * N4 + n] * sC[t * N4 + n];
      d = warp_sum(d);
      if (lane == 0) sWt[t * W4 + s] = expf(sL[base + t] - sL[s]) * sDt[s] * d;
    }
    for (int t = threadIdx.x; t < T; t += blockDim.x) sDecay[t] = expf(sL[base + t]);
  }
  for (int s = threadIdx.x; s < f; s += blockDim.x) sF[s] = expf(sL[f - 1] - sL[s]) * sDt[s];
  __syncthreads();
  if (kSplit && f > 0) {  // block-uniform: the products the fold's rows take, once per block
    // By 4 entries, zeros past f (and in B's rows there) for the fold's
    // whole chunks (replay_pass); a 16-byte store a thread.
    const int f4 = (f + 3) & ~3;
    for (int i = threadIdx.x; i < P * f4 / 4; i += blockDim.x) {
      const int p = i % P, s = i / P * 4;
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = s + e < f ? sF[s + e] * sX[(s + e) * P4 + p] : 0.0f;
      *reinterpret_cast<float4*>(sU + p * W4 + s) = make_float4(v[0], v[1], v[2], v[3]);
    }
    for (int i = f * N4 + threadIdx.x; i < f4 * N4; i += blockDim.x) sB[i] = 0.0f;
    __syncthreads();
  }
  if constexpr (!kSplit) {
    const float Dh = a.D[h];
    for (int i = threadIdx.x; i < T * P; i += blockDim.x) {
      const int t = i / P, p = i % P;
      float acc = Dh * sX[(base + t) * P4 + p];
      for (int s = 0; s <= base + t; ++s) acc += sWt[t * W4 + s] * sX[s * P4 + p];
      sY[t * P4 + p] = acc;
    }
    __syncthreads();
  }

  const ReplayLog lg{sC, sDecay, sY, sYoff, sAcc, n_out, sL, sF, sX, sU, sB, P4, W4, f};
  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.H + h) * P * N : nullptr;
  for (int p0 = 0; p0 < P; p0 += pass_rows) {
    const int rows = min(pass_rows, P - p0);
    TileT nxt;
    if (p0 + pass_rows < P) {
      nxt.load(S + int64_t(p0 + pass_rows) * N, min(pass_rows, P - p0 - pass_rows), N, N, w, nw, lane);
    } else if constexpr (kSplit) {
      request_replay_scratch(a, first, h, n_out, sY, sDecay, P4);  // in flight during the last pass
    }
    replay_pass<TileT, kSplit>(a, cur, lg, Sf, p0, rows, nw, w, lane);
    cur = nxt;
  }
  if constexpr (kSplit) write_replay_outputs(a, sYoff, sDecay, sAcc, sY, n_out, P4);
}

}  // namespace

bool mamba2_replay_steps_faster(const Mamba2DecodeArgs& a) {
  int sms = 0;
  if (device_sms(&sms) != cudaSuccess) return false;
  const int64_t blocks = int64_t(a.batch) * a.H;
  return blocks > sms && blocks <= 2 * int64_t(sms);
}

cudaError_t mamba2_replay_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  if (!log_pages_valid(a.pages)) return cudaErrorInvalidValue;
  if (a.pages.page != nullptr && a.W == 0) {  // paged: W only bounds the log, 0 the most a kernel takes
    Mamba2DecodeArgs b = a;
    b.W = kMamba2MaxW;
    return mamba2_replay_cuda(b, stream);
  }
  if (a.batch < 0 || a.G <= 0 || a.H % a.G != 0 || a.P <= 0 || a.T < 1 || a.T > kMamba2MaxT || a.W < a.T ||
      a.W > kMamba2MaxW || a.max_fold < 0 || a.max_fold > a.W || (a.fold != nullptr && a.fold_slot == nullptr))
    return cudaErrorInvalidValue;
  if (a.variant < 0 || a.variant > 5 || ((a.variant == 2 || a.variant == 4) && a.scratch == nullptr) || a.N < 1 ||
      a.N > kMaxTileCols ||
      (a.group_start != nullptr && (a.scratch == nullptr || a.variant == 1 || a.variant == 3 || a.exact || a.n_groups < 1 ||
                                    a.max_group < 1 || a.max_group > kMamba2MaxGroup)) ||
      (a.seq != nullptr && a.group_start == nullptr) || (a.row != nullptr && a.group_start != nullptr) ||
      (a.tile_rows != 0 && a.tile_rows != 2 && a.tile_rows != kMamba2Rows))
    return cudaErrorInvalidValue;  // every refusal before the device is asked anything
  int sms = 0;
  if (cudaError_t e = device_sms(&sms); e != cudaSuccess) return e;
  if (a.variant == 5) {  // the fused kernel forced, where it applies
    if (a.group_start == nullptr && mamba2_replay_fused_fits(a)) return mamba2_replay_fused(a, stream);
    Mamba2DecodeArgs b = a;
    b.variant = 0;
    return mamba2_replay_cuda(b, stream);
  }
  // Fewer (head, sequence) blocks than SMs (batch 1 at H = 128): the
  // sequential recurrence in wide blocks, the older entries applied before
  // the PDL wait — faster there than the dual form and than the standard
  // step. Not at twice that: H200 at batch 2, AR 8.8 µs against the fused
  // kernel's 6.8 and the standard step's 7.8–8.1, verify 11.6 against 8.5
  // (2026-12-03, 15b63c3) — but exact replay, which the fused kernel
  // cannot give, keeps them to twice the SMs (at batch 2: AR 8.8 against
  // the 4-warp exact kernel's 12.5 µs, verify 11.6 against 16.9).
  const int64_t wide_blocks = int64_t(a.exact ? 2 : 1) * sms;
  if (a.group_start == nullptr && (a.variant == 3 || (a.variant == 0 && int64_t(a.batch) * a.H <= wide_blocks))) {
    if (cudaError_t e = mamba2_replay_wide(a, stream); e != cudaErrorNotSupported) return e;
  }
  if (a.exact) return mamba2_replay_exact(a, stream);
  // Fork groups on tensor cores: a block's several outputs cost two mma
  // per 8 columns instead of a butterfly per 4 (H200: beams of 8 at batch
  // 64–512 5–12% faster). Not a verify or plain decoding: there the FMA
  // pass measured faster (the state read by 16-row tiles; docs/perf).
  if ((a.variant == 4 || (a.variant == 0 && a.group_start != nullptr)) && mamba2_replay_mma_fits(a))
    return mamba2_replay_mma(a, stream);
  // Past the wide blocks' batches, the fused kernel where it applies
  // (mamba2_replay_fused.cu; H200 at batch 8: AR 11.5 against the one
  // kernel's 13.3 µs, verify 14.6 against 26.6; 9d9784c). Elsewhere the
  // split path when there are enough (head, sequence) blocks that its
  // second launch pays back (H = 128: slower at batch 8, faster from 64;
  // docs/perf) and scratch, else one kernel.
  if (a.group_start == nullptr && a.variant == 0 && mamba2_replay_fused_fits(a)) return mamba2_replay_fused(a, stream);
  const bool split = a.variant == 2 || a.variant == 4 || a.group_start != nullptr ||
                     (a.variant == 0 && a.scratch != nullptr && int64_t(a.batch) * a.H >= 16 * int64_t(sms));
  const int W4 = (a.W + 3) & ~3, P4 = (a.P + 3) & ~3, N4 = (a.N + 3) & ~3;
  if (split)
    if (cudaError_t e = mamba2_replay_log(a, stream); e != cudaSuccess) return e;
  return with_mamba2_tile(a, [&](auto tag) {
    using TileT = decltype(tag);
    const int nw = mamba2_warps(a.P, TileT::kRows);
    const int n_out = (a.group_start != nullptr ? a.max_group : 1) * a.T, O4 = (n_out + 3) & ~3;
    const size_t shm = sizeof(float) * (2 * O4 + n_out * N4 + O4 + n_out * P4 + W4 * N4 + 3 * W4 + a.T * W4 +
                                         a.W * P4 + (split ? a.P * W4 + n_out * P4 : 0));  // sU, sAcc: the split path's only
    const int blocks_y = a.group_start != nullptr ? a.n_groups : a.batch;
    auto launch = [&](auto kernel) {
      if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
      launch_kernel(kernel, dim3(a.H, blocks_y), 32 * nw, shm, stream, a);
      return cudaGetLastError();
    };
    auto pick = [&](auto paged) {
      constexpr bool kPaged = decltype(paged)::value;
      if (!split) return launch(mamba2_replay_kernel<TileT, false, true, kPaged>);
      return a.fold != nullptr ? launch(mamba2_replay_kernel<TileT, true, true, kPaged>)
                               : launch(mamba2_replay_kernel<TileT, true, false, kPaged>);
    };
    return a.pages.page != nullptr ? pick(std::true_type{}) : pick(std::false_type{});
  });
}

}  // namespace replayssm::ops::cuda
