// Gated DeltaNet standard decode, the register-resident variant (see
// gdn_decode.h, gdn_step.cu; GdnDecodeArgs::variant 3): one warp per 16
// value columns of a (value head, sequence) holds all dk ≤ 128 rows of
// them in registers — lane (rg, cq) has rows rg·R .. rg·R + R − 1 (R = kR:
// 16, or 8 for dk ≤ 64) of columns 4·cq .. 4·cq + 3 of the warp's 16 — and finishes the
// sums Sᵀk, Sᵀq over rows by three shuffle rounds across the 8 row groups.
// No shared memory and no barrier: a warp is 16 loads in flight, a few
// hundred FMAs and 16 stores, so the SM's warps stream the state
// continuously instead of in the phase-locked rounds of blocks that stage
// a slice and wait on one another. H200, Qwen3-Next shapes (2026-12-02,
// 551758c and 09680ff): against the streaming blocks'
// 81.2 / 294 / 566 µs at batch 64 / 256 / 512, 72 / 275 / 546 since the
// rows' loads go through load_cols; batch 8 15.6 → 14.0. A warp per 8
// columns (16 row groups, 6–8 blocks an SM) measured slower, 83–88 µs at
// 64: a row's 32-byte pieces; so did 1 or 2 warps a block (88, 75 µs).
//
// With kLog, exact replay as gdn_step.cu's: the log's entries before the
// step's T tokens applied first (S ← αS + k·uᵀ, gdn_token.cuh), then the
// tokens by this kernel's own arithmetic, their u to the log. The launcher
// (gdn_step.cu) picks the same kernel for stepping and exact replay at a
// batch, so the bits agree. Those entries (earlier steps wrote them) are
// staged in shared memory by the block with cp.async, all in flight at
// once — an entry's loads after the one before's update made the replay a
// chain of latencies — and with GdnDecodeArgs::early requested and applied,
// up to a fold's point, before the PDL wait, while the kernel before runs
// (as the Mamba2 wide blocks, mamba2_replay_wide.cu). The fast replay takes
// this kernel too at small batch (gdn_replay.cu), with kDual: the older
// entries in the dual form, one product of 16 entries on tensor cores in
// place of 16 updates (apply_dual) — H200, Qwen3-Next shapes (2026-12-03,
// f5da664): one token at batch 1 4.0–4.2 µs against the sequential
// 4.5–4.6, at batch 6 6.4 against 7.0.
#include "ops/cuda/gdn_decode.h"

#include <cstdint>
#include <type_traits>

#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/gdn_token.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kWarps = 4;       // a block: 64 columns of one (head, sequence)
constexpr int kWarpCols = 16;   // columns a warp owns
constexpr int kRowGroups = 8;   // lanes over rows; 4 lanes over a warp's 16 columns
// Blocks an SM the compiler must fit: 16 rows a lane (64 state floats)
// spill at 128 registers (4 blocks), not at 168 (3: 12 warps, 96 KB of
// state loads in flight an SM, ample for the DRAM's latency).
template <int kR>
constexpr int kBlocksPerSm = kR > 8 ? 3 : 4;

// Rows i0 .. i0 + kR − 1 of a bf16 vector of dk (zeros past dk), kept as
// bf16 pairs (half the registers: the state's 64 floats need the room) and
// widened where used; vec8: dk % 8 = 0 and the vector 16-byte aligned (kR
// is a multiple of 8), 16-byte loads.
template <int kR>
struct KeyRows {
  uint32_t w[kR / 2];

  __device__ void load(const uint16_t* p, int i0, int dk, bool vec8) {
    if (vec8) {
#pragma unroll
      for (int j = 0; j < kR; j += 8) {
        uint4 x = make_uint4(0, 0, 0, 0);
        if (i0 + j < dk) x = *reinterpret_cast<const uint4*>(p + i0 + j);
        w[j / 2] = x.x, w[j / 2 + 1] = x.y, w[j / 2 + 2] = x.z, w[j / 2 + 3] = x.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < kR; j += 2) {
        const uint32_t lo = i0 + j < dk ? p[i0 + j] : 0u, hi = i0 + j + 1 < dk ? p[i0 + j + 1] : 0u;
        w[j / 2] = lo | hi << 16;
      }
    }
  }
  __device__ float operator[](int i) const {  // i a constant after unrolling
    return __uint_as_float(i % 2 == 0 ? w[i / 2] << 16 : w[i / 2] & 0xffff0000u);
  }
};

