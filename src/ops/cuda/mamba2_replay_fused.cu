// Mamba2 replay decode in one kernel, for full tiles (see mamba2_decode.h):
// one block per (head, sequence) computes the log's part of its outputs
// and streams the checkpoint, as in mamba2_replay.cu, with
//   y_t = e^{L_t}·S_c·C_t + Σ_{s≤t} e^{L_t−L_s}·dt_s·(B_s·C_t)·x_s + D·x_t.
// The launcher's choice past the wide blocks' batches (batch·H > SMs:
// from batch 2 at H = 128 on the H200; measured at 2–32 and 64–512) where a
// head's rows are whole passes of 16 and N is one or two 128-column
// tiles, T ≤ 4 and no fork groups; elsewhere the split path and the one
// kernel (mamba2_replay.cu) stand. It needs no scratch.
//
// Why (H200, batch 256, ncu and variant timings; 2026-12-02, 43b682d):
//   - the split path's log kernel ran before its pass almost wholly, not
//     beside it: its blocks filled the SMs first and the pass's blocks,
//     which wait for that whole grid before their last pass, came after.
//     The verify step without a fold took 377.5 µs, its pass alone 303.1
//     and the log kernel alone 75.1 (AR 296.7 / 243.6 / 45.5);
//   - both kernels were issue-bound (86% and 77% of issue slots): the
//     pass spent 291 instructions a warp on a pass whose 64 FFMAs and
//     butterfly are 126 — bound checks, 64-bit address arithmetic and the
//     register moves of `cur = nxt` — and 92 more on each prefetch.
// Here each block computes its own head's log part (the B·C dots, which
// the split path shared by a group's heads, recomputed per head on tensor
// cores), with no second grid and no scratch, and the passes run
// unchecked from a lane pointer, alternating two tiles: a verify block at
// batch 256 executes 175 M warp instructions against the two kernels'
// 321 M, and the step without a fold takes 317–322 µs.
#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kFusedWarps = 4, kFusedRows = 4, kFusedPass = kFusedWarps * kFusedRows;  // rows a pass

// Shared memory, in floats from the start; every array a multiple of 4
// floats from there (16-byte aligned). The bf16 stage holds the log's B
// and x rows and the tokens' C as copied (B and C rows padded by 8 values,
// so that the dots' fragment loads take 8 rows in different banks); C is
// also kept in fp32 for the passes' products, and a fold's B rows.
struct FusedLayout {
  int C, Y, Acc, L, Dt, F, Wt, Dec, B, U, stB, stC, stX, total;
};
__host__ __device__ __forceinline__ FusedLayout fused_layout(int kT, int kN, bool fold, int W, int P) {
  const int W4 = (W + 3) & ~3, ldst = kN + 8;
  FusedLayout l{};
  l.C = 0;                             // (kT, kN) C_t, zeros past T
  l.Y = l.C + kT * kN;                 // (kT, P) the log's part of y, with D·x
  l.Acc = l.Y + kT * P;                // (kT, P) S_c·C_t
  l.L = l.Acc + kT * P;                // (W4) L_s
  l.Dt = l.L + W4;                     // (W4) dt_s
  l.F = l.Dt + W4;                     // (W4) fold coefficients e^{L_{f−1}−L_s}·dt_s
  l.Wt = l.F + W4;                     // (W4, kT) output weights, zeros past each token
  l.Dec = l.Wt + W4 * kT;              // (4) e^{L_t}
  l.B = l.Dec + 4;                     // (W4, kN) B_s in fp32, a fold's rows (zeros past f to W4)
  l.U = l.B + (fold ? W4 * kN : 0);    // (P, W4) fold rows F_s·x_s[p], zeros past f
  l.stB = l.U + (fold ? P * W4 : 0);   // (W, ldst) bf16 B_s
  l.stC = l.stB + W * ldst / 2;        // (kT, ldst) bf16 C_t
  l.stX = l.stC + kT * ldst / 2;       // (W, P) bf16 x_s
  l.total = l.stX + (W * P / 2 + 3) / 4 * 4;
  return l;
}

