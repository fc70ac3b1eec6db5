// Gated DeltaNet replay decode for fork groups (GdnDecodeArgs::group_start;
// see gdn_decode.h): the sequences of a group — beams, best-of-n samples,
// the children of one parent since its last fold — read one checkpoint,
// each with its own log. Dual form, per member, with G_s = Σ_{r≤s} g_r
// from the checkpoint:
//   mem_t = e^{G_t}·S_cᵀk_t + Σ_{s<t} e^{G_t−G_s}(k_s·k_t)·u_s ;  u_t = β_t(v_t − mem_t)
//   o_t   = e^{G_t}·S_cᵀq_t + Σ_{s≤t} e^{G_t−G_s}(k_s·q_t)·u_s
//   fold f (a group of one only): S ← e^{G_{f−1}}·S_c + Σ_{s<f} e^{G_{f−1}−G_s}·k_s·u_sᵀ
// The checkpoint enters only through the sums S_cᵀk_t, S_cᵀq_t, so two
// kernels (as Mamba2's split, mamba2_replay_log.cu):
//   sums — one block per (slice of value columns, value head, group)
//          streams its columns of the checkpoint once for every member,
//          the 2·m·T sums on tensor cores, into scratch (and a group of
//          one's fold);
//   log  — one block per (key head, member), its value heads side by
//          side, takes its log by cp.async while the sums are made, then
//          its key dots (once for those heads), u and o.
// Decoding each member alone reads the checkpoint once per member, and
// holds a member's whole log part in the block that streams it. Measured
// (H200, Qwen3-Next shapes, 2026-12-02, bb6c7ba): beams of 8 at batch 64
// 1.18× each beam alone, at 256 1.33× — whose repeated reads of one
// checkpoint L2 serves; beams of 4 at 64 1.16×; beams of 2 at 64 0.95×.
#include <type_traits>

#include "ops/cuda/fork_group.cuh"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/gdn_token.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mma_tf32.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

// The sums kernel: 4 warps a block, each 16 columns (the product's M)
// on tensor cores (mma_tf32.cuh: the state split into TF32 hi + lo, the
// bf16 vectors exact), over all the rows (kSplit = 1: 64 columns a block)
// or half of them (kSplit = 2: 32 columns, the halves' sums meeting in
// shared memory) — the launcher's choice by blocks an SM. H200, beams of 8
// at batch 64 (8 groups: 512 blocks of 64 columns, 4 warps a scheduler),
// a step of both kernels: 23.2 µs with whole rows, 20.9 with halves;
// beams of 4 (1,024 blocks) 23.9 against 26.0, and beams of 8 at batch
// 256 69.9 against 75.2 — there the halves' registers leave no room for
// the log kernel's blocks to start. ncu puts this kernel at 18.6–19.3 µs
// in every shape tried (16 MB need 5): 64 columns with 16 or 32 rows in
// flight a warp, 32 columns with half the rows; not yet explained. The
// same pass on FMAs, the vectors from shared memory, 21.6 µs; 8 warps of
// 32 columns 30.7.
constexpr int kWarps = 4;
template <int kSplit>
constexpr int kSumsCols = 16 * kWarps / kSplit;
// k-steps (8 rows each) a warp has in flight per round.
constexpr int kSteps = 4;
// The log kernel: 4 warps a block.
constexpr int kLogWarps = 4;

// The sums kernel's shared memory in floats, every array a multiple of 4
// floats from the start (16-byte aligned): the kernel's pointers and the
// launcher's size from one place. nv: the vectors (kV); f4: fold entries
// rounded up to 4 (0: the launch folds nothing).
struct SumsShm {
  int X, Red, KF, UF, G, total;
  // cols: the block's columns (kSumsCols); split: 2 with halves' sums to meet.
  // The vectors' row pitch: B fragments' four rows a load land in distinct
  // banks (kV of 16 or 32 would put two or four of them in one).
  __host__ __device__ static constexpr int pitch(int nv) { return nv == 8 ? 8 : nv + 8; }
  __host__ __device__ SumsShm(int nv, int dk, int W, int f4, int cols, int split) {
    int at = 0;
    auto take = [&](int n) { const int o = at; at += (n + 3) & ~3; return o; };
    X = take(((dk + 7) & ~7) * pitch(nv)), Red = take(split == 2 ? cols / 16 * nv / 8 * 4 * 32 : 0);
    KF = take(f4 * dk), UF = take(f4 * cols), G = take(f4 > 0 ? W : 0);
    total = at;
  }
};