// A lane's 4 columns of a row (c: the first; zeros past dv); kVec: dv % 4
// = 0 and p 16-byte aligned, one 16-byte load.
template <bool kVec>
__device__ __forceinline__ void load_cols(float (&x)[4], const float* p, int c, int dv) {
  if (kVec && c < dv) {
    const float4 y = *reinterpret_cast<const float4*>(p + c);
    x[0] = y.x, x[1] = y.y, x[2] = y.z, x[3] = y.w;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) x[e] = c + e < dv ? p[c + e] : 0.0f;
  }
}

// A lane's 4 columns of a (dk, dv) row-major matrix at rows i0 .. i0 + kR − 1,
// c: its first column; kVec: dv % 4 = 0 and m 16-byte aligned, so that one
// 16-byte access holds them.
template <int kR, bool kVec>
struct LaneRows {
  float v[kR][4];

  __device__ void load(const float* m, int i0, int dk, int c, int dv) {
#pragma unroll
    for (int i = 0; i < kR; ++i) load_cols<kVec>(v[i], m + int64_t(i0 + i) * dv, c, i0 + i < dk ? dv : 0);
  }
  // The same by 8-byte pairs (columns c, c + 1 and c + 2, c + 3): the
  // tensor cores' C fragments (apply_dual) are two rows by two columns,
  // and with 16-byte rows (one row by four) the compiler loaded each row
  // into a temporary and moved it there, each move waiting for its load —
  // the state's loads one DRAM latency after another (H200: the dual-form replay 8.2 µs a step at
  // batch 1 against the sequential 4.4, long-scoreboard stalls).
  __device__ void load_pairs(const float* m, int i0, int dk, int c, int dv) {
    if constexpr (!kVec) {
      load(m, i0, dk, c, dv);
    } else {
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float2 y = make_float2(0.0f, 0.0f);
          if (i0 + i < dk && c < dv) y = *reinterpret_cast<const float2*>(m + int64_t(i0 + i) * dv + c + 2 * h);
          v[i][2 * h] = y.x, v[i][2 * h + 1] = y.y;
        }
    }
  }
  __device__ void store(float* m, int i0, int dk, int c, int dv) const {
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      if (i0 + i >= dk) break;
      if constexpr (kVec) {
        if (c < dv) *reinterpret_cast<float4*>(m + int64_t(i0 + i) * dv + c) = make_float4(v[i][0], v[i][1], v[i][2], v[i][3]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (c + e < dv) m[int64_t(i0 + i) * dv + c + e] = v[i][e];
      }
    }
  }
  // S ← αS + k·uᵀ over the lane's elements.
  __device__ void update(float alpha, const KeyRows<kR>& k, const float (&u)[4]) {
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) v[i][e] = gdn_update(v[i][e], alpha, k[i], u[e]);
  }
};

