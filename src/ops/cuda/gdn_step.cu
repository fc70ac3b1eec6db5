// Gated DeltaNet standard decode (see gdn_decode.h). One block per (value
// head, sequence) streams the state's rows (the next pass in flight while
// one computes) into shared memory while summing Sᵀk, so the update — which
// needs all of Sᵀk first — reads the rows from shared memory: the state is
// read from DRAM once and written once per token. Small batches, and heads
// whose state does not fit in shared memory, use gdn_step_sliced.cu.
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

cudaError_t gdn_step_sliced(const GdnDecodeArgs& a, cudaStream_t stream);

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

template <typename TileT>
__global__ void __launch_bounds__(32 * kGdnStepWarps) gdn_step_kernel(GdnDecodeArgs a) {
  const int h = blockIdx.x, b = blockIdx.y, kh = h / (a.Hv / a.Hk);
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dk = a.dk, dv = a.dv, T = a.T, pass_rows = nw * TileT::kRows;
  const int K4 = (dk + 3) & ~3, V4 = (dv + 3) & ~3;
  extern __shared__ float shm[];   // every array a multiple of 4 floats from the start: 16-byte aligned
  float* sS = shm;                 // (dk, dv) the state rows
  float* sRed = sS + dk * V4;      // (nw, dv) per-warp column partials
  float* sU = sRed + nw * V4;      // (dv) mem, then u, then o
  float* sQ = sU + V4;             // (T, dk)
  float* sK = sQ + T * K4;         // (T, dk)
  float* sV = sK + T * K4;         // (T, dv)
  float* sGB = sV + T * V4;        // (T, 2): e^g, β

  const float* src = a.state + (int64_t(a.slot[b]) * a.Hv + h) * dk * dv;
  TileT cur;
  cur.load(src, min(pass_rows, dk), dv, dv, w, nw, lane);
  load_bf_rows(sQ, a.q + (int64_t(b) * T * a.Hk + kh) * dk, T, dk, int64_t(a.Hk) * dk, K4);
  load_bf_rows(sK, a.k + (int64_t(b) * T * a.Hk + kh) * dk, T, dk, int64_t(a.Hk) * dk, K4);
  load_bf_rows(sV, a.v + (int64_t(b) * T * a.Hv + h) * dv, T, dv, int64_t(a.Hv) * dv, V4);
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    sGB[2 * t] = expf(a.g[(int64_t(b) * T + t) * a.Hv + h]);
    sGB[2 * t + 1] = a.beta[(int64_t(b) * T + t) * a.Hv + h];
  }
  for (int i = threadIdx.x; i < nw * V4; i += blockDim.x) sRed[i] = 0.0f;
  __syncthreads();

  auto reduce_into_sU = [&] {
    __syncthreads();
    for (int c = threadIdx.x; c < dv; c += blockDim.x) {
      float s = 0.0f;
      for (int k = 0; k < nw; ++k) s += sRed[k * V4 + c], sRed[k * V4 + c] = 0.0f;
      sU[c] = s;
    }
    __syncthreads();
  };

  // Token 0 streams the rows from global memory into shared memory; later
  // tokens (verify) find them there.
  for (int t = 0; t < T; ++t) {
    const float alpha = sGB[2 * t], beta = sGB[2 * t + 1];
    // mem = (αS)ᵀk
    for (int p0 = 0; p0 < dk; p0 += pass_rows) {
      const int rows = min(pass_rows, dk - p0);
      if (t == 0) {
        TileT nxt;
        if (p0 + pass_rows < dk) nxt.load(src + int64_t(p0 + pass_rows) * dv, min(pass_rows, dk - p0 - pass_rows), dv, dv, w, nw, lane);
        cur.store(sS + p0 * V4, rows, dv, V4, w, nw, lane);
        float part[TileT::kColChunks][TileT::kVec] = {};
#pragma unroll
        for (int r = 0; r < TileT::kRows; ++r) {
          const int i = TileT::row(w, nw, r);
          const float ki = i < rows ? alpha * sK[t * K4 + p0 + i] : 0.0f;
#pragma unroll
          for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
            for (int e = 0; e < TileT::kVec; ++e) part[j][e] += cur.v[r][j][e] * ki;
        }
        add_partials<TileT>(sRed + w * V4, part, dv, lane);
        cur = nxt;
      } else {
        TileT rowsv;
        rowsv.load(sS + p0 * V4, rows, dv, V4, w, nw, lane);
        float part[TileT::kColChunks][TileT::kVec] = {};
#pragma unroll
        for (int r = 0; r < TileT::kRows; ++r) {
          const int i = TileT::row(w, nw, r);
          const float ki = i < rows ? alpha * sK[t * K4 + p0 + i] : 0.0f;
#pragma unroll
          for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
            for (int e = 0; e < TileT::kVec; ++e) part[j][e] += rowsv.v[r][j][e] * ki;
        }
        add_partials<TileT>(sRed + w * V4, part, dv, lane);
      }
    }
    reduce_into_sU();
    for (int c = threadIdx.x; c < dv; c += blockDim.x) sU[c] = (sV[t * V4 + c] - sU[c]) * beta;
    __syncthreads();
    // S ← αS + k·uᵀ (kept in shared memory for the next token, written out);
    // o = Sᵀq
    float Uc[TileT::kColChunks][TileT::kVec];
    TileT::columns(sU, dv, lane, Uc);
    float* dst = a.state + (int64_t(a.out_slot[b * T + t]) * a.Hv + h) * dk * dv;
    for (int p0 = 0; p0 < dk; p0 += pass_rows) {
      const int rows = min(pass_rows, dk - p0);
      TileT rowsv;
      rowsv.load(sS + p0 * V4, rows, dv, V4, w, nw, lane);
      float part[TileT::kColChunks][TileT::kVec] = {};
#pragma unroll
      for (int r = 0; r < TileT::kRows; ++r) {
        const int i = TileT::row(w, nw, r);
        const float ki = i < rows ? sK[t * K4 + p0 + i] : 0.0f, qi = i < rows ? sQ[t * K4 + p0 + i] : 0.0f;
#pragma unroll
        for (int j = 0; j < TileT::kColChunks; ++j)
#pragma unroll
          for (int e = 0; e < TileT::kVec; ++e) {
            const float v = rowsv.v[r][j][e] * alpha + ki * Uc[j][e];
            rowsv.v[r][j][e] = v;
            part[j][e] += v * qi;
          }
      }
      rowsv.store(dst + int64_t(p0) * dv, rows, dv, dv, w, nw, lane);
      if (t + 1 < T) rowsv.store(sS + p0 * V4, rows, dv, V4, w, nw, lane);
      add_partials<TileT>(sRed + w * V4, part, dv, lane);
    }
    reduce_into_sU();
    for (int c = threadIdx.x; c < dv; c += blockDim.x) put_bf(a.o, ((int64_t(b) * T + t) * a.Hv + h) * dv + c, sU[c]);
    __syncthreads();  // sU is reused by the next token
  }
}

}  // namespace

