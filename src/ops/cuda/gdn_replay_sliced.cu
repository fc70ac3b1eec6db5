// Gated DeltaNet replay decode, the small-batch variant (see gdn_decode.h
// and gdn_replay.cu): one block per (value head, sequence, slice of 32
// columns), as in gdn_step.cu, so a batch of one still spreads over the
// device (measured on the H200: 1.19× the column-sliced standard step at
// batch 1, where the streaming kernel's 32 blocks give 0.64×; docs/perf).
// Where dk ≤ 128 the register-resident warps (gdn_step_warps.cu) now take
// small batches, fast replay and standard step alike (50211f1); this
// kernel stands for taller keys and values too wide for one wave of
// those warps. Dual form, with
// G_s = Σ_{r≤s} g_r from the checkpoint:
//   mem_t = e^{G_t}·S_cᵀk_t + Σ_{s<t} e^{G_t−G_s}(k_s·k_t)·u_s ;  u_t = β_t(v_t − mem_t)
//   o_t   = e^{G_t}·S_cᵀq_t + Σ_{s≤t} e^{G_t−G_s}(k_s·q_t)·u_s
//   fold f: S ← e^{G_{f−1}}·S_c + Σ_{s<f} e^{G_{f−1}−G_s}·k_s·u_sᵀ
// The checkpoint slice is read once, into registers, in the same round as
// the log; S_cᵀk_t and S_cᵀq_t are its only uses besides the fold.
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/decode_rows.cuh"
#include "ops/cuda/gdn_token.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