// The sum over the warp's 8 row groups (lanes 4 apart): every lane of a
// column gets the same bits (each round adds the same two values).
__device__ __forceinline__ float row_group_sum(float x) {
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// kLog's shared memory, in floats: (W4) g_s, (W, kBlockCols) u_s of the
// block's columns, (W, KB) k_s as bf16 (KB = dk rounded up to 8 elements,
// 16-byte rows).
constexpr int kBlockCols = kWarps * kWarpCols;
__host__ __device__ __forceinline__ int warps_log_floats(int W, int dk) {
  return ((W + 3) & ~3) + W * kBlockCols + W * ((dk + 7) & ~7) / 2;
}

// The dual form of n ≤ 16 staged entries from s0 (the fast replay, kDual):
//   S ← e^{Σ_r g_r}·S + Σ_s e^{Σ_{r>s} g_r}·k_s·u_sᵀ
// as one rank-n product on tensor cores instead of n updates on the FMA
// pipe (2n operations an element: ~130 instructions a lane an entry, the
// replay's cost before the PDL wait at small batch). The lane's registers
// already are mma.sync C fragments under a relabelling: logical row g (+8)
// of 16-row block m is the lane's row i0 + 2m (+1), logical column j of
// 8-column block nb the warp's column 4(j/2) + 2nb + j%2 — so lane (g, t)
// holds C's (g, 2t), (g, 2t+1), (g+8, …) as S.v[2m][2nb], S.v[2m][2nb+1],
// S.v[2m+1][…], and the A fragment (keys: bf16, exact) needs only the
// lane's own rows, of entries 2t, 2t+1, 2t+8, 2t+9. The decayed values
// e^{…}·u_s (fp32) go in as two bf16 terms, hi + lo: 16 bits of mantissa,
// a relative error under 2⁻¹⁶ — within the fast replay's tolerance, which
// is why exact replay keeps the sequential recurrence.
template <int kR, bool kVec>
__device__ __forceinline__ void apply_dual(LaneRows<kR, kVec>& S, const float* sG, const float* sU, const uint16_t* sK,
                                           int KB, int s0, int n, int i0, int dk, int ucol, int ucols, int lane) {
  const int g = lane / 4, t = lane % 4;
  const int e[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};  // the lane's entries (A's and B's k)
  float suf[4] = {}, tot = 0.0f;                            // Σ_{r>e} g_r, Σ_r g_r
  for (int r = n - 1; r >= 0; --r) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (e[j] == r) suf[j] = tot;
    tot += sG[s0 + r];
  }
  // The decay, then the products; each entry's weight once for both n-blocks.
  const float decay = expf(tot);
  float wt[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) wt[j] = expf(suf[j]);
#pragma unroll
  for (int i = 0; i < kR; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) S.v[i][c] *= decay;
  uint32_t bh[2][2], bl[2][2];  // (n-block, register) hi and lo terms
#pragma unroll
  for (int nb = 0; nb < 2; ++nb) {
    const int col = ucol + 4 * (g / 2) + 2 * nb + g % 2;  // B's column g, in the block's staged columns
    float x[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) x[j] = e[j] < n && col < ucols ? sU[(s0 + e[j]) * kBlockCols + col] * wt[j] : 0.0f;
    split_bf16(x[0], x[1], bh[nb][0], bl[nb][0]);
    split_bf16(x[2], x[3], bh[nb][1], bl[nb][1]);
  }
  // The keys 8 rows at a time (all 16 of 4 entries at once spill).
#pragma unroll
  for (int h8 = 0; h8 < kR / 8; ++h8) {
    KeyRows<8> ke[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (e[j] < n) ke[j].load(sK + (s0 + e[j]) * KB, i0 + 8 * h8, dk, dk % 8 == 0);
      else
#pragma unroll
        for (int i = 0; i < 4; ++i) ke[j].w[i] = 0u;
    }
#pragma unroll
    for (int mm = 0; mm < 4; ++mm) {
      const int m = 4 * h8 + mm;
      const uint32_t af[4] = {__byte_perm(ke[0].w[mm], ke[1].w[mm], 0x5410), __byte_perm(ke[0].w[mm], ke[1].w[mm], 0x7632),
                              __byte_perm(ke[2].w[mm], ke[3].w[mm], 0x5410), __byte_perm(ke[2].w[mm], ke[3].w[mm], 0x7632)};
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        float d[4] = {S.v[2 * m][2 * nb], S.v[2 * m][2 * nb + 1], S.v[2 * m + 1][2 * nb], S.v[2 * m + 1][2 * nb + 1]};
        mma_bf16_16816(d, af, bh[nb][0], bh[nb][1]);
        mma_bf16_16816(d, af, bl[nb][0], bl[nb][1]);
        S.v[2 * m][2 * nb] = d[0], S.v[2 * m][2 * nb + 1] = d[1], S.v[2 * m + 1][2 * nb] = d[2],
                     S.v[2 * m + 1][2 * nb + 1] = d[3];
      }
    }
  }
}