// Scratch row of sequence b's token t: kind 0 S_cᵀk_t, 1 S_cᵀq_t, a
// (Hv, dv) row each (gdn_replay_scratch_floats).
__device__ __forceinline__ int64_t sums_row(const GdnDecodeArgs& a, int b, int t, int kind) {
  return ((int64_t(b) * a.T + t) * 2 + kind) * a.Hv * a.dv;
}

// kV: vectors of the sums (≥ 2·max_group·T; 8, 16 or 32: n-tiles of 8).
// With kColWarps = 4 / kSplit warps across the block's slice, warp w takes
// columns [16·(w % kColWarps), +16) as the product's M = 16 (row g of a
// fragment is column 2g, row g + 8 column 2g + 1: one 8-byte load), part
// w / kColWarps of the state's rows as K, the vectors as N:
//   Y[c][v] = Σ_i S[i][c]·X[i][v].
// kFold: the fold's code, for launches that may fold (a.fold set): a
// group of one folds here, its rows as they stream.
// Blocks an SM the compiler must fit, for the halves without the fold's
// code: 8 (beams of 8 at batch 64 are then 1,024 blocks: one wave), 7 for
// kV = 32 (8 spills); none elsewhere. kPaged: the log's rows through the
// block table (GdnDecodeArgs::pages).
template <int kV, bool kFold, int kSplit>
constexpr int kSumsBlocks = kFold || kSplit == 1 ? 0 : kV == 32 ? 7 : 8;
template <int kV, bool kFold, int kSplit, bool kPaged>
__global__ void __launch_bounds__(32 * kWarps, (kSumsBlocks<kV, kFold, kSplit>))
    gdn_group_sums_kernel(GdnDecodeArgs a) {
  static_assert(kV % 8 == 0 && (kSplit == 1 || kSplit == 2));
  constexpr int kN = kV / 8;  // n-tiles
  constexpr int kCols = kSumsCols<kSplit>, kColWarps = kWarps / kSplit;
  const int h = blockIdx.y, kh = h / (a.Hv / a.Hk);
  const ReplayGroup fg = replay_group(a, blockIdx.z);
  const int first = fg.first, m = fg.members, b0 = fg.b;
  if (m <= 0) return pdl_leave();  // an empty group (block-uniform)
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
  const int dk = a.dk, dv = a.dv, T = a.T, W = a.W, T2 = 2 * T, steps = (dk + 7) / 8;
  const int c0 = blockIdx.x * kCols, cw = min(kCols, dv - c0);
  // This warp's k-steps: all of them, or the first or the second half.
  const int part = (steps + kSplit - 1) / kSplit, k_begin = (w / kColWarps) * part, k_end = min(steps, k_begin + part);
  const int f = kFold && fg.alone ? gdn_log_span<true>(a, b0).f : 0;  // fork_group.cuh
  const PagedLog pl0 = paged_log_if<kPaged>(a.pages, b0);  // the folding sequence's log rows, kPaged
  const int f4 = (kFold && a.fold != nullptr ? a.max_fold + 3 : 0) & ~3;
  constexpr int XP = SumsShm::pitch(kV);
  const SumsShm L(kV, dk, W, f4, kCols, kSplit);
  extern __shared__ float shm[];
  float* sX = shm + L.X;      // (dk rounded up to 8, XP) the vectors by row, zero past dk and the members:
                              // member j's k_t at j·2T + t, q_t at j·2T + T + t
  float* sRed = shm + L.Red;  // (kColWarps, kN·4, 32) with kSplit = 2: the second half's sums
  float* sKF = shm + L.KF;    // (dk, f4) a fold's row coefficients e^{G_{f−1}−G_s}·k_s[i]
  float* sUF = shm + L.UF;    // (f4, kCols) the folded entries' u_s, the slice's columns
  float* sG = shm + L.G;      // (W) G_s of a folding sequence
  auto key_row = [&](int b, int s) { return a.log_k + ((int64_t(b) * W + s) * a.Hk + kh) * dk; };

  // This thread's two columns (fragment rows g and g + 8) and, per k-step,
  // rows t4 and t4 + 4. The state's first round goes out as soon as the wait ends.
  const int col = 16 * (w % kColWarps) + 2 * g;  // in the slice
  const bool pair = dv % 2 == 0;                 // 8-byte loads and stores (c0 and col are even)
  const float* S = a.state + (int64_t(a.slot[b0]) * a.Hv + h) * dk * dv + c0 + col;
  auto load_row = [&](float (&v)[2], int i) {
    if (i >= dk || col >= cw) {
      v[0] = v[1] = 0.0f;
    } else if (pair) {
      const float2 x = *reinterpret_cast<const float2*>(S + int64_t(i) * dv);
      v[0] = x.x, v[1] = x.y;
    } else {
      v[0] = S[int64_t(i) * dv], v[1] = col + 1 < cw ? S[int64_t(i) * dv + 1] : 0.0f;
    }
  };
  auto load_round = [&](float (&r)[kSteps][2][2], int k0) {  // [step][row t4, t4 + 4][column]
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      const int i = 8 * (k0 + k) + t4;
      if (k0 + k < k_end) load_row(r[k][0], i), load_row(r[k][1], i + 4);
    }
  };
  // The members' sequences and new tokens' first entries, once: the
  // vectors' loads below then depend on nothing but these (H200: loads
  // chained behind the decode order and the log lengths per element took
  // the step to 40 µs where its state needs 5).
  __shared__ int sSeq[kV / 2], sBase[kV / 2];
  // kPaged: member j's new keys' log rows, token r at j·T + r (m·T ≤ kV / 2).
  __shared__ int64_t sKeyRow[kPaged ? kV / 2 : 1];
  if (threadIdx.x < m) {
    const int b = replay_seq(a, first + threadIdx.x);
    sSeq[threadIdx.x] = b, sBase[threadIdx.x] = gdn_log_span<true, false>(a, b).base;
    if constexpr (kPaged) {
      const PagedLog pl = paged_log(a.pages, b);
      for (int r = 0; r < T; ++r) sKeyRow[threadIdx.x * T + r] = pl.row(sBase[threadIdx.x] + r);
    }
  }
  // Zeros past dk (a state row of 0 against garbage would be NaN) and past the members.
  for (int x = threadIdx.x; x < 8 * steps * XP; x += blockDim.x) sX[x] = 0.0f;
  // Everything read so far is the plan (the group, the decode order, the
  // slots, the log lengths and folds), which no kernel writes (launch.cuh):
  // those chained loads run while the kernel before finishes (H200: beams
  // of 8 at batch 64 5% faster).
  pdl_begin();
  float cur[kSteps][2][2];
  load_round(cur, k_begin);
  if (f > 0 && w == 0) {  // (sG is the fold's own: before the barrier)
    if constexpr (kPaged)
      for (int s = lane; s < f; s += 32) sG[s] = a.log_g[pl0.row(s) * a.Hv + h];
    else
      for (int s = lane; s < f; s += 32) sG[s] = a.log_g[(int64_t(b0) * W + s) * a.Hv + h];
    __syncwarp();
    warp_prefix_sum(sG, f, lane);
  }
  __syncthreads();
  // The vectors by row, 8 entries a load where the rows allow; then a
  // fold's coefficients the same way.
  auto vec_row = [&](int v) {
    const int j = v / T2, r = v - j * T2, b = sSeq[j];
    if constexpr (kPaged)
      return r < T ? a.log_k + (sKeyRow[j * T + r] * a.Hk + kh) * dk : a.q + (int64_t(b * T + r - T) * a.Hk + kh) * dk;
    else
      return r < T ? key_row(b, sBase[j] + r) : a.q + (int64_t(b * T + r - T) * a.Hk + kh) * dk;
  };
  const bool by8 = dk % 8 == 0 && reinterpret_cast<uintptr_t>(a.log_k) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
  auto rows_to = [&](int n, auto&& src_of, auto&& put) {  // put(i, row, value) for n rows of dk
    if (by8) {
      const int chunks = dk / 8;
      for (int x = threadIdx.x; x < n * chunks; x += blockDim.x) {
        const int r = x / chunks, i0 = 8 * (x - r * chunks);
        const uint4 p = *reinterpret_cast<const uint4*>(src_of(r) + i0);
        const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&p);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 v2 = __bfloat1622float2(h2[e]);
          put(i0 + 2 * e, r, v2.x), put(i0 + 2 * e + 1, r, v2.y);
        }
      }
    } else {
      for (int x = threadIdx.x; x < n * dk; x += blockDim.x) put(x % dk, x / dk, bf(src_of(x / dk), x % dk));
    }
  };
  rows_to(m * T2, vec_row, [&](int i, int v, float x) { sX[i * XP + v] = x; });
  if (f > 0) {  // block-uniform: the fold's coefficients and its entries' u (entries past f never read)
    if constexpr (kPaged)
      rows_to(f, [&](int s) { return a.log_k + (pl0.row(s) * a.Hk + kh) * dk; },
              [&](int i, int s, float k) { sKF[i * f4 + s] = expf(sG[f - 1] - sG[s]) * k; });
    else
      rows_to(f, [&](int s) { return key_row(b0, s); },
              [&](int i, int s, float k) { sKF[i * f4 + s] = expf(sG[f - 1] - sG[s]) * k; });
    for (int x = threadIdx.x; x < f4 * kCols; x += blockDim.x) {
      const int s = x / kCols, c = x % kCols;
      if constexpr (kPaged)
        sUF[x] = s < f && c < cw ? a.log_u[(pl0.row(s) * a.Hv + h) * dv + c0 + c] : 0.0f;
      else
        sUF[x] = s < f && c < cw ? a.log_u[((int64_t(b0) * W + s) * a.Hv + h) * dv + c0 + c] : 0.0f;
    }
  }
  __syncthreads();

  // The pass: the sums on tensor cores, a fold's rows by FMAs as they stream.
  float d[kN][4] = {};
  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b0]) * a.Hv + h) * dk * dv + c0 + col : nullptr;
  const float fold_decay = f > 0 ? expf(sG[f - 1]) : 0.0f;
  for (int k0 = k_begin; k0 < k_end; k0 += kSteps) {
    float nxt[kSteps][2][2];
    if (k0 + kSteps < k_end) load_round(nxt, k0 + kSteps);
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      if (k0 + k >= k_end) break;  // warp-uniform
      const int i0 = 8 * (k0 + k);
      // A: a0 (col 2g, row t4), a1 (col 2g + 1, row t4), a2, a3 the same at row t4 + 4.
      const float* x0 = sX + (i0 + t4) * XP + g;
      const float* x1 = sX + (i0 + t4 + 4) * XP + g;
#pragma unroll
      for (int n = 0; n < kN; ++n)
        mma_f32_split(d[n], cur[k][0][0], cur[k][0][1], cur[k][1][0], cur[k][1][1], x0[8 * n], x1[8 * n]);
      if (kFold && f > 0) {  // block-uniform
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = i0 + t4 + 4 * r;
          if (i >= dk) continue;
          float v[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            v[e] = cur[k][r][e] * fold_decay;
            for (int s = 0; s < f; ++s) v[e] += sKF[i * f4 + s] * sUF[s * kCols + col + e];
          }
          if (col < cw) Sf[int64_t(i) * dv] = v[0];
          if (col + 1 < cw) Sf[int64_t(i) * dv + 1] = v[1];
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kSteps; ++k)
#pragma unroll
      for (int r = 0; r < 2; ++r) cur[k][r][0] = nxt[k][r][0], cur[k][r][1] = nxt[k][r][1];
  }

  // Halves: the second's sums through shared memory into the first's.
  if constexpr (kSplit == 2) {
    float* red = sRed + (w % kColWarps) * (kN * 4 * 32) + lane;
    if (w >= kColWarps) {
#pragma unroll
      for (int n = 0; n < kN; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[(4 * n + e) * 32] = d[n][e];
    }
    __syncthreads();
    if (w >= kColWarps) return;
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) d[n][e] += red[(4 * n + e) * 32];
  }
  // D: d0 (col 2g, vector 2t4), d1 (col 2g, 2t4 + 1), d2, d3 the same at
  // col 2g + 1: each vector's two columns side by side in its scratch row.
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int v = 8 * n + 2 * t4 + e, j = v / T2, r = v - j * T2;
      if (j >= m || col >= cw) continue;
      const int kind = r < T ? 0 : 1;
      float* dst = a.scratch + sums_row(a, sSeq[j], r - kind * T, kind) + int64_t(h) * dv + c0 + col;
      const float y0 = d[n][e], y1 = d[n][e + 2];
      if (pair) *reinterpret_cast<float2*>(dst) = make_float2(y0, y1);
      else {
        dst[0] = y0;
        if (col + 1 < cw) dst[1] = y1;
      }
    }
}

