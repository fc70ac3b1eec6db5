// Mamba2 replay, the split path's per-head pass on tensor cores: the same
// math as mamba2_replay_kernel<…, true> (mamba2_replay.cu), the same
// scratch from mamba2_replay_log, but the two products that touch every
// state element — the outputs' S_c·C_t and a fold's Σ_s F_s·x_s ⊗ B_s — are
// TF32 mma at fp32 accuracy (mma_tf32.cuh) instead of FMAs and butterflies.
// The launcher takes it for fork groups (up to 8 outputs a block, where the
// FMA pass spends a butterfly per 4 outputs); for plain decoding, verify
// and the fold step the FMA pass measured faster on the H200 (docs/perf:
// those are not bound by their FMAs, and this kernel reads the state by
// 16-row tiles, 128 bytes of a row at a time).
//
// A block of 4 warps per (head, fork group); warp w takes the head's 16-row
// tiles w, w + 4, … and streams each in passes of 16·kB columns, the next
// pass loading while this one computes. As on the FMA path, the PDL wait
// comes only at a warp's last pass (the kernel before writes only the
// scratch, read last). The outputs' accumulators live across a tile's
// passes; a fold rewrites each pass in registers and stores it, so the
// flush costs one state write.
#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_replay_scratch.cuh"
#include "ops/cuda/mma_tf32.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

// The log's part of y and the decays into scratch (mamba2_replay_log.cu).
cudaError_t mamba2_replay_log(const Mamba2DecodeArgs& a, cudaStream_t stream);

namespace {

constexpr int kWarps = 4;
constexpr int kMaxOut = 8;  // outputs of a block: one n8 tile of the product

// A warp's part of a pass: rows r0 + g + 8h (h < 2) × columns
// c0 + 16j + 4t + e (j < kB, e < 4), lane 4g + t, one 16-byte load per row
// and 16 columns. In the outputs' product 16 columns are two k8 steps
// (step q: k t ↔ column 4t + 2q, k t + 4 ↔ 4t + 2q + 1); in the fold's they
// are two n8 tiles (tile s: col 2t + e ↔ column 4t + 2s + e), so a fold's
// accumulators are the state's own registers.
template <int kB>
struct MmaRows {
  float v[2][kB][4];

  __device__ void load(const float* S, int P, int N, int r0, int c0, int g, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const int r = r0 + g + 8 * h, c = c0 + 16 * j + 4 * t;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (r < P && c < N) x = *reinterpret_cast<const float4*>(S + int64_t(r) * N + c);
        v[h][j][0] = x.x, v[h][j][1] = x.y, v[h][j][2] = x.z, v[h][j][3] = x.w;
      }
  }
  __device__ void store(float* S, int P, int N, int r0, int c0, int g, int t) const {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const int r = r0 + g + 8 * h, c = c0 + 16 * j + 4 * t;
        if (r < P && c < N)
          *reinterpret_cast<float4*>(S + int64_t(r) * N + c) = make_float4(v[h][j][0], v[h][j][1], v[h][j][2], v[h][j][3]);
      }
  }
};

// Shared-memory strides: ≡ 16 (mod 32) floats, so the two rows a quarter
// warp reads with 16-byte loads fall in different banks.
__host__ __device__ constexpr int stride16(int n) { return n % 32 == 0 ? n + 16 : n; }
__host__ __device__ constexpr int round16(int n) { return (n + 15) & ~15; }
// Row stride of the fold rows F_s·x_s[p] for up to Fm entries (0: no fold).
__host__ __device__ constexpr int fold_ld(int Fm) { return Fm > 0 ? stride16(round16(Fm)) : 0; }