// kPaged (with kLog): the log's rows through the block table (GdnDecodeArgs::pages).
template <int kR, bool kVec, bool kLog, bool kDual, bool kPaged>
__global__ void __launch_bounds__(32 * kWarps, kBlocksPerSm<kR>) gdn_step_warps_kernel(GdnDecodeArgs a) {
  static_assert(kLog || !kPaged);
  const int h = blockIdx.y, b = blockIdx.z, kh = h / (a.Hv / a.Hk);
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, rg = lane / 4;
  const int dk = a.dk, dv = a.dv, T = a.T, i0 = rg * kR;
  const int wc = (blockIdx.x * kWarps + w) * kWarpCols, c = wc + 4 * (lane % 4);  // the warp's, the lane's columns
  const int64_t r0 = decode_row0(a.row, b, T);  // this sequence's first row of q, v, β, o (k, g, out_slot)
  if (r0 < 0) return pdl_leave();               // not in this launch (block-uniform)
  const GdnLogSpan span = gdn_log_span<kLog>(a, b);
  const PagedLog pl = paged_log_if<kPaged>(a.pages, b);  // the log's rows, kPaged
  const int64_t hs = int64_t(dk) * dv;
  const float* src = a.state + (int64_t(a.slot[b]) * a.Hv + h) * hs;
  // Everything read so far is the plan (slots, log lengths, folds, rows),
  // which no kernel writes (launch.cuh): read while the kernel before ends
  // — and with a.early the state too.
  LaneRows<kR, kVec> S;
  const bool live = wc < dv;  // a warp past the last column: no columns (warp-uniform: no shuffle waits on it)
  // Keys and queries by 16 bytes where every row is so aligned (the
  // caller's arrays may be views at any offset).
  const bool vec8 = dk % 8 == 0 && ((reinterpret_cast<uintptr_t>(a.q) |
                                     reinterpret_cast<uintptr_t>(kLog ? a.log_k : a.k)) % 16 == 0);
  if constexpr (kLog) {
    // The entries before the step's tokens: staged (every warp of the block
    // takes part in the copies and barriers, live or not), then applied in
    // order; a fold stores the state after its f-th, after the wait.
    extern __shared__ float shm[];
    const int W = a.W, base = span.base, f = span.f, c0b = blockIdx.x * kBlockCols, KB = (dk + 7) & ~7;
    float* sG = shm;                                                  // (W4)
    float* sU = shm + ((W + 3) & ~3);                                 // (W, kBlockCols)
    uint16_t* sK = reinterpret_cast<uint16_t*>(sU + W * kBlockCols);  // (W, KB)
    const int64_t e0 = int64_t(b) * W;
    auto stage = [&] {
      if constexpr (kPaged) {
        const PagedRows all{pl, 0};
        copy_async_rows_at(sG, a.log_g + h, all, base, 1, a.Hv, 1);
        copy_async_rows_at(sU, a.log_u + int64_t(h) * dv + c0b, all, base, min(kBlockCols, dv - c0b),
                           int64_t(a.Hv) * dv, kBlockCols);
        copy_async_bf_rows_at(sK, a.log_k + int64_t(kh) * dk, all, base, dk, int64_t(a.Hk) * dk, KB);
      } else {
        copy_async_rows(sG, a.log_g + e0 * a.Hv + h, base, 1, a.Hv, 1);
        copy_async_rows(sU, a.log_u + (e0 * a.Hv + h) * dv + c0b, base, min(kBlockCols, dv - c0b), int64_t(a.Hv) * dv,
                        kBlockCols);
        copy_async_bf_rows(sK, a.log_k + (e0 * a.Hk + kh) * dk, base, dk, int64_t(a.Hk) * dk, KB);
      }
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
    };
    float* fold_dst = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.Hv + h) * hs : nullptr;
    auto apply = [&](int s0, int s1) {  // entries s0 .. s1 − 1 from shared memory
      if constexpr (kDual) {
        for (int s = s0; s < s1; s += 16)
          apply_dual(S, sG, sU, sK, KB, s, min(16, s1 - s), i0, dk, wc - c0b, min(kBlockCols, dv - c0b), lane);
      } else {
        for (int s = s0; s < s1; ++s) {
          KeyRows<kR> ks;
          ks.load(sK + s * KB, i0, dk, dk % 8 == 0);
          float us[4];
          load_cols<kVec>(us, sU + s * kBlockCols, c - c0b, dv - c0b);  // the block's columns
          S.update(expf(sG[s]), ks, us);
        }
      }
    };
    // The first stretch ends at the fold point; with early it is applied
    // before the wait, and the fold's store, a write, comes after it.
    const int stop = f > 0 ? f : base;
    auto load_state = [&] {
      if constexpr (kDual) S.load_pairs(src, i0, dk, c, dv);
      else S.load(src, i0, dk, c, dv);
    };
    if (a.early) {
      if (live) load_state();
      stage();
      if (live) apply(0, stop);
    }
    pdl_begin();
    if (!a.early) {
      if (live) load_state();
      stage();
    }
    if (!live) return;
    if (!a.early) apply(0, stop);
    if (f > 0) S.store(fold_dst, i0, dk, c, dv);
    apply(stop, base);
  } else {
    if (a.early && live) S.load(src, i0, dk, c, dv);
    pdl_begin();
    if (!live) return;
    if (!a.early) S.load(src, i0, dk, c, dv);
  }

  // The delta rule by columns: mem = (αS)ᵀk, u = β(v − mem), S ← αS + k·uᵀ,
  // o = Sᵀq = α·(Sᵀq) + u·(k·q) — both sums over rows in one pass over the
  // registers, then the update.
  for (int t = 0; t < T; ++t) {
    const int64_t rt = r0 + t;
    KeyRows<kR> kr, qr;
    // The token's log row (kPaged: from the table; else b·W + base + t below).
    const int64_t lt = kPaged ? pl.row(span.base + t) : 0;
    const uint16_t* kin = kPaged ? a.log_k + (lt * a.Hk + kh) * dk
                          : kLog ? a.log_k + ((int64_t(b) * a.W + span.base + t) * a.Hk + kh) * dk
                                 : a.k + (rt * a.Hk + kh) * dk;
    kr.load(kin, i0, dk, vec8);
    qr.load(a.q + (rt * a.Hk + kh) * dk, i0, dk, vec8);
    const float g = kPaged ? a.log_g[lt * a.Hv + h]
                    : kLog ? a.log_g[(int64_t(b) * a.W + span.base + t) * a.Hv + h]
                           : a.g[rt * a.Hv + h];
    const float alpha = expf(g), beta = a.beta[rt * a.Hv + h];
    float vv[4];
    const uint16_t* vin = a.v + (rt * a.Hv + h) * dv;
#pragma unroll
    for (int e = 0; e < 4; ++e) vv[e] = c + e < dv ? bf(vin, c + e) : 0.0f;

    float kq = 0.0f, mk[4] = {}, mq[4] = {};
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      kq = __fmaf_rn(kr[i], qr[i], kq);
#pragma unroll
      for (int e = 0; e < 4; ++e) mk[e] = __fmaf_rn(S.v[i][e], kr[i], mk[e]), mq[e] = __fmaf_rn(S.v[i][e], qr[i], mq[e]);
    }
    kq = row_group_sum(kq);
    float u[4], o[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      mk[e] = row_group_sum(mk[e]), mq[e] = row_group_sum(mq[e]);
      u[e] = __fmul_rn(__fsub_rn(vv[e], __fmul_rn(alpha, mk[e])), beta);
      o[e] = __fmaf_rn(u[e], kq, __fmul_rn(alpha, mq[e]));
    }
    if (rg == 0) {  // one lane per column group writes the token's outputs
      uint16_t* out = a.o + (rt * a.Hv + h) * dv;
      float* log_u = kPaged ? a.log_u + (lt * a.Hv + h) * dv
                     : kLog ? a.log_u + ((int64_t(b) * a.W + span.base + t) * a.Hv + h) * dv
                            : nullptr;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (c + e < dv) {
          put_bf(out, c + e, o[e]);
          if constexpr (kLog) log_u[c + e] = u[e];
        }
    }
    if (kLog && t + 1 == T) break;  // output-only: the last token's state is not kept
    S.update(alpha, kr, u);
    if constexpr (!kLog) S.store(a.state + (int64_t(a.out_slot[rt]) * a.Hv + h) * hs, i0, dk, c, dv);
  }
}

}  // namespace

