// Gated DeltaNet replay decode (see gdn_decode.h). One block per (slice of
// value columns, value head, sequence) streams its columns of the
// checkpoint in passes of rows, the next pass in flight while one computes
// (as mamba2_replay.cu), while the log arrives in shared memory by
// cp.async (the passes need only the new keys and queries). Dual form, with
// G_s = Σ_{r≤s} g_r from the checkpoint:
//   mem_t = e^{G_t}·S_cᵀk_t + Σ_{s<t} e^{G_t−G_s}(k_s·k_t)·u_s ;  u_t = β_t(v_t − mem_t)
//   o_t   = e^{G_t}·S_cᵀq_t + Σ_{s≤t} e^{G_t−G_s}(k_s·q_t)·u_s
//   fold f: S ← e^{G_{f−1}}·S_c + Σ_{s<f} e^{G_{f−1}−G_s}·k_s·u_sᵀ
// S_cᵀk_t and S_cᵀq_t are sums over rows: each thread adds its rows of a
// pass into its own shared-memory partials, summed across warps at the end.
#include "ops/cuda/gdn_decode.h"

#include <algorithm>
#include <type_traits>

#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/gdn_replay_mma.cuh"
#include "ops/cuda/gdn_token.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

// The small-batch variant (gdn_replay_sliced.cu): arguments already checked.
cudaError_t gdn_replay_sliced(const GdnDecodeArgs& a, cudaStream_t stream);
// The sequential recurrence in the standard step's kernels (gdn_step.cu).
cudaError_t gdn_replay_exact(const GdnDecodeArgs& a, cudaStream_t stream);
// Whether the register-resident warps' blocks are one wave, and those
// warps with the older entries in the dual form (gdn_step_warps.cu).
bool gdn_step_warps_one_wave(const GdnDecodeArgs& a, int sms);
cudaError_t gdn_replay_warps(const GdnDecodeArgs& a, cudaStream_t stream);
// Fork groups (gdn_replay_group.cu): arguments already checked.
cudaError_t gdn_replay_group(const GdnDecodeArgs& a, cudaStream_t stream);