// n rows of kChunks 16-byte chunks from src (row stride lds; row r at
// row_of(r), tile.cuh) to dst (row stride ldd) by cp.async, the chunk
// count known at compile time.
template <int kChunks, typename RowOf = Consecutive>
__device__ __forceinline__ void copy_rows16(uint16_t* dst, int ldd, const uint16_t* src, int64_t lds, int n,
                                            RowOf row_of = {}) {
  for (int i = threadIdx.x; i < n * kChunks; i += blockDim.x) {
    const int r = i / kChunks, c = i % kChunks * 8;
    cp_async<16>(dst + r * ldd + c, src + row_of(r) * lds + c);
  }
}

// rows × kN staged bf16 values (row stride ldst) as fp32 (row stride kN),
// the rows from `valid` on as zeros, by the whole block.
template <int kN>
__device__ __forceinline__ void unstage_rows(float* dst, const uint16_t* stage, int ldst, int valid, int rows) {
  for (int i = threadIdx.x; i < rows * kN / 4; i += blockDim.x) {
    const int r = i / (kN / 4), c = i % (kN / 4) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < valid) {
      const uint2 x = *reinterpret_cast<const uint2*>(stage + r * ldst + c);
      const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x.x));
      const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x.y));
      v = make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    *reinterpret_cast<float4*>(dst + r * kN + c) = v;
  }
}