// Whether the launch's blocks all fit the device at once (one wave), dk ≤
// kGdnStepWarpsMaxDk: where the fast replay takes this kernel
// (gdn_replay.cu).
bool gdn_step_warps_one_wave(const GdnDecodeArgs& a, int sms) {
  const int64_t blocks = int64_t((a.dv + kBlockCols - 1) / kBlockCols) * a.Hv * a.batch;
  return blocks <= int64_t(a.dk <= kRowGroups * 8 ? kBlocksPerSm<8> : kBlocksPerSm<16>) * sms;
}

namespace {

// The launch for a step (log false), exact replay (log) or the fast
// replay's dual form (log and dual), arguments checked by the caller.
cudaError_t launch_warps(const GdnDecodeArgs& a, bool log, bool dual, cudaStream_t stream) {
  const dim3 grid((a.dv + kBlockCols - 1) / kBlockCols, a.Hv, a.batch);
  const size_t shm = log ? sizeof(float) * size_t(warps_log_floats(a.W, a.dk)) : 0;
  auto go = [&](auto kernel) {
    if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
    launch_kernel(kernel, grid, 32 * kWarps, shm, stream, a);
    return cudaGetLastError();
  };
  // 16-byte state (and log u) accesses where every row is so aligned.
  const bool vec = a.dv % 4 == 0 && aligned_to(a.state, 16) && (!log || aligned_to(a.log_u, 16));
  const bool paged = a.pages.page != nullptr;
  auto pick = [&](auto rows, auto vec_tag) {
    constexpr int kR = decltype(rows)::value;
    constexpr bool kVec = decltype(vec_tag)::value;
    if (!log) return go(gdn_step_warps_kernel<kR, kVec, false, false, false>);
    if (paged)
      return dual ? go(gdn_step_warps_kernel<kR, kVec, true, true, true>)
                  : go(gdn_step_warps_kernel<kR, kVec, true, false, true>);
    return dual ? go(gdn_step_warps_kernel<kR, kVec, true, true, false>)
                : go(gdn_step_warps_kernel<kR, kVec, true, false, false>);
  };
  auto rows = [&](auto r) { return vec ? pick(r, std::true_type{}) : pick(r, std::false_type{}); };
  static_assert(kRowGroups * 16 == kGdnStepWarpsMaxDk);
  return a.dk <= kRowGroups * 8 ? rows(std::integral_constant<int, 8>{}) : rows(std::integral_constant<int, 16>{});
}

}  // namespace

// Called by gdn_step_launch (gdn_step.cu) with its arguments checked and
// dk ≤ kGdnStepWarpsMaxDk; `log`: exact replay.
cudaError_t gdn_step_warps(const GdnDecodeArgs& a, bool log, cudaStream_t stream) {
  return launch_warps(a, log, false, stream);
}

// Called by gdn_replay_cuda (gdn_replay.cu), arguments checked there, dk ≤
// kGdnStepWarpsMaxDk: the fast replay, the older entries in the dual form.
cudaError_t gdn_replay_warps(const GdnDecodeArgs& a, cudaStream_t stream) { return launch_warps(a, true, true, stream); }

}  // namespace replayssm::ops::cuda
