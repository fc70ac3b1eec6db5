// Attention decode (see attention_decode.h). A block of kAttnWarps warps
// serves the rep = Hq/Hkv query heads of one KV head, and the warps'
// partial softmaxes are merged through shared memory at the end (query
// heads sharing a KV head share its reads: the GQA saving). Three ways a
// warp walks its rows — on tensor cores where attention_decode_mma_ok
// (attention_decode_mma.cu, the launcher's choice there), else:
//  - attention_decode_vec_kernel, where D and the row stride are multiples
//    of 8: a lane holds 8 adjacent dims, a row takes the next power of two
//    ≥ D/8 lanes (a lane group), and each group loads kAttnVecRows rows of
//    K and V by 16-byte loads at once, then folds them into its online
//    softmax (running max m, sum l, l-weighted V) in one update per row
//    chunk. At batch 256 the per-row loop below kept ~8 KB a SM in flight:
//    at 8B shapes and 129-row contexts a layer took 401 µs for 137 MB
//    (0.34 TB/s), this one 115 (H200, 2026-12-03, 5ece048) — a warp has 8 rows
//    (D = 128) in flight. The groups' partials are merged by shuffles.
//  - attention_decode_kernel, any D: each warp walks every nw-th row (the
//    next row's K and V loaded while the current one is used), lane l
//    holding dims l + 32e.
#include "ops/cuda/attention_decode.h"

#include <cmath>

#include "ops/cuda/attention_decode_merge.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

// The tensor-core kernel's launch (attention_decode_mma.cu): arguments
// checked here, attention_decode_mma_ok true.
cudaError_t attention_decode_mma(const AttentionDecodeArgs& a, const AttentionSplits& s, cudaStream_t stream);

namespace {

constexpr int kAttnWarps = 4;
constexpr int kAttnPerLane = kAttnMaxD / 32;
// Rows a lane group of the vec kernel loads at once (K and V: 2 × 16 bytes each a lane).
constexpr int kAttnVecRows = 4;

__device__ __forceinline__ void load_row(const uint16_t* r, int D, int lane, float (&x)[kAttnPerLane]) {
#pragma unroll
  for (int e = 0; e < kAttnPerLane; ++e) x[e] = lane + 32 * e < D ? bf(r, lane + 32 * e) : 0.0f;
}

__global__ void __launch_bounds__(32 * kAttnWarps) attention_decode_kernel(AttentionDecodeArgs a, AttentionSplits s) {
  pdl_begin();
  const int kvh = blockIdx.x, b = blockIdx.y, sp = blockIdx.z;
  const int rep = a.Hq / a.Hkv, D = a.D;
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t j0, j1;
  if (!split_span(s, sp, a.seq_len[b], j0, j1)) return;

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
  merge_warps(a, b, kvh, sp, s.n, nw, sM, sL, sA);
}

// Eight bf16 (a 16-byte load) as floats.
__device__ __forceinline__ void unpack8(const uint4& u, float (&x)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i)
    x[2 * i] = __uint_as_float(w[i] << 16), x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}

// Folds one partial softmax (m2, l2, acc2) into another. A side without rows
// has m = −inf and l = acc = 0; with both so, the result stays so.
template <int kRep>
__device__ __forceinline__ void fold_partial(int r, float (&m)[kRep], float (&l)[kRep], float (&acc)[kRep][8], float m2,
                                             float l2, const float (&acc2)[8]) {
  const float M = fmaxf(m[r], m2), ref = M == -INFINITY ? 0.0f : M;
  const float f = expf(m[r] - ref), f2 = expf(m2 - ref);
  l[r] = l[r] * f + l2 * f2;
#pragma unroll
  for (int e = 0; e < 8; ++e) acc[r][e] = acc[r][e] * f + acc2[e] * f2;
  m[r] = M;
}