// kT: 1 (one token) or 4 (up to four: a verify's drafts); kJ: 128-column
// chunks of N; kFold: the fold's code, for steps given fold arrays.
// Registers: 64 for one chunk (8 blocks an SM; 7 with the fold's code,
// whose shared memory allows no more), 128 for two; one token's instance
// without the fold's code fits 10 blocks in 51 registers (and in shared
// memory for logs of up to about 32 entries at P = 64; H200: AR at batch
// 64–512 74.1 / 276.5 / 558 µs against 75.1 / 278.9 / 559.6 with 8, no
// spills;
// a fold's entries four at a time instead of two spilled 8–16 bytes and
// made fold steps 2–4% slower; an L2 prefetch of later passes was no
// faster: 2026-12-02, af625d3). kPaged: the log's rows through the block
// table (Mamba2DecodeArgs::pages).
template <int kJ, int kT, bool kFold>
constexpr int kFusedBlocks = kJ == 1 ? (kFold ? 7 : kT == 1 ? 10 : 8) : 4;
template <int kJ, int kT, bool kFold, bool kPaged>
__global__ void __launch_bounds__(32 * kFusedWarps, kFusedBlocks<kJ, kT, kFold>) mamba2_replay_fused_kernel(
    Mamba2DecodeArgs a) {
  using TileT = Tile<4, kJ, kFusedRows>;
  constexpr int kN = 128 * kJ;
  if (a.release_early) pdl_release();  // Mamba2DecodeArgs::release_early
  if (!a.early) pdl_begin();
  // Grid (heads of a group, groups, sequences): no division for the group.
  const int g = blockIdx.y, h = g * gridDim.x + blockIdx.x, b = blockIdx.z;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.P, T = a.T, W = a.W, H = a.H, W4 = (W + 3) & ~3, passes = P / kFusedPass;
  const int64_t r0 = decode_row0(a.row, b, T);
  if (r0 < 0) return pdl_leave();  // not in this launch (block-uniform)
  const int n_log = min(max(a.n_log[b], T), W), base = n_log - T;
  const int f = kFold && a.fold != nullptr ? min(max(a.fold[b], 0), min(n_log, a.max_fold)) : 0;

  // The checkpoint's first pass, from the lane's pointer: row w of the
  // pass, columns 4·lane + 128·j; the warp's rows are 4 apart.
  const float* Sl = a.state + (int64_t(a.slot[b]) * H + h) * P * kN + w * kN + 4 * lane;
  auto load = [&](TileT& t, int q) {
    const float* p = Sl + int64_t(q) * kFusedPass * kN;
#pragma unroll
    for (int r = 0; r < kFusedRows; ++r)
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const float4 x = *reinterpret_cast<const float4*>(p + r * kFusedWarps * kN + 128 * j);
        t.v[r][j][0] = x.x, t.v[r][j][1] = x.y, t.v[r][j][2] = x.z, t.v[r][j][3] = x.w;
      }
  };
  TileT t0, t1;
  load(t0, 0);
  if (a.early) pdl_begin();  // the log's newest entries and C come from the kernel before

  const FusedLayout l = fused_layout(kT, kN, kFold, W, P);
  extern __shared__ float4 shm4[];
  float* shm = reinterpret_cast<float*>(shm4);
  float *sC = shm + l.C, *sY = shm + l.Y, *sAcc = shm + l.Acc, *sL = shm + l.L, *sDt = shm + l.Dt, *sF = shm + l.F;
  float *sWt = shm + l.Wt, *sDec = shm + l.Dec, *sB = shm + l.B, *sU = shm + l.U;
  uint16_t* stB = reinterpret_cast<uint16_t*>(shm + l.stB);
  uint16_t* stC = reinterpret_cast<uint16_t*>(shm + l.stC);
  uint16_t* stX = reinterpret_cast<uint16_t*>(shm + l.stX);

  // The log and the tokens' C in one round trip (16-byte copies: the
  // launcher checked the layout), dt by 4 bytes.
  constexpr int ldst = kN + 8;
  if constexpr (kPaged) {
    const PagedLog pl = paged_log(a.pages, b);
    copy_rows16<kN / 8>(stB, ldst, a.log_B + int64_t(g) * kN, int64_t(a.G) * kN, n_log, PagedRows{pl, 0});
    copy_rows16<kN / 8>(stC, ldst, a.Cm + (r0 * a.G + g) * kN, int64_t(a.G) * kN, T);
    copy_async_bf_rows_at<true>(stX, a.log_x + int64_t(h) * P, PagedRows{pl, 0}, n_log, P, int64_t(H) * P, P);
    for (int s = threadIdx.x; s < n_log; s += blockDim.x) cp_async<4>(sDt + s, a.log_dt + pl.row(s) * H + h);
  } else {
    copy_rows16<kN / 8>(stB, ldst, a.log_B + (int64_t(b) * W * a.G + g) * kN, int64_t(a.G) * kN, n_log);
    copy_rows16<kN / 8>(stC, ldst, a.Cm + (r0 * a.G + g) * kN, int64_t(a.G) * kN, T);
    copy_async_bf_rows<true>(stX, a.log_x + (int64_t(b) * W * H + h) * P, n_log, P, int64_t(H) * P, P);
    for (int s = threadIdx.x; s < n_log; s += blockDim.x) cp_async<4>(sDt + s, a.log_dt + (int64_t(b) * W + s) * H + h);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // L_s (one warp), C in fp32 (zeros past T), a fold's B rows in fp32
  // (zeros past f up to the pass's chunks of two entries).
  if (w == 0) {
    const float A = -expf(a.A_log[h]);
    for (int s = lane; s < n_log; s += 32) sL[s] = A * sDt[s];
    __syncwarp();
    warp_prefix_sum(sL, n_log, lane);
  }
  unstage_rows<kN>(sC, stC, ldst, T, kT);
  const int fe = (f + 1) & ~1;  // the passes take a fold's entries two at a time
  if constexpr (kFold)
    if (f > 0) unstage_rows<kN>(sB, stB, ldst, f, fe);  // block-uniform
  __syncthreads();

  // Output weights W[s][t] = e^{L_{base+t}−L_s}·dt_s·(B_s·C_t), zero for
  // s > base + t: the dots on tensor cores (bf16 products exact, fp32
  // sums; fragments as mma_bf16.cuh), the tokens as A's rows (T ≤ 4 of
  // 16, the rest zeros) and 8 entries a warp's tile as B's columns. H200,
  // ncu: on the FMA pipe with a butterfly per 4 entries they took a fifth
  // of a verify block's instructions.
  {
    const int gq = lane / 4, tq = lane % 4;
    const bool arow = gq < T;
    const uint16_t* crow = stC + min(gq, T - 1) * ldst + 2 * tq;
    const int last = base + min(gq, T - 1);
    const float Lt = sL[last];
    for (int n0 = 8 * w; n0 < n_log; n0 += 8 * kFusedWarps) {  // warp-uniform
      const uint16_t* brow = stB + min(n0 + gq, n_log - 1) * ldst + 2 * tq;
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int k0 = 0; k0 < kN; k0 += 16) {
        const uint32_t af[4] = {arow ? *reinterpret_cast<const uint32_t*>(crow + k0) : 0u, 0u,
                                arow ? *reinterpret_cast<const uint32_t*>(crow + k0 + 8) : 0u, 0u};
        mma_bf16_16816(d, af, *reinterpret_cast<const uint32_t*>(brow + k0),
                       *reinterpret_cast<const uint32_t*>(brow + k0 + 8));
      }
      // d[e]: token gq, entry n0 + 2·tq + e.
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int s = n0 + 2 * tq + e;
        if (arow && s < n_log) sWt[s * kT + gq] = s <= last ? expf(Lt - sL[s]) * sDt[s] * d[e] : 0.0f;
      }
    }
  }
  for (int t = threadIdx.x; t < T; t += blockDim.x) sDec[t] = expf(sL[base + t]);
  if constexpr (kFold)
    for (int s = threadIdx.x; s < f; s += blockDim.x) sF[s] = expf(sL[f - 1] - sL[s]) * sDt[s];
  __syncthreads();

  // The log's part of y, a thread per row p for all T tokens (each x_s
  // read once), and a fold's rows.
  const float Dh = a.D[h];
  for (int p = threadIdx.x; p < P; p += blockDim.x) {
    float acc[kT];
#pragma unroll
    for (int t = 0; t < kT; ++t) acc[t] = t < T ? Dh * bf(stX, (base + t) * P + p) : 0.0f;
    for (int s = 0; s < n_log; ++s) {
      const float xs = bf(stX, s * P + p);
      if constexpr (kT == 4) {
        const float4 wt = *reinterpret_cast<const float4*>(sWt + 4 * s);
        acc[0] += wt.x * xs, acc[1] += wt.y * xs, acc[2] += wt.z * xs, acc[3] += wt.w * xs;
      } else {
        acc[0] += sWt[s] * xs;
      }
    }
#pragma unroll
    for (int t = 0; t < kT; ++t)
      if (t < T) sY[t * P + p] = acc[t];
  }
  if constexpr (kFold) {
    if (f > 0) {  // block-uniform
      for (int p = threadIdx.x; p < P; p += blockDim.x)
        for (int s = 0; s < fe; ++s) sU[p * W4 + s] = s < f ? sF[s] * bf(stX, s * P + p) : 0.0f;
      __syncthreads();
    }
  }

  // The passes. Lane constants: the (token, row) whose sum this lane holds
  // after the butterfly, and whether it writes it.
  constexpr int kM = kT * kFusedRows;
  const int v = summed_index<kM>(lane);
  const bool writer = sum_writer<kM>(lane);
  float* acc_out = sAcc + (v / kFusedRows) * P + w + kFusedWarps * (v % kFusedRows);
  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * H + h) * P * kN + w * kN + 4 * lane : nullptr;
  const float decay_f = f > 0 ? expf(sL[f - 1]) : 0.0f;
  // A fold's pass: the rows scaled to the fold's position, its entries
  // added two at a time (U and B hold zeros past f), then stored.
  auto fold_pass = [&](TileT& cur, int q) {
#pragma unroll
    for (int r = 0; r < kFusedRows; ++r)
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) cur.v[r][j][e] *= decay_f;
    const float* u0 = sU + (q * kFusedPass + w) * W4;
    for (int s0 = 0; s0 < fe; s0 += 2) {
      float u[kFusedRows][2];
#pragma unroll
      for (int r = 0; r < kFusedRows; ++r) {
        const float2 x = *reinterpret_cast<const float2*>(u0 + r * kFusedWarps * W4 + s0);
        u[r][0] = x.x, u[r][1] = x.y;
      }
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        float Bc[kJ][4];
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
          const float4 x = *reinterpret_cast<const float4*>(sB + (s0 + k) * kN + 128 * j + 4 * lane);
          Bc[j][0] = x.x, Bc[j][1] = x.y, Bc[j][2] = x.z, Bc[j][3] = x.w;
        }