// kPaged: the log's rows through the block table (GdnDecodeArgs::pages).
template <typename TileT, bool kPaged>
__global__ void __launch_bounds__(512) gdn_replay_sliced_kernel(GdnDecodeArgs a) {
  constexpr int kS = kColumnSlice;
  const int h = blockIdx.x, b = blockIdx.y, kh = h / (a.Hv / a.Hk);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dk = a.dk, dv = a.dv, T = a.T, W = a.W, c0 = blockIdx.z * kS, cols = min(kS, dv - c0);
  const int64_t r0 = decode_row0(a.row, b, T);  // this sequence's first row of q, v, β, o (k, g, out_slot)
  if (r0 < 0) return pdl_leave();               // not in this launch (block-uniform)
  const GdnLogSpan span = gdn_log_span<true>(a, b);
  const int n_log = span.n_log, base = span.base, f = span.f;
  extern __shared__ float shm[];
  float* sG = shm;              // (W) G_s
  float* sF = sG + W;           // (W) fold coefficients e^{G_{f−1}−G_s}
  float* sK = sF + W;           // (W, dk) k_s
  float* sU = sK + W * dk;      // (W, 32) u_s of this slice (the new tokens' filled here)
  float* sQ = sU + W * kS;      // (T, dk)
  float* sV = sQ + T * dk;      // (T, 32)
  float* sBeta = sV + T * kS;   // (T)
  float* sKK = sBeta + T;       // (T, W) k_s·k_t
  float* sKQ = sKK + T * W;     // (T, W) k_s·q_t
  float* sSx = sKQ + T * W;     // (2T, 32) S_cᵀk_t, then S_cᵀq_t
  float* sRed = sSx + 2 * T * kS;  // (2T, nw, 32)

  // Everything read so far is the plan (slots, log lengths, folds, rows),
  // which no kernel writes (launch.cuh): read while the kernel before ends.
  pdl_begin();
  TileT tile;
  tile.load(a.state + (int64_t(a.slot[b]) * a.Hv + h) * dk * dv + c0, dk, cols, dv, w, nw, lane);

  const PagedLog pl = paged_log_if<kPaged>(a.pages, b);  // the log's rows, kPaged
  if constexpr (kPaged) {
    const PagedRows all{pl, 0};
    for (int s = threadIdx.x; s < n_log; s += blockDim.x) sG[s] = a.log_g[pl.row(s) * a.Hv + h];
    load_bf_rows_at(sK, a.log_k + int64_t(kh) * dk, all, n_log, dk, int64_t(a.Hk) * dk);
    load_bf_rows(sQ, a.q + (r0 * a.Hk + kh) * dk, T, dk, int64_t(a.Hk) * dk);
    if (cols == kS) {
      load_f32_rows_at(sU, a.log_u + int64_t(h) * dv + c0, all, base, kS, int64_t(a.Hv) * dv);
    } else {
      for (int i = threadIdx.x; i < base * kS; i += blockDim.x)
        sU[i] = i % kS < cols ? a.log_u[(pl.row(i / kS) * a.Hv + h) * dv + c0 + i % kS] : 0.0f;
    }
  } else {
    for (int s = threadIdx.x; s < n_log; s += blockDim.x) sG[s] = a.log_g[(int64_t(b) * W + s) * a.Hv + h];
    load_bf_rows(sK, a.log_k + (int64_t(b) * W * a.Hk + kh) * dk, n_log, dk, int64_t(a.Hk) * dk);
    load_bf_rows(sQ, a.q + (r0 * a.Hk + kh) * dk, T, dk, int64_t(a.Hk) * dk);
    if (cols == kS) {
      load_f32_rows(sU, a.log_u + (int64_t(b) * W * a.Hv + h) * dv + c0, base, kS, int64_t(a.Hv) * dv);
    } else {
      for (int i = threadIdx.x; i < base * kS; i += blockDim.x)
        sU[i] = i % kS < cols ? a.log_u[((int64_t(b) * W + i / kS) * a.Hv + h) * dv + c0 + i % kS] : 0.0f;
    }
  }
  for (int i = threadIdx.x; i < T * kS; i += blockDim.x)
    sV[i] = i % kS < cols ? bf(a.v, ((r0 + i / kS) * a.Hv + h) * dv + c0 + i % kS) : 0.0f;
  for (int t = threadIdx.x; t < T; t += blockDim.x) sBeta[t] = a.beta[(r0 + t) * a.Hv + h];
  __syncthreads();
  if (w == 0) warp_prefix_sum(sG, n_log, lane);

  // Key dots, one warp per (token, entry) pair.
  for (int kx = w; kx < T * n_log; kx += nw) {
    const int t = kx / n_log, s = kx % n_log;
    if (s > base + t) continue;  // warp-uniform
    float dkk = 0.0f, dkq = 0.0f;
    for (int i = lane; i < dk; i += 32) {
      dkk += sK[s * dk + i] * sK[(base + t) * dk + i];
      dkq += sK[s * dk + i] * sQ[t * dk + i];
    }
    dkk = warp_sum(dkk), dkq = warp_sum(dkq);
    if (lane == 0) sKK[t * W + s] = dkk, sKQ[t * W + s] = dkq;
  }

  // S_cᵀk_t and S_cᵀq_t from the registers (the barrier inside also
  // publishes sG and the key dots).
  column_sums(2 * T, [&](int q) {
    const float* x = q < T ? sK + (base + q) * dk : sQ + (q - T) * dk;
    float part = 0.0f;
#pragma unroll
    for (int r = 0; r < TileT::kRows; ++r) {
      const int i = TileT::row(w, nw, r);
      if (i < dk) part += tile.v[r][0][0] * x[i];
    }
    return part;
  }, sRed, sSx, nw, w, lane);

  if (f > 0) {  // block-uniform
    const float decay = expf(sG[f - 1]);
#pragma unroll
    for (int r = 0; r < TileT::kRows; ++r) {
      const int i = min(TileT::row(w, nw, r), dk - 1);  // rows past dk are never stored
      float v = tile.v[r][0][0] * decay;
      for (int s = 0; s < f; ++s) v += expf(sG[f - 1] - sG[s]) * sK[s * dk + i] * sU[s * kS + lane];
      tile.v[r][0][0] = v;
    }
    tile.store(a.state + (int64_t(a.fold_slot[b]) * a.Hv + h) * dk * dv + c0, dk, cols, dv, w, nw, lane);
  }

  // The new tokens in order, one thread per column: u_t is written and
  // later read by the same thread.
  if (threadIdx.x >= cols) return;
  const int c = threadIdx.x;
  for (int t = 0; t < T; ++t) {
    const int tt = base + t;
    const float Gt = sG[tt];
    float mem = expf(Gt) * sSx[t * kS + c], out = expf(Gt) * sSx[(T + t) * kS + c];
    for (int s = 0; s < tt; ++s) {
      const float d = expf(Gt - sG[s]) * sU[s * kS + c];
      mem += sKK[t * W + s] * d;
      out += sKQ[t * W + s] * d;
    }
    const float u = (sV[t * kS + c] - mem) * sBeta[t];
    sU[tt * kS + c] = u;
    if constexpr (kPaged) a.log_u[(pl.row(tt) * a.Hv + h) * dv + c0 + c] = u;
    else a.log_u[((int64_t(b) * W + tt) * a.Hv + h) * dv + c0 + c] = u;
    put_bf(a.o, ((r0 + t) * a.Hv + h) * dv + c0 + c, out + sKQ[t * W + tt] * u);
  }
}

}  // namespace

cudaError_t gdn_replay_sliced(const GdnDecodeArgs& a, cudaStream_t stream) {
  return with_column_slice_tile(a.dk, [&](auto tag, int nw) {
    using TileT = decltype(tag);
    constexpr int kS = kColumnSlice;
    const size_t shm = sizeof(float) * (2 * a.W + a.W * (a.dk + kS) + a.T * (a.dk + kS + 1) + 2 * a.T * a.W +
                                        2 * a.T * kS * (1 + nw));
    const int slices = (a.dv + kS - 1) / kS;
    auto go = [&](auto kernel) {
      if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
      launch_kernel(kernel, dim3(a.Hv, a.batch, slices), 32 * nw, shm, stream, a);
      return cudaGetLastError();
    };
    return a.pages.page != nullptr ? go(gdn_replay_sliced_kernel<TileT, true>)
                                   : go(gdn_replay_sliced_kernel<TileT, false>);
  });
}

}  // namespace replayssm::ops::cuda