// kRep ≥ rep bounds the per-lane arrays; lpr_log2: log2 of the lanes a row
// takes (2^lpr_log2 ≥ D/8, ≤ 32).
template <int kRep>
__global__ void __launch_bounds__(32 * kAttnWarps)
    attention_decode_vec_kernel(AttentionDecodeArgs a, AttentionSplits s, int lpr_log2) {
  pdl_begin();
  const int kvh = blockIdx.x, b = blockIdx.y, sp = blockIdx.z;
  const int rep = a.Hq / a.Hkv, D = a.D;
  const int nw = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int lpr = 1 << lpr_log2, grp = lane >> lpr_log2, d0 = (lane & (lpr - 1)) * 8;
  const bool dims = d0 < D;  // lanes past D/8 in a group hold zeros
  int64_t j0, j1;
  if (!split_span(s, sp, a.seq_len[b], j0, j1)) return;

  extern __shared__ float shm[];
  float* sM = shm;            // (nw, rep)
  float* sL = sM + nw * rep;  // (nw, rep)
  float* sA = sL + nw * rep;  // (nw, rep, D)
  float q[kRep][8], m[kRep], l[kRep], acc[kRep][8];
#pragma unroll
  for (int r = 0; r < kRep; ++r) {
    m[r] = -INFINITY, l[r] = 0.0f;
    const int64_t qo = int64_t(b) * a.ldq + int64_t(kvh * rep + r) * a.q_head_stride + d0;
#pragma unroll
    for (int e = 0; e < 8; ++e) q[r][e] = r < rep && dims ? bf(a.q, qo + e) : 0.0f, acc[r][e] = 0.0f;
  }
  const int64_t head = int64_t(kvh) * D + d0;
  const int per_warp = (32 >> lpr_log2) * kAttnVecRows;  // rows a warp takes each pass
  for (int64_t base = j0 + int64_t(w) * per_warp; base < j1; base += int64_t(nw) * per_warp) {
    const int64_t r0 = base + int64_t(grp) * kAttnVecRows;  // this group's rows r0 .. r0 + kAttnVecRows − 1
    uint4 kr[kAttnVecRows], vr[kAttnVecRows];
#pragma unroll
    for (int i = 0; i < kAttnVecRows; ++i) {
      kr[i] = vr[i] = make_uint4(0, 0, 0, 0);
      if (dims && r0 + i < j1) {
        kr[i] = *reinterpret_cast<const uint4*>(kv_row(a.kv.k_pages, a.kv, b, r0 + i) + head);
        vr[i] = *reinterpret_cast<const uint4*>(kv_row(a.kv.v_pages, a.kv, b, r0 + i) + head);
      }
    }
#pragma unroll
    for (int r = 0; r < kRep; ++r) {
      if (r >= rep) break;
      float s[kAttnVecRows], x[8];
#pragma unroll
      for (int i = 0; i < kAttnVecRows; ++i) {
        unpack8(kr[i], x);
        s[i] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) s[i] += q[r][e] * x[e];
      }
      for (int o = lpr >> 1; o > 0; o >>= 1)  // the group's sum (its lanes are aligned: xor stays inside)
#pragma unroll
        for (int i = 0; i < kAttnVecRows; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
      float M = m[r];
#pragma unroll
      for (int i = 0; i < kAttnVecRows; ++i) s[i] = r0 + i < j1 ? s[i] * a.scale : -INFINITY, M = fmaxf(M, s[i]);
      const float ref = M == -INFINITY ? 0.0f : M, corr = expf(m[r] - ref);
      l[r] *= corr;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] *= corr;
#pragma unroll
      for (int i = 0; i < kAttnVecRows; ++i) {
        const float p = expf(s[i] - ref);  // 0 past the split's end
        l[r] += p;
        unpack8(vr[i], x);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] += p * x[e];
      }
      m[r] = M;
    }
  }
  // The warp's groups into its first: every lane shuffles the same values.
  for (int o = lpr; o < 32; o <<= 1)
#pragma unroll
    for (int r = 0; r < kRep; ++r) {
      float acc2[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc2[e] = __shfl_xor_sync(0xffffffffu, acc[r][e], o);
      const float m2 = __shfl_xor_sync(0xffffffffu, m[r], o), l2 = __shfl_xor_sync(0xffffffffu, l[r], o);
      fold_partial(r, m, l, acc, m2, l2, acc2);
    }
#pragma unroll
  for (int r = 0; r < kRep; ++r) {
    if (r >= rep) break;
    if (lane == 0) sM[w * rep + r] = m[r], sL[w * rep + r] = l[r];
    if (grp == 0 && dims)
#pragma unroll
      for (int e = 0; e < 8; ++e) sA[(w * rep + r) * D + d0 + e] = acc[r][e];
  }
  merge_warps(a, b, kvh, sp, s.n, nw, sM, sL, sA);
}

