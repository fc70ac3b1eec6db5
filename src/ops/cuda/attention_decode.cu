// Attention decode (see attention_decode.h). A block of kAttnWarps warps
// serves the rep = Hq/Hkv query heads of one KV head: each warp walks every
// nw-th context row of the split (the next row's K and V loaded while the
// current one is used), keeps an online softmax per query head — running
// max m, sum l, and l-weighted V in registers, lane l holding dims l + 32e —
// and the warps' partials are merged through shared memory at the end.
// Query heads sharing a KV head share its reads: the GQA saving.
#include "ops/cuda/attention_decode.h"

#include <cmath>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kAttnWarps = 4;
constexpr int kAttnPerLane = kAttnMaxD / 32;

__device__ __forceinline__ const uint16_t* kv_row(const uint16_t* const* pages, const PagedKv& kv, int b, int64_t p) {
  return pages[kv.page_table[int64_t(b) * kv.max_pages + p / kv.page_size]] + (p % kv.page_size) * kv.row_stride;
}

__device__ __forceinline__ void load_row(const uint16_t* r, int D, int lane, float (&x)[kAttnPerLane]) {
#pragma unroll
  for (int e = 0; e < kAttnPerLane; ++e) x[e] = lane + 32 * e < D ? bf(r, lane + 32 * e) : 0.0f;
}

// The final value of head h, dim d of sequence b: gated, rounded, stored.
__device__ __forceinline__ void write_out(const AttentionDecodeArgs& a, int b, int h, int d, float o) {
  if (a.gate != nullptr) o *= sigmoid_f(bf(a.gate, int64_t(b) * a.ldg + int64_t(h) * a.g_head_stride + d));
  put_bf(a.out, int64_t(b) * a.ldo + int64_t(h) * a.D + d, o);
}

__global__ void __launch_bounds__(32 * kAttnWarps) attention_decode_kernel(AttentionDecodeArgs a, int n_splits,
                                                                           int split_rows) {
  pdl_begin();
  const int kvh = blockIdx.x, b = blockIdx.y, sp = blockIdx.z;
  const int rep = a.Hq / a.Hkv, D = a.D;
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t L = a.seq_len[b], j0 = int64_t(sp) * split_rows;
  // The last split takes every row left, so no row is lost to a low bound.
  const int64_t j1 = n_splits == 1 || sp == n_splits - 1 ? L : min(L, j0 + split_rows);
  if (n_splits > 1 && j0 >= j1) return;  // past this sequence's end: the combine skips it

  extern __shared__ float shm[];
  float* sQ = shm;                 // (rep, D)
  float* sM = sQ + rep * D;        // (nw, rep)
  float* sL = sM + nw * rep;       // (nw, rep)
  float* sA = sL + nw * rep;       // (nw, rep, D)
  for (int i = threadIdx.x; i < rep * D; i += blockDim.x)
    sQ[i] = bf(a.q, int64_t(b) * a.ldq + int64_t(kvh * rep + i / D) * a.q_head_stride + i % D);
  __syncthreads();

  float m[kAttnMaxRep], l[kAttnMaxRep], acc[kAttnMaxRep][kAttnPerLane];
#pragma unroll
  for (int r = 0; r < kAttnMaxRep; ++r) {
    m[r] = -INFINITY, l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < kAttnPerLane; ++e) acc[r][e] = 0.0f;
  }
  const int64_t head = int64_t(kvh) * D;
  float kx[kAttnPerLane], vx[kAttnPerLane];
  int64_t j = j0 + w;
  if (j < j1) {
    load_row(kv_row(a.kv.k_pages, a.kv, b, j) + head, D, lane, kx);
    load_row(kv_row(a.kv.v_pages, a.kv, b, j) + head, D, lane, vx);
  }
  for (; j < j1; j += nw) {
    float nk[kAttnPerLane], nv[kAttnPerLane];
    const bool more = j + nw < j1;
    if (more) {
      load_row(kv_row(a.kv.k_pages, a.kv, b, j + nw) + head, D, lane, nk);
      load_row(kv_row(a.kv.v_pages, a.kv, b, j + nw) + head, D, lane, nv);
    }
#pragma unroll
    for (int r = 0; r < kAttnMaxRep; ++r) {
      if (r >= rep) break;
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < kAttnPerLane; ++e)
        if (lane + 32 * e < D) dot += sQ[r * D + lane + 32 * e] * kx[e];
      const float s = warp_sum(dot) * a.scale;
      const float mn = fmaxf(m[r], s), corr = expf(m[r] - mn), p = expf(s - mn);
      l[r] = l[r] * corr + p;
#pragma unroll
      for (int e = 0; e < kAttnPerLane; ++e) acc[r][e] = acc[r][e] * corr + p * vx[e];
      m[r] = mn;
    }
    if (more) {
#pragma unroll
      for (int e = 0; e < kAttnPerLane; ++e) kx[e] = nk[e], vx[e] = nv[e];
    }
  }

