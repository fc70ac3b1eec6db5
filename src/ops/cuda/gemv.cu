// gemv_cuda (see gemv.h).
#include "ops/cuda/gemv.h"

#include <cuda_bf16.h>

#include <climits>

#include "ops/cuda/activation.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/norm_order.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kGemvWarps = 8;  // warps per block
// Two warps per output row whenever each still has a whole round of loads:
// over the 8B model's step that streamed at 94% of the read-only bandwidth,
// against 89% for one warp per row with four loads in flight and 71% for
// four warps (replayssm_gemv_bench, docs/perf).
constexpr int kGemvSplit = 2;

struct GemvArgs {
  const uint16_t* x = nullptr;  // (rows, n_in), row stride ldx
  int64_t ldx = 0;
  const uint16_t* w = nullptr;  // (n_out, n_in)
  int64_t n_out = 0, n_in = 0;
  const float* bias = nullptr;  // (n_out) or nullptr
  void* y = nullptr;            // (rows, n_out), row stride ldy, bf16 or fp32
  int64_t ldy = 0;
  bool y_fp32 = false;
  int split = 1;  // warps per output row (divides kGemvWarps)
  GemvEpilogue epi;  // read by the kEpi kernels only
};

// Eight bf16 of a 16-byte word, as fp32.
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(p[i]);
    f[2 * i] = t.x, f[2 * i + 1] = t.y;
  }
}

// W's row streams once: no point keeping it in L1.
__device__ __forceinline__ uint4 load_stream(const uint16_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The `split` warps of a row take its 16-byte words in turn (a round of
// loads covers split × 256 elements, contiguous across the warps), sum
// their part, and meet in shared memory.
template <int kRows, bool kVec, int kUnroll, bool kEpi>
__global__ void __launch_bounds__(32 * kGemvWarps) gemv_kernel(GemvArgs a) {
  __shared__ float part[kGemvWarps][kRows];
  const int lane = threadIdx.x % 32, wib = threadIdx.x / 32, S = a.split, s = wib % S;
  const int64_t o = int64_t(blockIdx.x) * (kGemvWarps / S) + wib / S, n_in = a.n_in;
  const bool live = o < a.n_out;
  const uint16_t* wr = a.w + (live ? o : 0) * n_in;
  const int64_t step = int64_t(S) * 256;
  int64_t i = (int64_t(s) * 32 + lane) * 8;
  // The first weight loads go out before the wait (launch.cuh): W is never
  // written by a step, so they overlap the kernel before, which at small
  // batch is a norm or a conv of a few µs.
  uint4 wv[kUnroll];
  const bool early = kVec && live && i + (kUnroll - 1) * step < n_in;
  if (early) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = load_stream(wr + i + u * step);
  }
  pdl_begin();
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  // x is written by the kernel before: plain loads, not the read-only path
  // (ld.global.nc assumes data constant for the kernel's whole life).
  auto x8 = [&](int r, int64_t c) { return *reinterpret_cast<const uint4*>(a.x + r * a.ldx + c); };
  auto dot8 = [&](const uint4& wq, int64_t c) {
    float wf[8];
    unpack8(wq, wf);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float xf[8];
      unpack8(x8(r, c), xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r] = fmaf(wf[e], xf[e], acc[r]);
    }
  };
  if (live && kVec) {  // n_in % 8 == 0, 16-byte aligned rows
    for (bool loaded = early; i + (kUnroll - 1) * step < n_in; i += kUnroll * step, loaded = false) {
      if (!loaded) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) wv[u] = load_stream(wr + i + u * step);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dot8(wv[u], i + u * step);
    }
    for (; i < n_in; i += step) dot8(load_stream(wr + i), i);
  } else if (live) {
    for (int64_t c = int64_t(s) * 32 + lane; c < n_in; c += int64_t(S) * 32) {
      const float wc = bf(wr, c);
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = fmaf(wc, bf(a.x, r * a.ldx + c), acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    acc[r] = warp_sum(acc[r]);
    if (S > 1 && lane == 0) part[wib][r] = acc[r];
  }
  if (S > 1) __syncthreads();
  const bool writer = live && s == 0 && lane == 0;
  if constexpr (!kEpi) {
    if (!writer) return;
    const float b = a.bias != nullptr ? a.bias[o] : 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float v = acc[r];
      for (int j = 1; j < S; ++j) v += part[wib + j][r];
      if (a.y_fp32) static_cast<float*>(a.y)[r * a.ldy + o] = v + b;
      else put_bf(static_cast<uint16_t*>(a.y), r * a.ldy + o, v + b);
    }
  } else {
    const GemvEpilogue& e = a.epi;
    uint16_t* y = static_cast<uint16_t*>(a.y);
    if (writer) {
      const float b = a.bias != nullptr ? a.bias[o] : 0.0f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float v = acc[r];
        for (int j = 1; j < S; ++j) v += part[wib + j][r];
        // y as the two-kernel path stores it (bf16), then what the next kernel did with it.
        const float yb = __bfloat162float(__float2bfloat16(v + b));
        if (e.has_act) {
          put_bf(y, r * a.ldy + o, activate_f(e.act, yb));
        } else {
          if (y != nullptr) put_bf(y, r * a.ldy + o, yb);
          e.residual[r * e.ld_residual + o] += yb;
        }
      }
    }
    if (e.norm_y == nullptr) return;
    // The last block to finish normalises the whole updated rows: every
    // block's residual writes are made visible before it counts itself.
    __shared__ int last;
    __shared__ float red[kMaxBlockWarps];
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(e.counter, 1) == int(gridDim.x) - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    residual_norm_rows<32 * kGemvWarps>(e.residual, e.ld_residual, kRows, int(a.n_out), e.norm_w, e.unit_offset, e.eps, e.norm_y,
                       e.ld_norm_y, red);
    if (threadIdx.x == 0) *e.counter = 0;
  }
}