// The log kernel's shared memory in floats (as SumsShm): kb, vb: bf16 row
// pitches of the keys and queries (dk) and of the values (dv); V4: fp32
// row pitch of u and the sums; the per-value-head arrays rep times, nX
// floats (a multiple of 4) each; Co also holds the bare dots after them.
struct LogShm {
  int K, Q, Vb, U, Sx, G, Co, Beta, EG, total;
  int nV, nU, nSx, nG, nCo, nB;
  __host__ __device__ LogShm(int W, int T, int dk, int dv, int rep) {
    const int kb = (dk + 7) & ~7, vb = (dv + 7) & ~7, V4 = (dv + 3) & ~3, W4 = (W + 3) & ~3;
    auto r4 = [](int n) { return (n + 3) & ~3; };
    nV = r4(T * vb / 2), nU = W * V4, nSx = 2 * T * V4, nG = W4, nCo = r4(W4 * 2 * T), nB = r4(T);
    int at = 0;
    auto take = [&](int n) { const int o = at; at += r4(n); return o; };
    K = take(W * kb / 2), Q = take(T * kb / 2), Vb = take(rep * nV), U = take(rep * nU), Sx = take(rep * nSx);
    G = take(rep * nG), Co = take((rep + 1) * nCo), Beta = take(rep * nB), EG = take(rep * T), total = at;
  }
};