namespace {

constexpr int kGdnWarps = 4;
constexpr int kGdnReplaySlice = 128;  // the launcher's slice width (docs/perf)

// Blocks an SM the compiler must fit: for one token's 2 register partials
// and 4 rows a pass, 8 without the fold's code (63 registers) and 7 with
// it (72; with the fold's rows nvcc 13.0 spills 12/8 B a thread; unbounded
// 80 and 6 blocks: AR at batch 256–512 3% faster on the H200 with the
// bound); the same for the tensor-core pass
// (64 and 72 registers; a verify's shared memory allows 8 blocks an SM
// without the fold, its inputs staged, and 7 with it). The FMA verify's 8
// vectors bounded to 5 blocks (96 registers) measured the same as 4
// (128): 0, no bound, elsewhere.
template <typename TileT, int kQ, bool kMma, bool kFold>
constexpr int kGdnReplayBlocks = kMma || (kQ == 2 && TileT::kRows == 4) ? (kFold ? 7 : 8) : 0;

// A streaming block's shared memory, in floats, every array a multiple of
// 4 floats from the start (16-byte aligned): the kernel's pointers and the
// launcher's size from one place. nq: the sums S_cᵀx (kQ with register
// partials, else 2T); kf: fold entries of kFoldRows' coefficients (0: none).
// With kQ > 0 the new tokens' keys and queries are read only to build sXT,
// and the key dots' partials come after the passes: they share floats; and
// the new tokens' u stay in registers: u_s has rows for the older entries
// only (H200: a verify's block 33 → 29 KB, 6 → 7 blocks an SM).
struct GdnReplayShm {
  int U, V, Sx, Red, Kb, Kt, Q, G, F, Co, Beta, EG, XT, Part, KF, St, total;
  __host__ __device__ GdnReplayShm(int W, int T, int dk, int cw, int nw, int kQ, bool mma, int kf, bool staged) {
    const int W4 = (W + 3) & ~3, K4 = (dk + 3) & ~3, V4 = (cw + 3) & ~3, T4 = (T + 3) & ~3;
    const int KB = ((dk + 7) & ~7) / 2 + 4, nq = kQ > 0 ? kQ : 2 * T, part = nw * kQ * W4;
    // staged: the new tokens' k, q (T, stage_k) and v (T, stage_v) as bf16,
    // in sSx's floats where they fit (the sums come after the passes).
    const int stage = staged ? ((T * (2 * stage_k(dk) + stage_v(cw)) + 1) / 2 + 3) & ~3 : 0;
    int at = 0;
    auto take = [&](int n) { const int o = at; at += n; return o; };
    U = take((kQ > 0 ? W - T : W) * V4), V = take(T * V4), Sx = take(nq * V4), Red = take(mma ? 0 : nq * nw * V4);
    // Staged, the new keys and queries go to XT from the stage: Kt holds
    // the key dots' partials alone (H200: a verify's block 28.8 → 27.3 KB,
    // 7 → 8 blocks an SM).
    Kb = take(W * KB), Kt = take(!staged && 2 * T * K4 > part ? 2 * T * K4 : part), Q = Kt + T * K4, Part = Kt;
    G = take(W4), F = take(W4), Co = take(nq * W4), Beta = take(T4), EG = take(T4);
    XT = take(kQ > 0 ? ((dk + 15) & ~15) * kQ : 0), KF = take(kf > 0 ? dk * ((kf + 3) & ~3) : 0);
    St = stage <= nq * V4 ? Sx : take(stage), total = at;
  }
  // Staged rows' strides in bf16 elements: 16-byte chunks where the rows allow.
  __host__ __device__ static int stage_k(int dk) { return (dk + 7) & ~7; }
  __host__ __device__ static int stage_v(int cw) { return (cw + 7) & ~7; }
};

// kQ > 0 (kQ ≥ 2T): this thread's column partials of the 2T sums S_cᵀk_t,
// S_cᵀq_t stay in registers across the passes and meet once, at the end,
// in shared memory; the vectors' entries for a row come in 8-byte loads
// (sXT, row-major over the kQ vectors). kQ = 0: each pass adds its
// partials into shared memory (any T, any tile).
// Why (H200, ncu): the per-pass shared read-modify-write, 4 scalar loads
// and stores per vector and pass, doubled a verify pass's instructions.
// kFoldRows (with kQ = 2): a fold's row coefficients e^{G_{f−1}−G_s}·k_s[i]
// once per block into shared memory, read 2 entries an 8-byte load by the
// passes, instead of a key load, a widening and a product per entry and
// row (H200: AR 7% faster at batch 64, 1–3% at 256–512; at batch 8, one
// wave, 23% slower: the launcher's choice by blocks).
// kMma (with kQ = 8, 128-column slices): the passes' products on tensor
// cores (gdn_replay_mma.cuh), the state in GdnMmaTile's layout; the log,
// the key dots and the outputs as above.
// kFold: the fold's code, for steps that may fold (a.fold set); without it
// the steps that do not keep fewer registers (H200: the fold's code made the
// shared instance 72 registers, 7 blocks an SM, where 8 fit without it).
// kPaged: the log's rows through the block table (GdnDecodeArgs::pages).
template <typename TileT, int kQ, bool kFoldRows, bool kMma, bool kFold, bool kPaged>
__global__ void __launch_bounds__(32 * kGdnWarps, kGdnReplayBlocks<TileT, kQ, kMma, kFold>) gdn_replay_kernel(GdnDecodeArgs a) {
  static_assert(!kMma || (kQ == GdnMmaTile::kVectors && TileT::kCols == 128 && !kFoldRows));
  static_assert(kFold || !kFoldRows);
  using StateT = std::conditional_t<kMma, GdnMmaTile, TileT>;
  const int h = blockIdx.y, b = blockIdx.z, kh = h / (a.Hv / a.Hk);
  constexpr int nw = kGdnWarps;  // a constant: see docs/perf (GDN block shapes)
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dk = a.dk, dv = a.dv, T = a.T, W = a.W, pass_rows = kMma ? GdnMmaTile::kPassRows : nw * TileT::kRows;
  // This block's value columns [c0, c0 + cw) (as gdn_step.cu; dv: the row stride).
  const int c0 = blockIdx.x * TileT::kCols, cw = dv - c0 < TileT::kCols ? dv - c0 : TileT::kCols;
  const GdnLogSpan span = gdn_log_span<true, kFold>(a, b);
  const int64_t r0 = decode_row0(a.row, b, T);  // this sequence's first row of q, v, β, o (k, g, out_slot)
  if (r0 < 0) return pdl_leave();               // not in this launch (block-uniform)
  const int n_log = span.n_log, base = span.base, f = span.f;
  const PagedLog pl = paged_log_if<kPaged>(a.pages, b);  // the log's rows, kPaged
  // KB: floats a key row takes as bf16, 4 more than dk needs so that lanes
  // reading one row each (the dots below) meet 4 to a bank, not 32.
  const int W4 = (W + 3) & ~3, K4 = (dk + 3) & ~3, V4 = (cw + 3) & ~3, KB = ((dk + 7) & ~7) / 2 + 4;
  // The vectors x of the sums S_cᵀx, with kQ > 0: k_t at t, q_t at kT + t
  // (zero where t ≥ T); else k_t at t, q_t at T + t.
  constexpr int kT = kQ / 2;
  constexpr bool kStage = kMma && !kFold;  // the prologue below
  const GdnReplayShm L(W, T, dk, cw, nw, kQ, kMma, kFoldRows ? a.max_fold : 0, kStage);
  extern __shared__ float shm[];
  float* sU = shm + L.U;      // (W, cw) u_s (with kQ > 0: W − T rows, the older entries only)
  float* sV = shm + L.V;      // (T, cw)
  float* sSx = shm + L.Sx;    // (nq, cw) S_cᵀx
  float* sRed = shm + L.Red;  // (nq, nw, cw) per-warp partials (not kMma: its warps own their columns)
  uint16_t* sKb = reinterpret_cast<uint16_t*>(shm + L.Kb);  // (W, dk) k_s as bf16, KB floats a row
  float* sKt = shm + L.Kt;    // (T, dk) the new tokens' keys (not kStage)
  float* sQ = shm + L.Q;      // (T, dk) (not kStage)
  float* sG = shm + L.G;      // (W) G_s
  float* sF = shm + L.F;      // (W) fold coefficients e^{G_{f−1}−G_s}
  // Output weights e^{G_t−G_s}(k_s·k_t), e^{G_t−G_s}(k_s·q_t): with kQ > 0
  // (W, kQ) by entry, in the vectors' order; else (T, W) each, sKK then sKQ.
  float* sCo = shm + L.Co;
  float* sKK = sCo;
  float* sKQ = sCo + T * W4;
  float* sBeta = shm + L.Beta;  // (T)
  float* sEG = shm + L.EG;      // (T) e^{G_t} of the new tokens
  float* sXT = shm + L.XT;      // (dk rounded up to 16, kQ) the vectors by row, zero past dk
  float* sPart = shm + L.Part;  // (nw, kQ, W4) the key dots' partial sums, with kQ > 0 (sKt's floats)
  const int F4 = (a.max_fold + 3) & ~3;
  float* sKF = shm + L.KF;  // (dk, F4) with kFoldRows: a fold's row coefficients
  const int red = L.Kb - L.Red;  // floats of sRed

  const float* S = a.state + (int64_t(a.slot[b]) * a.Hv + h) * dk * dv + c0;
  auto load_pass = [&](StateT& tile, int p0) {
    if constexpr (kMma) tile.load(S + int64_t(p0) * dv, min(pass_rows, dk - p0), dv, w, lane);
    // Whole passes without bounds (tile.cuh), but not with the fold's
    // rows: there they raised the spills (ptxas 12/8 → 40/28 B a thread)
    // and made the staggered cycle, whose launches all fold, 1.5–3% slower
    // on the H200 (2026-12-04, a3e08b2).
    else if (!kFoldRows && cw == TileT::kCols && dk - p0 >= pass_rows)
      tile.load_whole(S + int64_t(p0) * dv, dv, w, nw, lane);
    else tile.load(S + int64_t(p0) * dv, min(pass_rows, dk - p0), cw, dv, w, nw, lane);
  };
  // kStage (the tensor-core pass without a fold: a verify's steps between
  // folds): the new tokens' keys, queries, values (bf16, staged) and β are
  // requested first, then the first pass, then the log, and the prologue
  // waits for the first group alone. Otherwise they are read after the
  // log is requested, and the prologue waits behind it. H200 (docs/perf:
  // per-block timestamps put a batch-64 block's prologue at 6 of its 21
  // µs): that step 4% faster at batch 64 and 1–3% at 512 staged; one
  // token's steps staged were 2–5% slower at 256–512, and fold steps,
  // which wait for the log before their passes, slower too.
  // The log (decays, keys, u) arrives while the checkpoint streams: only a
  // fold needs it before the passes; the dots and the outputs come after.
  // (T, SK) k, (T, SK) q, (T, SV) v as bf16, with kStage
  const int SK = GdnReplayShm::stage_k(dk), SV = GdnReplayShm::stage_v(cw);
  // copy(stage, src, row map (tile.cuh), cols, src row stride, stage row stride)
  auto stage_ktqv = [&](auto&& copy) {
    uint16_t* st = reinterpret_cast<uint16_t*>(shm + L.St);
    if constexpr (kPaged) {
      copy(st, a.log_k + int64_t(kh) * dk, PagedRows{pl, base}, dk, int64_t(a.Hk) * dk, SK);
    } else {
      const uint16_t* lk = a.log_k + (int64_t(b) * W * a.Hk + kh) * dk;
      copy(st, lk + int64_t(base) * a.Hk * dk, Consecutive{}, dk, int64_t(a.Hk) * dk, SK);
    }
    copy(st + T * SK, a.q + (r0 * a.Hk + kh) * dk, Consecutive{}, dk, int64_t(a.Hk) * dk, SK);
    copy(st + 2 * T * SK, a.v + (r0 * a.Hv + h) * dv + c0, Consecutive{}, cw, int64_t(a.Hv) * dv, SV);
  };
  // Everything read so far is the plan (slots, log lengths, folds, rows),
  // which no kernel writes (launch.cuh): read while the kernel before ends
  // — and with a.early the first pass of the checkpoint too.
  StateT cur;
  if (a.early) load_pass(cur, 0);
  pdl_begin();
  if constexpr (kStage) {
    // kMma: the copies' loops stepped (tile.cuh; its instances have the registers).
    stage_ktqv([&](uint16_t* st, const uint16_t* src, auto rows, int cols, int64_t lds, int ldst) {
      copy_async_bf_rows_at<kMma>(st, src, rows, T, cols, lds, ldst);
    });
    copy_async_rows<kMma>(sBeta, a.beta + r0 * a.Hv + h, T, 1, a.Hv, 1);
    cp_async_commit();
  }
  if (!a.early) load_pass(cur, 0);
  // Several tokens: passes stream one ahead in registers, and L2 is asked
  // for the pass after that too (whole rows: contiguous). H200: a verify
  // 3–5% faster at batch 64–512; one token 1–3% slower, so not there; two
  // or three passes ahead slower for both (2026-12-04, 5d8f93b).
  const int ahead = a.l2_ahead >= 0 ? a.l2_ahead : T > 1 ? 1 : 0;
  const bool pf = ahead > 0 && cw == dv && dv % 4 == 0;
  auto prefetch_pass = [&](int p0) {
    if (pf && threadIdx.x == 0 && p0 < dk) prefetch_l2(S + int64_t(p0) * dv, 4u * unsigned(min(pass_rows, dk - p0) * dv));
  };
  for (int k = 1; k <= ahead; ++k) prefetch_pass(k * pass_rows);
  // The keys' columns: entry s at lk + s·Hk·dk, or paged at lk + row(s)·Hk·dk.
  const uint16_t* lk = kPaged ? a.log_k + int64_t(kh) * dk : a.log_k + (int64_t(b) * W * a.Hk + kh) * dk;
  // kMma: the copies' loops stepped (tile.cuh; its instances have the registers).
  if constexpr (kPaged) {
    const PagedRows all{pl, 0};
    copy_async_rows_at<kMma>(sG, a.log_g + h, all, n_log, 1, a.Hv, 1);
    copy_async_bf_rows_at<kMma>(sKb, lk, all, n_log, dk, int64_t(a.Hk) * dk, 2 * KB);
    copy_async_rows_at<kMma>(sU, a.log_u + int64_t(h) * dv + c0, all, base, cw, int64_t(a.Hv) * dv, V4);
  } else {
    copy_async_rows<kMma>(sG, a.log_g + int64_t(b) * W * a.Hv + h, n_log, 1, a.Hv, 1);
    copy_async_bf_rows<kMma>(sKb, lk, n_log, dk, int64_t(a.Hk) * dk, 2 * KB);
    copy_async_rows<kMma>(sU, a.log_u + (int64_t(b) * W * a.Hv + h) * dv + c0, base, cw, int64_t(a.Hv) * dv, V4);
  }
  cp_async_commit();
  if constexpr (kStage) {  // kMma: no sRed to zero
    // The first group: v converted by the threads that copied it; k and q
    // go from the stage straight into sXT, after the barrier below.
    cp_async_wait<1>();
    int r = 0;
    stage_ktqv([&](uint16_t* st, const uint16_t* src, auto, int cols, int64_t lds, int ldst) {
      if (r++ == 2) unstage_bf_rows(sV, V4, st, ldst, T, cols, bf_rows_chunk(st, src, cols, lds, ldst));
    });
  } else {
    if constexpr (kPaged) load_bf_rows_at<kMma>(sKt, lk, PagedRows{pl, base}, T, dk, int64_t(a.Hk) * dk, K4);
    else load_bf_rows<kMma>(sKt, lk + int64_t(base) * a.Hk * dk, T, dk, int64_t(a.Hk) * dk, K4);
    load_bf_rows<kMma>(sQ, a.q + (r0 * a.Hk + kh) * dk, T, dk, int64_t(a.Hk) * dk, K4);
    load_bf_rows<kMma>(sV, a.v + (r0 * a.Hv + h) * dv + c0, T, cw, int64_t(a.Hv) * dv, V4);
    for (int t = threadIdx.x; t < T; t += blockDim.x) sBeta[t] = a.beta[(r0 + t) * a.Hv + h];
    for (int i = threadIdx.x; i < red; i += blockDim.x) sRed[i] = 0.0f;
  }
  auto log_in = [&] {  // the log in shared memory for every thread, G_s summed
    cp_async_wait<0>();
    __syncthreads();
    if (w == 0) warp_prefix_sum(sG, n_log, lane);
    __syncthreads();
  };
  auto key = [&](int s, int i) {
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(sKb)[s * 2 * KB + i]);
  };
  if (f > 0) {  // block-uniform
    log_in();
    for (int s = threadIdx.x; s < f; s += blockDim.x) sF[s] = expf(sG[f - 1] - sG[s]);
    // Each row's coefficients, zero past f to a multiple of 4. One token's
    // kernel only: a verify's (126 registers, 4 blocks an SM) measured
    // slower with them. sKF is 8-byte aligned: dk·kQ is even.
    if constexpr (kFoldRows) {
      __syncthreads();
      const int f4 = (f + 3) & ~3;
      for (int i = threadIdx.x; i < dk; i += blockDim.x)
        for (int s = 0; s < f4; ++s) sKF[i * F4 + s] = s < f ? sF[s] * key(s, i) : 0.0f;
    }
  }
  __syncthreads();
  if constexpr (kQ > 0) {
    for (int i = threadIdx.x; i < ((dk + 15) & ~15) * kQ; i += blockDim.x) {
      const int row = i / kQ, q = i % kQ;
      if constexpr (kStage) {
        const uint16_t* st = reinterpret_cast<const uint16_t*>(shm + L.St);  // (T, SK) k, then (T, SK) q
        sXT[i] = row >= dk ? 0.0f : q < T ? bf(st, q * SK + row) : q >= kT && q < kT + T ? bf(st, (T + q - kT) * SK + row) : 0.0f;
      } else {
        sXT[i] = row >= dk ? 0.0f : q < T ? sKt[q * K4 + row] : q >= kT && q < kT + T ? sQ[(q - kT) * K4 + row] : 0.0f;
      }
    }
    __syncthreads();
  }
  float acc[kQ > 0 && !kMma ? kQ : 1][TileT::kColChunks][TileT::kVec] = {};
  float d[2][4] = {};  // kMma: the sums' mma tiles (GdnMmaTile::outputs)

  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.Hv + h) * dk * dv + c0 : nullptr;
  const float fold_decay = f > 0 ? expf(sG[f - 1]) : 0.0f;
  for (int p0 = 0; p0 < dk; p0 += pass_rows) {
    const int rows = min(pass_rows, dk - p0);
    StateT nxt;
    if (p0 + pass_rows < dk) {
      load_pass(nxt, p0 + pass_rows);
      prefetch_pass(p0 + (ahead + 1) * pass_rows);
    }
    if constexpr (kMma) {
      cur.outputs(d, sXT, p0, lane);
      if (f > 0) {  // block-uniform
        cur.scale(fold_decay);
        cur.fold(sU, V4, sF, f, key, p0, dk, w, lane);
        cur.store(Sf + int64_t(p0) * dv, rows, dv, w, lane);
      }
    } else {
      // This pass's rows of S_cᵀx for the 2T vectors x, into this thread's partials.
      if constexpr (kQ > 0) {
#pragma unroll
        for (int r = 0; r < TileT::kRows; ++r) {
          // Rows past dk read row dk − 1: their state values are zeros.
          const float* xr = sXT + min(p0 + TileT::row(w, nw, r), dk - 1) * kQ;
          float x[kQ];
#pragma unroll
          for (int q = 0; q < kQ; q += 2) {
            const float2 v = *reinterpret_cast<const float2*>(xr + q);
            x[q] = v.x, x[q + 1] = v.y;
          }
#pragma unroll
          for (int q = 0; q < kQ; ++q)
#pragma unroll
            for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
              for (int e = 0; e < TileT::kVec; ++e) acc[q][j][e] += cur.v[r][j][e] * x[q];
        }
      }
      for (int q = 0; q < (kQ > 0 ? 0 : 2 * T); ++q) {
        const float* x = q < T ? sKt + q * K4 : sQ + (q - T) * K4;
        float part[TileT::kColChunks][TileT::kVec] = {};
#pragma unroll
        for (int r = 0; r < TileT::kRows; ++r) {
          const int i = TileT::row(w, nw, r);
          const float xi = i < rows ? x[p0 + i] : 0.0f;
#pragma unroll
          for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
            for (int e = 0; e < TileT::kVec; ++e) part[j][e] += cur.v[r][j][e] * xi;
        }
        float* red = sRed + (q * nw + w) * V4;
#pragma unroll
        for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
          for (int e = 0; e < TileT::kVec; ++e)
            if (TileT::col(lane, j, e) < cw) red[TileT::col(lane, j, e)] += part[j][e];
      }
      if (f > 0) {  // block-uniform
#pragma unroll
        for (int r = 0; r < TileT::kRows; ++r)
#pragma unroll
          for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
            for (int e = 0; e < TileT::kVec; ++e) cur.v[r][j][e] *= fold_decay;
        for (int s0 = 0; kFoldRows && s0 < f; s0 += 2) {  // pairs: the kernel stays in 64 registers
          float c[TileT::kRows][2];
#pragma unroll
          for (int r = 0; r < TileT::kRows; ++r) {
            const int i = min(TileT::row(w, nw, r), rows - 1);  // rows past the pass are never stored
            const float2 x = *reinterpret_cast<const float2*>(sKF + (p0 + i) * F4 + s0);
            c[r][0] = x.x, c[r][1] = x.y;
          }
          // No bound per entry (as the Mamba2 fold's: checks and zeroing
          // outnumbered the products there): past f the coefficients are
          // zeros and the entry reads u_{f−1}, finite; lanes past cw read a
          // live column, never stored. H200: the fold step 106 → 100 µs at
          // batch 64 (docs/perf), in an instance of its own (kFold).
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            float Uc[TileT::kColChunks][TileT::kVec];
            TileT::columns_unmasked(sU + min(s0 + k, f - 1) * V4, V4, lane, Uc);
#pragma unroll
            for (int r = 0; r < TileT::kRows; ++r)
#pragma unroll
              for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
                for (int e = 0; e < TileT::kVec; ++e) cur.v[r][j][e] += c[r][k] * Uc[j][e];
          }
        }
        for (int s = 0; !kFoldRows && s < f; ++s) {
          float Uc[TileT::kColChunks][TileT::kVec];
          TileT::columns(sU + s * V4, cw, lane, Uc);
#pragma unroll
          for (int r = 0; r < TileT::kRows; ++r) {
            const int i = min(TileT::row(w, nw, r), rows - 1);  // rows past the pass are never stored
            const float c = sF[s] * key(s, p0 + i);
#pragma unroll
            for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
              for (int e = 0; e < TileT::kVec; ++e) cur.v[r][j][e] += c * Uc[j][e];
          }
        }
        cur.store(Sf + int64_t(p0) * dv, rows, cw, dv, w, nw, lane);
      }
    }
    cur = nxt;
  }
  if constexpr (kMma) {
    gdn_mma_write_sums(d, sSx, V4, kQ, w, lane);
  } else if constexpr (kQ > 0) {
#pragma unroll
    for (int q = 0; q < kQ; ++q) {
      if (q % kT >= T) continue;  // a vector not in use
      float* rq = sRed + (q * nw + w) * V4;
#pragma unroll
      for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
        for (int e = 0; e < TileT::kVec; ++e)
          if (TileT::col(lane, j, e) < cw) rq[TileT::col(lane, j, e)] = acc[q][j][e];
    }
  }
  if (f == 0) log_in();  // block-uniform
  // Key dots k_s·k_t and k_s·q_t with their decays e^{G_t−G_s} (the
  // outputs' loop below then needs no exponentials). With kQ > 0 a lane
  // per entry s and a warp per quarter of the rows, each row's 2T vector
  // entries one broadcast load (H200: a warp per (token, entry) pair with
  // two warp sums each was about a third of a verify block's instructions);
  // with kMma on tensor cores (gdn_mma_key_dots).
  if constexpr (kQ > 0) {
    if constexpr (kMma) {
      gdn_mma_key_dots(sPart + w * kQ * W4, W4, sXT, n_log, dk, key, w, nw, lane);
    } else {
      for (int s = lane; s < n_log; s += 32) {
        float part[kQ] = {};
        for (int i = w; i < dk; i += nw) {
          const float ks = key(s, i);
#pragma unroll
          for (int q = 0; q < kQ; q += 2) {
            const float2 x = *reinterpret_cast<const float2*>(sXT + i * kQ + q);
            part[q] += ks * x.x, part[q + 1] += ks * x.y;
          }
        }
#pragma unroll
        for (int q = 0; q < kQ; ++q) sPart[(w * kQ + q) * W4 + s] = part[q];
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kT * n_log; i += blockDim.x) {
      const int t = kT == 1 ? 0 : i / n_log, s = kT == 1 ? i : i % n_log;  // one token: no division
      float dkk = 0.0f, dkq = 0.0f;  // zeros for the outputs' loop where t ≥ T or s > base + t
      if (t < T && s <= base + t) {
        for (int k = 0; k < nw; ++k) dkk += sPart[(k * kQ + t) * W4 + s], dkq += sPart[(k * kQ + kT + t) * W4 + s];
        const float e = expf(sG[base + t] - sG[s]);  // 1 at s = base + t
        dkk *= e, dkq *= e;
      }
      sCo[s * kQ + t] = dkk, sCo[s * kQ + kT + t] = dkq;
    }
  }
  for (int kx = w; kQ == 0 && kx < T * n_log; kx += nw) {
    const int t = kx / n_log, s = kx % n_log;
    if (s > base + t) continue;  // warp-uniform
    float dkk = 0.0f, dkq = 0.0f;
    for (int i = lane; i < dk; i += 32) {
      const float ks = key(s, i);
      dkk += ks * sKt[t * K4 + i];
      dkq += ks * sQ[t * K4 + i];
    }
    dkk = warp_sum(dkk), dkq = warp_sum(dkq);
    const float e = expf(sG[base + t] - sG[s]);  // 1 at s = base + t
    if (lane == 0) sKK[t * W4 + s] = dkk * e, sKQ[t * W4 + s] = dkq * e;
  }
  for (int t = threadIdx.x; t < T; t += blockDim.x) sEG[t] = expf(sG[base + t]);
  __syncthreads();
  // A whole slice divides by a constant (a runtime divisor's sequence was
  // ~20 instructions an element).
  const bool whole = cw == TileT::kCols;
  for (int i = threadIdx.x; !kMma && i < (kQ > 0 ? kQ : 2 * T) * cw; i += blockDim.x) {
    const int q = whole ? i / TileT::kCols : i / cw, c = whole ? i % TileT::kCols : i % cw;
    float sum = 0.0f;
    for (int k = 0; k < nw; ++k) sum += sRed[(q * nw + k) * V4 + c];
    sSx[q * V4 + c] = sum;
  }
  __syncthreads();

  if constexpr (kQ > 0) {
    // One thread per column. The older entries first, for every token at
    // once: each u_s[c] read once, into two sets of sums (independent
    // chains; H200, ncu: one token's chain at a time over the entries was
    // a quarter of a verify block's stalls). Then the new tokens in order,
    // their u in registers.
    for (int c = threadIdx.x; c < cw; c += blockDim.x) {
      float part[2][kQ] = {};
      auto add = [&](int k, int s) {
        const float us = sU[s * V4 + c];
        const float* co = sCo + s * kQ;
#pragma unroll
        for (int q = 0; q < kQ; q += 2) {
          const float2 x = *reinterpret_cast<const float2*>(co + q);
          part[k][q] += x.x * us, part[k][q + 1] += x.y * us;
        }
      };
      int s = 0;
      for (; s + 1 < base; s += 2) add(0, s), add(1, s + 1);
      if (s < base) add(0, s);
      float un[kT];
#pragma unroll
      for (int t = 0; t < kT; ++t) {
        if (t >= T) break;
        const int tt = base + t;
        float mem = part[0][t] + part[1][t] + sEG[t] * sSx[t * V4 + c];
        float out = part[0][kT + t] + part[1][kT + t] + sEG[t] * sSx[(kT + t) * V4 + c];
#pragma unroll
        for (int t2 = 0; t2 < t; ++t2) {
          mem += sCo[(base + t2) * kQ + t] * un[t2];
          out += sCo[(base + t2) * kQ + kT + t] * un[t2];
        }
        const float u = (sV[t * V4 + c] - mem) * sBeta[t];
        un[t] = u;
        if constexpr (kPaged) a.log_u[(pl.row(tt) * a.Hv + h) * dv + c0 + c] = u;
        else a.log_u[((int64_t(b) * W + tt) * a.Hv + h) * dv + c0 + c] = u;
        put_bf(a.o, ((r0 + t) * a.Hv + h) * dv + c0 + c, out + sCo[tt * kQ + kT + t] * u);
      }
    }
  } else {
    // The new tokens in order, one thread per column: u_t is written and
    // later read by the same thread.
    for (int c = threadIdx.x; c < cw; c += blockDim.x) {
      for (int t = 0; t < T; ++t) {
        const int tt = base + t;
        float mem = sEG[t] * sSx[t * V4 + c], out = sEG[t] * sSx[(T + t) * V4 + c];
        for (int s = 0; s < tt; ++s) {
          const float us = sU[s * V4 + c];
          mem += sKK[t * W4 + s] * us;
          out += sKQ[t * W4 + s] * us;
        }
        const float u = (sV[t * V4 + c] - mem) * sBeta[t];
        sU[tt * V4 + c] = u;
        if constexpr (kPaged) a.log_u[(pl.row(tt) * a.Hv + h) * dv + c0 + c] = u;
        else a.log_u[((int64_t(b) * W + tt) * a.Hv + h) * dv + c0 + c] = u;
        put_bf(a.o, ((r0 + t) * a.Hv + h) * dv + c0 + c, out + sKQ[t * W4 + tt] * u);
      }
    }
  }
}

}  // namespace