cudaError_t gdn_step_cuda(const GdnDecodeArgs& a, cudaStream_t stream) {
  if (a.batch == 0) return cudaSuccess;
  if (a.batch < 0 || a.Hk <= 0 || a.Hv % a.Hk != 0 || a.dk < 1 || a.dv < 1 || a.T < 1 || a.T > kGdnMaxT ||
      a.variant < 0 || a.variant > 2)
    return cudaErrorInvalidValue;
  const int K4 = (a.dk + 3) & ~3, V4 = (a.dv + 3) & ~3, nw = kGdnStepWarps;
  const size_t shm = sizeof(float) * (size_t(a.dk) * V4 + nw * V4 + V4 + 2 * a.T * K4 + a.T * V4 + 2 * a.T);
  // Every refusal before the device is asked anything.
  const bool fits = shm <= kGdnStepMaxShm && a.dv <= kMaxTileCols, sliced_fits = a.dk <= 512;
  if ((a.variant == 1 && !fits) || (a.variant == 2 && !sliced_fits) || (!fits && !sliced_fits))
    return cudaErrorInvalidValue;
  int dev = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
  // The same variant choice as the replay kernel (variant), plus:
  // heads too large for shared memory take the sliced kernel.
  const bool small = int64_t(a.batch) * a.Hv < sms;
  if (a.variant == 2 || !fits || (a.variant == 0 && small)) return gdn_step_sliced(a, stream);
  return with_row_slice_tile<4>(a.dv, [&](auto tag) {
    using TileT = decltype(tag);
    if (cudaError_t e = allow_dynamic_smem(gdn_step_kernel<TileT>, shm); e != cudaSuccess) return e;
    gdn_step_kernel<TileT><<<dim3(a.Hv, a.batch), 32 * nw, shm, stream>>>(a);
    return cudaGetLastError();
  });
}

}  // namespace replayssm::ops::cuda