// One block per (key head, member j of group k): grid (Hk, max_group,
// groups), the key head's rep = Hv / Hk value heads side by side (its key
// dots serve them all). H200 (ncu): a block per value head was bound by
// the issue of each block's fixed work, 970 instructions a warp. kPaged:
// the log's rows through the block table (GdnDecodeArgs::pages).
template <bool kPaged>
__global__ void __launch_bounds__(32 * kLogWarps) gdn_group_log_kernel(GdnDecodeArgs a) {
  const int kh = blockIdx.x, j = blockIdx.y, rep = a.Hv / a.Hk, h0 = kh * rep;
  const ReplayGroup fg = replay_group(a, blockIdx.z);
  if (j >= fg.members) return pdl_leave();  // past the group's members (block-uniform)
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dk = a.dk, dv = a.dv, T = a.T, W = a.W, T2 = 2 * T;
  const int kb = (dk + 7) & ~7, vb = (dv + 7) & ~7, V4 = (dv + 3) & ~3;
  const int b = replay_seq(a, fg.first + j);
  const GdnLogSpan sp = gdn_log_span<true, false>(a, b);
  const int n_log = sp.n_log, base = sp.base;
  const LogShm L(W, T, dk, dv, rep);
  extern __shared__ float shm[];
  uint16_t* sK = reinterpret_cast<uint16_t*>(shm + L.K);    // (W, kb) bf16 k_s
  uint16_t* sQ = reinterpret_cast<uint16_t*>(shm + L.Q);    // (T, kb) bf16 q_t
  // Per value head hh of the block (0..rep−1), at hh × its size:
  uint16_t* sV = reinterpret_cast<uint16_t*>(shm + L.Vb);   // (T, vb) bf16 v_t
  float* sU = shm + L.U;      // (W, V4) u_s: the older entries copied, the new ones made here
  float* sSx = shm + L.Sx;    // (2T, V4) S_cᵀk_t at row 2t, S_cᵀq_t at 2t + 1 (the scratch's order)
  float* sG = shm + L.G;      // (W4) G_s
  float* sCo = shm + L.Co;    // (W4, 2T) e^{G_t−G_s}(k_s·k_t) at t, e^{G_t−G_s}(k_s·q_t) at T + t; 0 where unused
  float* sBeta = shm + L.Beta;  // (T)
  float* sEG = shm + L.EG;      // (T) e^{G_t}

  // The log and the new tokens' inputs (written by the kernels before the
  // sums kernel, which waited for them) arrive while the sums are made.
  const PagedLog pl = paged_log_if<kPaged>(a.pages, b);  // the log's rows, kPaged
  if constexpr (kPaged)
    copy_async_bf_rows_at(sK, a.log_k + int64_t(kh) * dk, PagedRows{pl, 0}, n_log, dk, int64_t(a.Hk) * dk, kb);
  else
    copy_async_bf_rows(sK, a.log_k + (int64_t(b) * W * a.Hk + kh) * dk, n_log, dk, int64_t(a.Hk) * dk, kb);
  copy_async_bf_rows(sQ, a.q + (int64_t(b) * T * a.Hk + kh) * dk, T, dk, int64_t(a.Hk) * dk, kb);
  for (int hh = 0; hh < rep; ++hh) {
    const int h = h0 + hh;
    copy_async_bf_rows(sV + hh * L.nV * 2, a.v + (int64_t(b) * T * a.Hv + h) * dv, T, dv, int64_t(a.Hv) * dv, vb);
    if constexpr (kPaged) {
      copy_async_rows_at(sU + hh * L.nU, a.log_u + int64_t(h) * dv, PagedRows{pl, 0}, base, dv, int64_t(a.Hv) * dv, V4);
      copy_async_rows_at(sG + hh * L.nG, a.log_g + h, PagedRows{pl, 0}, n_log, 1, a.Hv, 1);
    } else {
      copy_async_rows(sU + hh * L.nU, a.log_u + (int64_t(b) * W * a.Hv + h) * dv, base, dv, int64_t(a.Hv) * dv, V4);
      copy_async_rows(sG + hh * L.nG, a.log_g + int64_t(b) * W * a.Hv + h, n_log, 1, a.Hv, 1);
    }
    copy_async_rows(sBeta + hh * L.nB, a.beta + int64_t(b) * T * a.Hv + h, T, 1, a.Hv, 1);
  }
  cp_async_commit();
  pdl_wait();  // the sums
  pdl_release();
  for (int hh = 0; hh < rep; ++hh)
    copy_async_rows(sSx + hh * L.nSx, a.scratch + sums_row(a, b, 0, 0) + int64_t(h0 + hh) * dv, T2, dv,
                    int64_t(a.Hv) * dv, V4);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  for (int hh = w; hh < rep; hh += kLogWarps) warp_prefix_sum(sG + hh * L.nG, n_log, lane);

  // Key dots k_s·k_t, k_s·q_t, a warp per (entry, vector), for every value
  // head of the block (only the decays differ): the key weights for the
  // entries before token t, the query weights up to it.
  float* sDot = sCo + rep * L.nCo;  // (W, 2T) the dots alone
  for (int x = w; x < n_log * T2; x += kLogWarps) {
    const int s = x / T2, r = x % T2, t = r % T;
    float dot = 0.0f;
    if (s < base + t + (r >= T ? 1 : 0)) {  // warp-uniform
      const uint16_t* vec = r < T ? sK + (base + t) * kb : sQ + t * kb;
      for (int i = lane; i < dk; i += 32) dot += bf(sK, s * kb + i) * bf(vec, i);
      dot = warp_sum(dot);
    }
    if (lane == 0) sDot[s * T2 + r] = dot;
  }
  __syncthreads();
  for (int x = threadIdx.x; x < rep * n_log * T2; x += blockDim.x) {
    const int hh = x / (n_log * T2), s = x / T2 % n_log, r = x % T2, t = r % T;
    const float* G = sG + hh * L.nG;
    const bool used = s < base + t + (r >= T ? 1 : 0);  // past it e^{G_t−G_s} may overflow: never read
    sCo[hh * L.nCo + s * T2 + r] = used ? sDot[s * T2 + r] * expf(G[base + t] - G[s]) : 0.0f;  // 1 at s = base + t
  }
  for (int x = threadIdx.x; x < rep * T; x += blockDim.x) sEG[x] = expf(sG[(x / T) * L.nG + base + x % T]);
  cp_async_wait<0>();
  __syncthreads();

  // The tokens in order, a thread per (value head, column): u_t made and
  // kept for the tokens after it.
  for (int x = threadIdx.x; x < rep * dv; x += blockDim.x) {
    const int hh = x / dv, c = x % dv, h = h0 + hh;
    const float* co = sCo + hh * L.nCo;
    float* U = sU + hh * L.nU;
    const float* Sx = sSx + hh * L.nSx;
    for (int t = 0; t < T; ++t) {
      const int tt = base + t;
      const float eg = sEG[hh * T + t];
      float mem = eg * Sx[2 * t * V4 + c], out = eg * Sx[(2 * t + 1) * V4 + c];
      for (int s = 0; s < tt; ++s) {
        const float u = U[s * V4 + c];
        mem += co[s * T2 + t] * u, out += co[s * T2 + T + t] * u;
      }
      const float u = (bf(sV + hh * L.nV * 2, t * vb + c) - mem) * sBeta[hh * L.nB + t];
      U[tt * V4 + c] = u;
      if constexpr (kPaged) a.log_u[(pl.row(tt) * a.Hv + h) * dv + c] = u;
      else a.log_u[((int64_t(b) * W + tt) * a.Hv + h) * dv + c] = u;
      put_bf(a.o, (int64_t(b * T + t) * a.Hv + h) * dv + c, out + co[tt * T2 + T + t] * u);
    }
  }
}

}  // namespace