#pragma unroll
  for (int r = 0; r < kAttnMaxRep; ++r) {
    if (r >= rep) break;
    if (lane == 0) sM[w * rep + r] = m[r], sL[w * rep + r] = l[r];
#pragma unroll
    for (int e = 0; e < kAttnPerLane; ++e)
      if (lane + 32 * e < D) sA[(w * rep + r) * D + lane + 32 * e] = acc[r][e];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rep * D; i += blockDim.x) {
    const int r = i / D, d = i % D, h = kvh * rep + r;
    float M = -INFINITY, Ls = 0.0f, A = 0.0f;
    for (int k = 0; k < nw; ++k) M = fmaxf(M, sM[k * rep + r]);
    if (M != -INFINITY)
      for (int k = 0; k < nw; ++k) {
        const float f = expf(sM[k * rep + r] - M);  // 0 for a warp without rows
        Ls += sL[k * rep + r] * f;
        A += sA[(k * rep + r) * D + d] * f;
      }
    if (n_splits == 1) {
      write_out(a, b, h, d, Ls > 0.0f ? A / Ls : 0.0f);
    } else {
      float* part = a.scratch + ((int64_t(b) * a.Hq + h) * n_splits + sp) * (D + 2);  // (D) A | M | L
      part[d] = A;
      if (d == 0) part[D] = M, part[D + 1] = Ls;
    }
  }
}

__global__ void __launch_bounds__(128) attention_combine_kernel(AttentionDecodeArgs a, int n_splits, int split_rows) {
  pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, D = a.D;
  const int64_t L = a.seq_len[b];
  const int used = L <= 0 ? 0 : int(min(int64_t(n_splits), (L + split_rows - 1) / split_rows));
  const float* part = a.scratch + (int64_t(b) * a.Hq + h) * n_splits * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < used; ++s) M = fmaxf(M, part[s * (D + 2) + D]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float Ls = 0.0f, A = 0.0f;
    for (int s = 0; s < used; ++s) {
      const float f = expf(part[s * (D + 2) + D] - M);
      Ls += part[s * (D + 2) + D + 1] * f;
      A += part[s * (D + 2) + d] * f;
    }
    write_out(a, b, h, d, Ls > 0.0f ? A / Ls : 0.0f);
  }
}

__global__ void kv_append_kernel(KvAppendArgs a) {
  pdl_begin();
  const int i = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
  const int64_t p = a.pos[b];
  if (i >= a.width || p < 0 || p / a.kv.page_size >= a.kv.max_pages) return;
  const int64_t page = a.kv.page_table[int64_t(b) * a.kv.max_pages + p / a.kv.page_size];
  const int64_t off = (p % a.kv.page_size) * a.kv.row_stride + i;
  a.kv.k_pages[page][off] = a.k[int64_t(b) * a.ldk + i];
  a.kv.v_pages[page][off] = a.v[int64_t(b) * a.ldv + i];
}

bool paged_ok(const PagedKv& kv, int64_t width) {
  return kv.k_pages != nullptr && kv.v_pages != nullptr && kv.page_table != nullptr && kv.max_pages >= 1 &&
         kv.page_size >= 1 && kv.row_stride >= width;
}

}  // namespace

cudaError_t attention_decode_cuda(const AttentionDecodeArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.batch > 65535 || a.Hkv < 1 || a.Hq < a.Hkv || a.Hq % a.Hkv != 0 ||
      a.Hq / a.Hkv > kAttnMaxRep || a.D < 1 || a.D > kAttnMaxD || !std::isfinite(a.scale) || a.q == nullptr ||
      a.out == nullptr || a.seq_len == nullptr || a.q_head_stride < a.D || a.ldq < int64_t(a.Hq) * a.q_head_stride ||
      a.ldo < int64_t(a.Hq) * a.D || !paged_ok(a.kv, int64_t(a.Hkv) * a.D) || a.split_rows < 0)
    return cudaErrorInvalidValue;
  if (a.gate != nullptr && (a.g_head_stride < a.D || a.ldg < int64_t(a.Hq) * a.g_head_stride))
    return cudaErrorInvalidValue;
  if (a.scratch != nullptr && a.max_seq_len < 1) return cudaErrorInvalidValue;
  const int n_splits = a.scratch != nullptr ? attention_decode_splits(a.batch, a.Hkv, a.max_seq_len, a.split_rows) : 1;
  const int split_rows = attention_decode_split_rows(a.batch, a.Hkv, a.max_seq_len, a.split_rows);
  if (n_splits > 65535) return cudaErrorInvalidValue;  // grid z
  if (a.batch == 0) return cudaSuccess;
  const int rep = a.Hq / a.Hkv;
  const size_t shm = sizeof(float) * (size_t(rep) * a.D + size_t(kAttnWarps) * rep * (2 + a.D));
  launch_kernel(attention_decode_kernel, dim3(a.Hkv, a.batch, n_splits), 32 * kAttnWarps, shm, stream, a, n_splits,
                split_rows);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || n_splits == 1) return e;
  launch_kernel(attention_combine_kernel, dim3(a.Hq, a.batch), 128, 0, stream, a, n_splits, split_rows);
  return cudaGetLastError();
}

cudaError_t kv_append_cuda(const KvAppendArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.batch > 65535 || a.width < 1 || a.k == nullptr || a.v == nullptr || a.pos == nullptr ||
      a.ldk < a.width || a.ldv < a.width || !paged_ok(a.kv, a.width))
    return cudaErrorInvalidValue;
  if (a.batch == 0) return cudaSuccess;
  launch_kernel(kv_append_kernel, dim3((a.width + 255) / 256, a.batch), 256, 0, stream, a);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