// kPaged: the log's rows through the block table (Mamba2DecodeArgs::pages).
template <int kB, int kMinBlocks, bool kPaged>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocks) mamba2_replay_mma_kernel(Mamba2DecodeArgs a) {
  const int h = blockIdx.x, grp = h / (a.H / a.G);
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int P = a.P, N = a.N, T = a.T, W = a.W;
  const ReplayGroup fg = replay_group(a, blockIdx.y);  // as mamba2_replay_kernel's
  if (fg.members <= 0) return pdl_leave();             // an empty group (block-uniform)
  const int first = fg.first, members = fg.members, b = fg.b, n_out = members * T;
  // Member m's first row of Cm and y (decode_rows.cuh; a row map has no groups).
  auto first_row = [&](int m) { return decode_row0(a.row, replay_seq(a, first + m), T); };
  const int n_log = min(max(a.n_log[b], T), W);
  const int f = a.fold != nullptr && fg.alone ? min(max(a.fold[b], 0), min(n_log, a.max_fold)) : 0;
  const int tiles = (P + 15) / 16, passes = (N + 16 * kB - 1) / (16 * kB);
  const int tasks = w < tiles ? ((tiles - 1 - w) / kWarps + 1) * passes : 0;  // (tile, pass) pairs of this warp
  auto r0_of = [&](int k) { return 16 * (w + kWarps * (k / passes)); };
  auto c0_of = [&](int k) { return 16 * kB * (k % passes); };

  // Shared memory (every array a multiple of 4 floats from the start).
  const int P4 = (P + 3) & ~3, N4 = (N + 3) & ~3, ldc = stride16(N);
  const int Fm = a.max_fold, F4 = (Fm + 3) & ~3, ldu = fold_ld(Fm);
  const int ldb = N4 + 1, ldx = P4 + 1;  // staging rows read a column at a time: odd strides
  extern __shared__ float shm[];
  int64_t* sYoff = reinterpret_cast<int64_t*>(shm);  // (kMaxOut)
  float* sC = shm + 2 * kMaxOut;                      // (kMaxOut, ldc) C of each output's token, 0 past n_out
  float* sDecay = sC + kMaxOut * ldc;                 // (kMaxOut) e^{L_t}
  float* sY = sDecay + kMaxOut;                       // (n_out, P4) the log's part of y, with D·x
  float* sB = sY + n_out * P4;                        // (Fm, ldb) B_s, the fold's staging
  float* sX = sB + ((Fm * ldb + 3) & ~3);             // (Fm, ldx) x_s, the fold's staging
  float* sL = sX + ((Fm * ldx + 3) & ~3);             // (Fm) L_s
  float* sDt = sL + F4;                               // (Fm) dt_s
  float* sF = sDt + F4;                               // (Fm) fold coefficients e^{L_{f−1}−L_s}·dt_s
  float* sU = sF + F4;                                // (P, ldu) F_s·x_s[p], 0 for s ≥ f
  float* sBt = sU + P * ldu;                          // (F16 / 16, N, 16) B_s[n] by 16 entries, 0 for s ≥ f
  float* sAcc = sBt + round16(Fm) * N;                // (n_out, P4) S_c·C_t

  const float* S = a.state + (int64_t(a.slot[b]) * a.H + h) * P * N;
  MmaRows<kB> cur;
  if (tasks > 0) cur.load(S, P, N, r0_of(0), c0_of(0), g, t);
  // A sequence not in this launch (a row map's −1; block-uniform) returns
  // only once its first pass is requested: the map's load stays off that path.
  if (first_row(0) < 0) return pdl_leave();
  if (a.release_early) pdl_release();
  // The scratch comes from the kernel just before: requested once by
  // every thread, at its warp's last pass.
  auto request_scratch = [&] { request_replay_scratch(a, first, h, n_out, sY, sDecay, P4); };

  // The staging below repeats mamba2_replay_kernel's with this kernel's
  // strides. Shared through one inline function it left that file's N > 128
  // and N % 4 ≠ 0 tiles 22–32 registers more (ptxas: 94 → 116, 96 → 128).
  const float A = -expf(a.A_log[h]);
  if constexpr (kPaged) {
    const PagedLog pl = paged_log(a.pages, b);
    for (int s = threadIdx.x; s < f; s += blockDim.x) {
      const float dt = a.log_dt[pl.row(s) * a.H + h];
      sDt[s] = dt;
      sL[s] = dt * A;
    }
    load_bf_rows_at(sB, a.log_B + int64_t(grp) * N, PagedRows{pl, 0}, f, N, int64_t(a.G) * N, ldb);
    load_bf_rows_at(sX, a.log_x + int64_t(h) * P, PagedRows{pl, 0}, f, P, int64_t(a.H) * P, ldx);
  } else {
    for (int s = threadIdx.x; s < f; s += blockDim.x) {
      const float dt = a.log_dt[(int64_t(b) * W + s) * a.H + h];
      sDt[s] = dt;
      sL[s] = dt * A;
    }
    load_bf_rows(sB, a.log_B + (int64_t(b) * W * a.G + grp) * N, f, N, int64_t(a.G) * N, ldb);
    load_bf_rows(sX, a.log_x + (int64_t(b) * W * a.H + h) * P, f, P, int64_t(a.H) * P, ldx);
  }
  for (int m = 0; m < members; ++m)
    load_bf_rows(sC + m * T * ldc, a.Cm + (first_row(m) * a.G + grp) * N, T, N, int64_t(a.G) * N, ldc);
  for (int i = n_out * ldc + threadIdx.x; i < kMaxOut * ldc; i += blockDim.x) sC[i] = 0.0f;
  for (int u = threadIdx.x; u < n_out; u += blockDim.x)
    sYoff[u] = ((first_row(u / T) + u % T) * a.H + h) * P;
  __syncthreads();
  const int f16 = round16(f);
  if (f > 0) {  // block-uniform: the fold's operands, once per block
    if (w == 0) warp_prefix_sum(sL, f, lane);
    __syncthreads();
    for (int s = threadIdx.x; s < f; s += blockDim.x) sF[s] = expf(sL[f - 1] - sL[s]) * sDt[s];
    __syncthreads();
    for (int i = threadIdx.x; i < P * f16; i += blockDim.x) {
      const int p = i / f16, s = i % f16;
      sU[p * ldu + s] = s < f ? sF[s] * sX[s * ldx + p] : 0.0f;
    }
    for (int i = threadIdx.x; i < f16 * N; i += blockDim.x) {
      const int m = i / (16 * N), n = i / 16 % N, s = 16 * m + i % 16;
      sBt[i] = s < f ? sB[s * ldb + n] : 0.0f;
    }
    __syncthreads();
  }

  float* Sf = f > 0 ? a.state + (int64_t(a.fold_slot[b]) * a.H + h) * P * N : nullptr;
  const float decay_f = f > 0 ? expf(sL[f - 1]) : 1.0f;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k = 0; k < tasks; ++k) {
    const int r0 = r0_of(k), c0 = c0_of(k);
    MmaRows<kB> nxt;
    if (k + 1 < tasks) nxt.load(S, P, N, r0_of(k + 1), c0_of(k + 1), g, t);
    else request_scratch();
    // Outputs: acc (16 rows × 8 outputs) += S_c[rows, cols]·C[outputs, cols]ᵀ.
#pragma unroll
    for (int j = 0; j < kB; ++j) {
      if (c0 + 16 * j >= N) break;  // block-uniform
      const float4 c = *reinterpret_cast<const float4*>(sC + g * ldc + c0 + 16 * j + 4 * t);
      mma_f32_split(acc, cur.v[0][j][0], cur.v[1][j][0], cur.v[0][j][1], cur.v[1][j][1], c.x, c.y);
      mma_f32_split(acc, cur.v[0][j][2], cur.v[1][j][2], cur.v[0][j][3], cur.v[1][j][3], c.z, c.w);
    }
    if (c0 + 16 * kB >= N) {  // the tile's last pass: acc[i] is row g + 8(i/2), output 2t + i%2
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = r0 + g + 8 * (i >> 1), u = 2 * t + (i & 1);
        if (u < n_out && row < P) sAcc[u * P4 + row] = acc[i];
        acc[i] = 0.0f;
      }
    }
    if (f > 0) {  // block-uniform: S ← e^{L_{f−1}}·S_c + U·Bᵀ, U (rows × entries) in fp32 split, B exact
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int j = 0; j < kB; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) cur.v[hh][j][e] *= decay_f;
      const int ra = min(r0 + g, P - 1), rb = min(r0 + g + 8, P - 1);  // rows past P are never stored
      for (int m = 0; m < f16 / 16; ++m) {
        const float4 ua = *reinterpret_cast<const float4*>(sU + ra * ldu + 16 * m + 4 * t);
        const float4 ub = *reinterpret_cast<const float4*>(sU + rb * ldu + 16 * m + 4 * t);
        // k step q: k t ↔ entry 16m + 4t + 2q, k t + 4 ↔ 16m + 4t + 2q + 1.
        const Tf32Pair u0 = tf32_split(ua.x), u1 = tf32_split(ub.x), u2 = tf32_split(ua.y),
                       u3 = tf32_split(ub.y);
        const Tf32Pair u4 = tf32_split(ua.z), u5 = tf32_split(ub.z), u6 = tf32_split(ua.w),
                       u7 = tf32_split(ub.w);
#pragma unroll
        for (int j = 0; j < kB; ++j) {
          if (c0 + 16 * j >= N) break;  // block-uniform
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            // This lane's B column of n8 tile s: col g ↔ column 4(g/2) + 2s + g%2.
            const int col = c0 + 16 * j + 4 * (g >> 1) + 2 * s + (g & 1);
            const float4 bv = *reinterpret_cast<const float4*>(sBt + (m * N + col) * 16 + 4 * t);
            float d[4] = {cur.v[0][j][2 * s], cur.v[0][j][2 * s + 1], cur.v[1][j][2 * s], cur.v[1][j][2 * s + 1]};
            mma_tf32(d, u0.hi, u1.hi, u2.hi, u3.hi, bv.x, bv.y);
            mma_tf32(d, u0.lo, u1.lo, u2.lo, u3.lo, bv.x, bv.y);
            mma_tf32(d, u4.hi, u5.hi, u6.hi, u7.hi, bv.z, bv.w);
            mma_tf32(d, u4.lo, u5.lo, u6.lo, u7.lo, bv.z, bv.w);
            cur.v[0][j][2 * s] = d[0], cur.v[0][j][2 * s + 1] = d[1];
            cur.v[1][j][2 * s] = d[2], cur.v[1][j][2 * s + 1] = d[3];
          }
        }
      }
      cur.store(Sf, P, N, r0, c0, g, t);
    }
    cur = nxt;
  }
  if (tasks == 0) request_scratch();
  write_replay_outputs(a, sYoff, sDecay, sAcc, sY, n_out, P4);
}

}  // namespace