cudaError_t gdn_replay_cuda(const GdnDecodeArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  if (!gdn_has_common_arrays(a) || !log_pages_valid(a.pages)) return cudaErrorInvalidValue;
  if (a.pages.page != nullptr && a.W == 0) {  // paged: W only bounds the log, 0 the most a kernel takes
    GdnDecodeArgs b = a;
    b.W = kGdnMaxW;
    return gdn_replay_cuda(b, stream);
  }
  if (a.batch < 0 || a.Hk <= 0 || a.Hv % a.Hk != 0 || a.dk < 1 || a.dv < 1 || a.T < 1 || a.T > kGdnMaxT || a.W < a.T ||
      a.W > kGdnMaxW || a.max_fold < 0 || a.max_fold > a.W || (a.fold != nullptr && a.fold_slot == nullptr) ||
      (a.tile_rows != 0 && a.tile_rows != 4 && a.tile_rows != 8) ||
      (a.slice_cols != 0 && a.slice_cols != 64 && a.slice_cols != 128 && a.slice_cols != 256) || a.fold_rows < -1 ||
      a.fold_rows > 1 || a.mma < -1 || a.mma > 1 || a.l2_ahead < -1 || a.l2_ahead > 4 || a.n_log == nullptr ||
      a.log_k == nullptr || a.log_u == nullptr || a.log_g == nullptr)
    return cudaErrorInvalidValue;
  if (a.group_start != nullptr) {
    if (a.exact || a.row != nullptr || a.variant != 0 || a.scratch == nullptr || a.n_groups < 1 || a.max_group < 1 ||
        a.max_group * a.T > kGdnMaxGroupRows || a.group_split < 0 || a.group_split > 2)
      return cudaErrorInvalidValue;
    return gdn_replay_group(a, stream);
  }
  if (a.seq != nullptr) return cudaErrorInvalidValue;  // a decode order is for fork groups
  if (a.exact) return gdn_replay_exact(a, stream);
  // Every refusal before the device is asked anything.
  const int slice = gdn_slice_cols(a.dv, a.slice_cols != 0 ? a.slice_cols : kGdnReplaySlice);
  const bool sliced_fits = a.dk <= 512, streaming_fits = slice > 0;
  if (a.variant < 0 || a.variant > 4 || (a.variant == 1 && !streaming_fits) || (a.variant == 2 && !sliced_fits) ||
      (!sliced_fits && !streaming_fits) || (a.variant >= 3 && a.dk > kGdnStepWarpsMaxDk))
    return cudaErrorInvalidValue;
  // Variant 3: the register-resident warps' sequential recurrence, exact
  // replay's kernel; 4: those warps with the older entries in the dual
  // form on tensor cores (gdn_step_warps.cu); dk ≤ kGdnStepWarpsMaxDk.
  if (a.variant == 3) return gdn_replay_exact(a, stream);
  if (a.variant == 4) return gdn_replay_warps(a, stream);
  int sms = 0;
  if (cudaError_t e = device_sms(&sms); e != cudaSuccess) return e;
  // And the launcher's choice where those blocks are one wave (at
  // Qwen3-Next shapes batch ≤ 6 on the H200): the older entries staged and
  // applied before the PDL wait, the state in registers with no passes,
  // the entries in the dual form on tensor cores. H200 (2026-12-03,
  // 50211f1 and f5da664): one token at batch 1–6 4.0–6.4 µs against the
  // sequential recurrence's 4.5–7.0 there and the column slices' or
  // streaming blocks' 5.9–9.8, a verify 4.4–9.1 against 4.8–9.8 and
  // 9.9–11.5; at batch 8 (two waves) 10.8 against the streaming 10.2 and
  // 15.0 against 11.8. Swept again at fce6dd6, each launch on its own
  // slots: still the fastest variant at batch 1–6 (4.3–8.0 µs one token),
  // yet slower than the standard step at 1–4 (docs/perf).
  if (a.variant == 0 && a.dk <= kGdnStepWarpsMaxDk && gdn_step_warps_one_wave(a, sms))
    return gdn_replay_warps(a, stream);
  // One token's step over at most half as many (head, sequence) blocks as
  // SMs, or values wider than a streaming tile: the column-sliced variant.
  // H200 at Qwen3-Next shapes (2026-12-03, 15b63c3): one token at batch
  // 1–2 5.9 / 6.8 µs sliced against 8.4 / 8.6 streaming, at batch 3–4
  // 11.8 / 12.9 against 8.8 / 8.9; a verify streams faster at every batch
  // (9.9 against 10.7 µs at batch 1, 10.3 against 25.5 at 4).
  const bool small = a.T == 1 && 2 * int64_t(a.batch) * a.Hv <= sms;
  if (a.variant == 2 || (a.variant == 0 && sliced_fits && (small || !streaming_fits)))
    return gdn_replay_sliced(a, stream);
  // Rows per warp per pass: 4 (H200, Qwen3-Next shapes: docs/perf; a
  // verify took 8 until its partials moved to registers, and 4 rows are
  // now 16% faster there: more blocks fit an SM).
  const int tile_rows = a.tile_rows != 0 ? a.tile_rows : 4;
  auto launch = [&](auto tag) {
    using TileT = decltype(tag);
    const int nw = kGdnWarps;
    // Register partials for the launcher's 128-column slices (T ≤ 4); of
    // those with 4 rows a pass, a verify and a fold on tensor cores.
    const bool slice128 = TileT::kVec == 4 && TileT::kColChunks == 1;
    const bool mma = slice128 && TileT::kRows == 4 && a.T <= 4 &&
                     (a.mma > 0 || (a.mma == 0 && a.T > 1));
    const int kq = mma ? GdnMmaTile::kVectors : slice128 ? (a.T == 1 ? 2 : a.T <= 4 ? 8 : 0) : 0;
    // The fold's row coefficients where the blocks are several waves (≥ 4 an SM).
    const int64_t blocks = int64_t((a.dv + TileT::kCols - 1) / TileT::kCols) * a.Hv * a.batch;
    const bool folds = a.fold != nullptr;
    const bool fold_rows = folds && kq == 2 && (a.fold_rows > 0 || (a.fold_rows == 0 && blocks >= 4 * int64_t(sms)));
    const size_t shm =
        sizeof(float) * GdnReplayShm(a.W, a.T, a.dk, std::min(TileT::kCols, a.dv), nw, kq, mma, fold_rows ? a.max_fold : 0,
                                     mma && !folds).total;
    auto go = [&](auto kernel) {
      if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
      const dim3 grid((a.dv + TileT::kCols - 1) / TileT::kCols, a.Hv, a.batch);
      launch_kernel(kernel, grid, 32 * nw, shm, stream, a);
      return cudaGetLastError();
    };
    auto pick = [&](auto paged) {
      constexpr bool kP = decltype(paged)::value;
      if constexpr (TileT::kVec == 4 && TileT::kColChunks == 1) {
        if constexpr (TileT::kRows == 4) {
          constexpr int kV = GdnMmaTile::kVectors;
          if (mma) return folds ? go(gdn_replay_kernel<TileT, kV, false, true, true, kP>)
                                : go(gdn_replay_kernel<TileT, kV, false, true, false, kP>);
        }
        if (kq == 2)
          return !folds     ? go(gdn_replay_kernel<TileT, 2, false, false, false, kP>)
                 : fold_rows ? go(gdn_replay_kernel<TileT, 2, true, false, true, kP>)
                             : go(gdn_replay_kernel<TileT, 2, false, false, true, kP>);
        if (kq == 8) return go(gdn_replay_kernel<TileT, 8, false, false, true, kP>);
      }
      return go(gdn_replay_kernel<TileT, 0, false, false, true, kP>);
    };
    return a.pages.page != nullptr ? pick(std::true_type{}) : pick(std::false_type{});
  };
  return tile_rows == 8 ? with_gdn_slice_tile<8>(a.dv, slice, launch) : with_gdn_slice_tile<4>(a.dv, slice, launch);
}

}  // namespace replayssm::ops::cuda