__global__ void __launch_bounds__(128) attention_combine_kernel(AttentionDecodeArgs a, AttentionSplits s) {
  pdl_begin();
  const int h = blockIdx.x, b = blockIdx.y, D = a.D;
  const int used = splits_used(s, a.seq_len[b]);
  const float* part = a.scratch + (int64_t(b) * a.Hq + h) * s.n * (D + 2);
  float M = -INFINITY;
  for (int k = 0; k < used; ++k) M = fmaxf(M, part[k * (D + 2) + D]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float Ls = 0.0f, A = 0.0f;
    for (int k = 0; k < used; ++k) {
      const float f = expf(part[k * (D + 2) + D] - M);
      Ls += part[k * (D + 2) + D + 1] * f;
      A += part[k * (D + 2) + d] * f;
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
  if (a.batch < 0 || a.batch > 65535 || a.Hkv < 1 || a.Hq < a.Hkv || a.Hq % a.Hkv != 0 || a.Hq / a.Hkv > kAttnMaxRep ||
      a.D < 1 || a.D > kAttnMaxD || !std::isfinite(a.scale) || a.q == nullptr || a.out == nullptr ||
      a.seq_len == nullptr || a.q_head_stride < a.D || a.ldq < int64_t(a.Hq) * a.q_head_stride ||
      a.ldo < int64_t(a.Hq) * a.D || !paged_ok(a.kv, int64_t(a.Hkv) * a.D) || a.split_rows < 0 || a.variant < 0 ||
      a.variant >= kAttnDecodeVariants)
    return cudaErrorInvalidValue;
  const bool vec = attention_decode_vec_ok(a.D, a.kv.row_stride), mma = attention_decode_mma_ok(a.D, a.kv.row_stride);
  if ((a.variant == 2 && !vec) || (a.variant == 3 && !mma)) return cudaErrorInvalidValue;
  if (a.gate != nullptr && (a.g_head_stride < a.D || a.ldg < int64_t(a.Hq) * a.g_head_stride))
    return cudaErrorInvalidValue;
  if (a.scratch != nullptr && a.max_seq_len < 1) return cudaErrorInvalidValue;
  const AttentionSplits s =
      a.scratch != nullptr ? attention_decode_plan(a.batch, a.Hkv, a.max_seq_len, a.split_rows) : AttentionSplits{};
  if (s.n > 65535) return cudaErrorInvalidValue;  // grid z
  if (a.batch == 0) return cudaSuccess;
  const int rep = a.Hq / a.Hkv;
  const dim3 grid(a.Hkv, a.batch, s.n);
  const size_t partials = sizeof(float) * size_t(kAttnWarps) * rep * (2 + a.D);
  if (mma && (a.variant == 0 || a.variant == 3)) {
    if (cudaError_t e = attention_decode_mma(a, s, stream); e != cudaSuccess) return e;
  } else if (vec && a.variant != 1) {
    int lpr_log2 = 0;
    while ((1 << lpr_log2) * 8 < a.D) ++lpr_log2;
    auto kernel = rep <= 1   ? attention_decode_vec_kernel<1>
                  : rep <= 2 ? attention_decode_vec_kernel<2>
                  : rep <= 4 ? attention_decode_vec_kernel<4>
                             : attention_decode_vec_kernel<8>;
    launch_kernel(kernel, grid, 32 * kAttnWarps, partials, stream, a, s, lpr_log2);
  } else {
    launch_kernel(attention_decode_kernel, grid, 32 * kAttnWarps, sizeof(float) * size_t(rep) * a.D + partials, stream,
                  a, s);
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || s.n == 1) return e;
  launch_kernel(attention_combine_kernel, dim3(a.Hq, a.batch), 128, 0, stream, a, s);
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