bool mamba2_replay_mma_fits(const Mamba2DecodeArgs& a) {
  const int n_out = (a.group_start != nullptr ? a.max_group : 1) * a.T;
  return a.N % 16 == 0 && n_out <= kMaxOut;
}

cudaError_t mamba2_replay_mma(const Mamba2DecodeArgs& a, cudaStream_t stream) {
  if (!mamba2_replay_mma_fits(a)) return cudaErrorNotSupported;
  if (cudaError_t e = mamba2_replay_log(a, stream); e != cudaSuccess) return e;
  const int n_out = (a.group_start != nullptr ? a.max_group : 1) * a.T;
  const int P4 = (a.P + 3) & ~3, N4 = (a.N + 3) & ~3, Fm = a.max_fold, F4 = (Fm + 3) & ~3, F16 = round16(Fm);
  const size_t floats = 2 * kMaxOut + size_t(kMaxOut) * stride16(a.N) + kMaxOut + size_t(n_out) * P4 +
                        ((Fm * (N4 + 1) + 3) & ~3) + ((Fm * (P4 + 1) + 3) & ~3) + 3 * F4 +
                        size_t(a.P) * fold_ld(Fm) + size_t(F16) * a.N + size_t(n_out) * P4;
  const int blocks_y = a.group_start != nullptr ? a.n_groups : a.batch;
  // 32 columns a pass, 6 blocks an SM (80 registers): the fastest of 64
  // columns at 4 or 5 blocks (128 and 96 registers, both spilling) and 32
  // unbounded (94) on the H200's beams (docs/perf).
  auto kernel = a.pages.page != nullptr ? mamba2_replay_mma_kernel<2, 6, true> : mamba2_replay_mma_kernel<2, 6, false>;
  if (cudaError_t e = allow_dynamic_smem(kernel, floats * sizeof(float)); e != cudaSuccess) return e;
  launch_kernel(kernel, dim3(a.H, blocks_y), 32 * kWarps, floats * sizeof(float), stream, a);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