#pragma unroll
        for (int r = 0; r < kFusedRows; ++r)
#pragma unroll
          for (int j = 0; j < kJ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) cur.v[r][j][e] += u[r][k] * Bc[j][e];
      }
    }
    float* o = Sf + int64_t(q) * kFusedPass * kN;
#pragma unroll
    for (int r = 0; r < kFusedRows; ++r)
#pragma unroll
      for (int j = 0; j < kJ; ++j)
        *reinterpret_cast<float4*>(o + r * kFusedWarps * kN + 128 * j) =
            make_float4(cur.v[r][j][0], cur.v[r][j][1], cur.v[r][j][2], cur.v[r][j][3]);
  };
  auto pass = [&](TileT& cur, int q) {
    float acc[kM];
#pragma unroll
    for (int t = 0; t < kT; ++t) {
      float Cc[kJ][4];
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const float4 x = *reinterpret_cast<const float4*>(sC + t * kN + 128 * j + 4 * lane);
        Cc[j][0] = x.x, Cc[j][1] = x.y, Cc[j][2] = x.z, Cc[j][3] = x.w;
      }
#pragma unroll
      for (int r = 0; r < kFusedRows; ++r) {
        float d = 0.0f;
#pragma unroll
        for (int j = 0; j < kJ; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) d += cur.v[r][j][e] * Cc[j][e];
        acc[t * kFusedRows + r] = d;
      }
    }
    transposed_sums<kM>(acc, lane);
    if (writer) acc_out[q * kFusedPass] = acc[0];
    if constexpr (kFold)
      if (f > 0) fold_pass(cur, q);  // block-uniform
  };
  // Two tiles in turn, the next pass in flight during each (no copies
  // between them).
  for (int q = 0; q < passes; q += 2) {
    if (q + 1 < passes) load(t1, q + 1);
    pass(t0, q);
    if (q + 1 >= passes) break;
    if (q + 2 < passes) load(t0, q + 2);
    pass(t1, q + 1);
  }
  __syncthreads();

  for (int p = threadIdx.x; p < P; p += blockDim.x)