template <int kRows, bool kEpi = false>
cudaError_t launch(const GemvArgs& a, bool vec, int unroll, cudaStream_t stream) {
  const unsigned blocks = unsigned((a.n_out + kGemvWarps / a.split - 1) / (kGemvWarps / a.split));
  const dim3 threads(32 * kGemvWarps);
  if (!vec) return launch_kernel(gemv_kernel<kRows, false, 4, kEpi>, blocks, threads, 0, stream, a);
  if (unroll == 8) return launch_kernel(gemv_kernel<kRows, true, 8, kEpi>, blocks, threads, 0, stream, a);
  return launch_kernel(gemv_kernel<kRows, true, 4, kEpi>, blocks, threads, 0, stream, a);
}

// Shapes and knobs, then the arguments every kernel takes (y set by the caller).
cudaError_t prepare(const uint16_t* x, int64_t ldx, int rows, const uint16_t* w, int64_t n_out, int64_t n_in,
                    const float* bias, int64_t ldy, const GemvTuning& tuning, GemvArgs* a, bool* vec, int* unroll) {
  if (rows < 0 || rows > kGemvMaxRows || n_out < 1 || n_in < 1 || ldx < n_in || ldy < n_out)
    return cudaErrorInvalidValue;
  if (tuning.split != 0 && tuning.split != 1 && tuning.split != 2 && tuning.split != 4 && tuning.split != 8)
    return cudaErrorInvalidValue;
  if (tuning.unroll != 0 && tuning.unroll != 4 && tuning.unroll != 8) return cudaErrorInvalidValue;
  if (rows > 0 && (x == nullptr || w == nullptr)) return cudaErrorInvalidValue;
  *vec = n_in % 8 == 0 && ldx % 8 == 0 && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w)) % 16 == 0;
  // Eight loads in flight per lane keep a lone warp streaming at the end of
  // the grid; past two rows the x registers would crowd them out.
  *unroll = tuning.unroll != 0 ? tuning.unroll : rows <= 2 ? 8 : 4;
  const int split = tuning.split != 0 ? tuning.split : n_in >= kGemvSplit * 256 * *unroll ? kGemvSplit : 1;
  if ((n_out * split + kGemvWarps - 1) / kGemvWarps > INT_MAX) return cudaErrorInvalidValue;
  a->x = x, a->ldx = ldx, a->w = w, a->n_out = n_out, a->n_in = n_in, a->bias = bias, a->ldy = ldy;
  a->split = split;
  return cudaSuccess;
}

}  // namespace

cudaError_t gemv_cuda(const uint16_t* x, int64_t ldx, int rows, const uint16_t* w, int64_t n_out, int64_t n_in,
                      const float* bias, void* y, int64_t ldy, bool y_fp32, cudaStream_t stream,
                      const GemvTuning& tuning) {
  GemvArgs a;
  bool vec = false;
  int unroll = 0;
  if (cudaError_t e = prepare(x, ldx, rows, w, n_out, n_in, bias, ldy, tuning, &a, &vec, &unroll); e != cudaSuccess)
    return e;
  if (rows == 0) return cudaSuccess;
  if (y == nullptr) return cudaErrorInvalidValue;
  a.y = y, a.y_fp32 = y_fp32;
  switch (rows) {
    case 1: return launch<1>(a, vec, unroll, stream);
    case 2: return launch<2>(a, vec, unroll, stream);
    case 3: return launch<3>(a, vec, unroll, stream);
    case 4: return launch<4>(a, vec, unroll, stream);
    case 5: return launch<5>(a, vec, unroll, stream);
    case 6: return launch<6>(a, vec, unroll, stream);
    case 7: return launch<7>(a, vec, unroll, stream);
    default: return launch<8>(a, vec, unroll, stream);
  }
}

cudaError_t gemv_epilogue_cuda(const uint16_t* x, int64_t ldx, int rows, const uint16_t* w, int64_t n_out,
                               int64_t n_in, const float* bias, uint16_t* y, int64_t ldy, const GemvEpilogue& epi,
                               cudaStream_t stream, const GemvTuning& tuning) {
  GemvArgs a;
  bool vec = false;
  int unroll = 0;
  if (cudaError_t e = prepare(x, ldx, rows, w, n_out, n_in, bias, ldy, tuning, &a, &vec, &unroll); e != cudaSuccess)
    return e;
  if (rows > kGemvMaxFusedRows || epi.has_act == (epi.residual != nullptr)) return cudaErrorInvalidValue;
  if (epi.has_act && (!known_activation(epi.act) || y == nullptr)) return cudaErrorInvalidValue;
  if (epi.residual != nullptr && epi.ld_residual < n_out) return cudaErrorInvalidValue;
  if (epi.norm_y != nullptr &&
      (epi.residual == nullptr || epi.counter == nullptr || epi.ld_norm_y < n_out || n_out > INT_MAX))
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  a.y = y, a.epi = epi;
  return rows == 1 ? launch<1, true>(a, vec, unroll, stream) : launch<2, true>(a, vec, unroll, stream);
}

}  // namespace replayssm::ops::cuda