// Arguments checked by gdn_replay_cuda. The sums kernel's instance: the
// fewest n-tiles that hold 2·max_group·T vectors; then the log kernel.
cudaError_t gdn_replay_group(const GdnDecodeArgs& a, cudaStream_t stream) {
  const int need = 2 * a.max_group * a.T, nv = need <= 8 ? 8 : need <= 16 ? 16 : 32;
  int sms = 0;
  if (cudaError_t e = device_sms(&sms); e != cudaSuccess) return e;
  // Halves of the rows where whole rows would leave under 4 blocks an SM.
  const int split = a.group_split != 0 ? a.group_split
                    : int64_t((a.dv + kSumsCols<1> - 1) / kSumsCols<1>) * a.Hv * a.n_groups < 4 * sms ? 2 : 1;
  const int cols = split == 2 ? kSumsCols<2> : kSumsCols<1>;
  const bool fold = a.fold != nullptr;
  auto pick = [&](auto split_tag, auto paged) {
    constexpr int kS = decltype(split_tag)::value;
    constexpr bool kP = decltype(paged)::value;
    return nv == 8    ? (fold ? gdn_group_sums_kernel<8, true, kS, kP> : gdn_group_sums_kernel<8, false, kS, kP>)
           : nv == 16 ? (fold ? gdn_group_sums_kernel<16, true, kS, kP> : gdn_group_sums_kernel<16, false, kS, kP>)
                      : (fold ? gdn_group_sums_kernel<32, true, kS, kP> : gdn_group_sums_kernel<32, false, kS, kP>);
  };
  auto by_split = [&](auto paged) {
    return split == 2 ? pick(std::integral_constant<int, 2>{}, paged) : pick(std::integral_constant<int, 1>{}, paged);
  };
  const bool paged = a.pages.page != nullptr;
  auto* sums = paged ? by_split(std::true_type{}) : by_split(std::false_type{});
  auto* log = paged ? gdn_group_log_kernel<true> : gdn_group_log_kernel<false>;
  const int f4 = fold ? (a.max_fold + 3) & ~3 : 0;
  const size_t sums_shm = sizeof(float) * SumsShm(nv, a.dk, a.W, f4, cols, split).total;
  const size_t log_shm = sizeof(float) * LogShm(a.W, a.T, a.dk, a.dv, a.Hv / a.Hk).total;
  // Both refusals before either launch: the sums kernel may fold in place.
  if (cudaError_t e = allow_dynamic_smem(sums, sums_shm); e != cudaSuccess) return e;
  if (cudaError_t e = allow_dynamic_smem(log, log_shm); e != cudaSuccess) return e;
  launch_kernel(sums, dim3((a.dv + cols - 1) / cols, a.Hv, a.n_groups), 32 * kWarps, sums_shm, stream, a);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  launch_kernel(log, dim3(a.Hk, a.max_group, a.n_groups), 32 * kLogWarps, log_shm, stream, a);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