#pragma unroll
    for (int t = 0; t < kT; ++t)
      if (t < T) put_bf(a.y, ((r0 + t) * H + h) * P + p, sDec[t] * sAcc[t * P + p] + sY[t * P + p]);
}

template <int kJ, int kT>
cudaError_t launch_fused(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  auto go = [&](auto kernel, bool fold) {
    const size_t shm = sizeof(float) * size_t(fused_layout(kT, 128 * kJ, fold, a.W, a.P).total);
    if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
    launch_kernel(kernel, dim3(a.H / a.G, a.G, a.batch), 32 * kFusedWarps, shm, stream, a);
    return cudaGetLastError();
  };
  if (a.pages.page != nullptr)
    return a.fold != nullptr ? go(mamba2_replay_fused_kernel<kJ, kT, true, true>, true)
                             : go(mamba2_replay_fused_kernel<kJ, kT, false, true>, false);
  return a.fold != nullptr ? go(mamba2_replay_fused_kernel<kJ, kT, true, false>, true)
                           : go(mamba2_replay_fused_kernel<kJ, kT, false, false>, false);
}

}  // namespace

bool mamba2_replay_fused_fits(const Mamba2DecodeArgs& a) {
  const int kT = a.T == 1 ? 1 : 4;
  const size_t shm = sizeof(float) * size_t(fused_layout(kT, a.N, a.fold != nullptr, a.W, a.P).total);
  return a.group_start == nullptr && !a.exact && (a.N == 128 || a.N == 256) && a.P % kFusedPass == 0 && a.T <= 4 &&
         (a.tile_rows == 0 || a.tile_rows == kFusedRows) && aligned_to(a.state, 16) && aligned_to(a.log_B, 16) &&
         aligned_to(a.log_x, 16) && aligned_to(a.Cm, 16) && shm <= 227 * 1024;
}

cudaError_t mamba2_replay_fused(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  if (a.N == 128) return a.T == 1 ? launch_fused<1, 1>(a, stream) : launch_fused<1, 4>(a, stream);
  return a.T == 1 ? launch_fused<2, 1>(a, stream) : launch_fused<2, 4>(a, stream);
}

}  // namespace replayssm::ops::cuda
