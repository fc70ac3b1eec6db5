// SSM log appends (see ssm_append.h): blocks over (row, chunk of kChunk
// elements) — at batch 1 a single block per row copied a Mamba2 row in
// 19 µs on the H200, a launch-bound step's worth of time.
#include "ops/cuda/ssm_append.h"

#include "ops/cuda/conv1d.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kAppendThreads = 256;
constexpr int64_t kChunk = 1024;  // elements per block

inline unsigned chunks(int64_t n) { return unsigned((n + kChunk - 1) / kChunk); }

// Row r's elements [c0, c0 + kChunk) of x | B | C (one index space), dt with chunk 0.
__global__ void __launch_bounds__(kAppendThreads) mamba2_append_kernel(Mamba2AppendArgs a) {
  if (a.release_early) pdl_release();
  pdl_begin();
  const int64_t r = blockIdx.x, e = a.entry[r], c0 = int64_t(blockIdx.y) * kChunk;
  if (e < 0) return;  // a row the chunk scan takes
  const int64_t HP = int64_t(a.H) * a.P, GN = int64_t(a.G) * a.N, n = HP + 2 * GN;
  const uint16_t* src = a.xbc + r * a.ldxbc;
  for (int64_t c = c0 + threadIdx.x; c < min(n, c0 + kChunk); c += blockDim.x) {
    if (c < HP) a.x[e * HP + c] = src[c];
    else if (c < HP + GN) a.Bm[e * GN + c - HP] = src[c];
    else a.Cm[r * GN + c - HP - GN] = src[c];
  }
  if (blockIdx.y != 0) return;
  for (int h = threadIdx.x; h < a.H; h += blockDim.x)
    a.dt[e * a.H + h] = fminf(fmaxf(softplus_f(bf(a.dt_raw, r * a.lddt + h) + a.dt_bias[h]), a.dt_min), a.dt_max);
}

// One thread per (kVec conv channels, sequence): the conv step's values go
// to the projection row (as conv1d_step_kernel) and straight on to their
// log entry or C row; the first block's threads also take the row's dt.
// kVec = kConvVec where conv1d_step_vec and the x | B | C split allow
// (mamba2_conv_append_cuda): no pair straddles two of them. kPaged: the
// conv's window from a paged log (Conv1dArgs::log_rows).
template <int kVec, bool kPaged>
__global__ void __launch_bounds__(kConvThreads) mamba2_conv_append_kernel(ConvArgsT<kPaged> cv, Mamba2AppendArgs a) {
  if (a.release_early) pdl_release();
  pdl_begin();
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * kVec, r = blockIdx.y;
  const int64_t e = a.entry[r], HP = int64_t(a.H) * a.P, GN = int64_t(a.G) * a.N;
  if (c < cv.C) {
    uint16_t* dst = c < HP ? a.x + e * HP + c : c < HP + GN ? a.Bm + e * GN + c - HP : a.Cm + r * GN + c - HP - GN;
    if constexpr (kVec > 1) {
      static_assert(kVec == kConvVec, "conv_step_channels' width");
      uint32_t v;
      conv_step_channels<kPaged>(cv, c, r, v);
      *reinterpret_cast<uint32_t*>(cv.y + int64_t(r) * cv.ldy + c) = v;
      *reinterpret_cast<uint32_t*>(dst) = v;
    } else {
      const uint16_t v = conv_step_channel<kPaged>(cv, c, r);
      cv.y[int64_t(r) * cv.ldy + c] = v;
      *dst = v;
    }
  }
  if (blockIdx.x != 0) return;
  for (int h = threadIdx.x; h < a.H; h += blockDim.x)
    a.dt[e * a.H + h] = fminf(fmaxf(softplus_f(bf(a.dt_raw, r * a.lddt + h) + a.dt_bias[h]), a.dt_min), a.dt_max);
}

// Row r's elements [c0, c0 + kChunk) of v | k (k only with a log), g with chunk 0.
__global__ void __launch_bounds__(kAppendThreads) gdn_append_kernel(GdnAppendArgs a) {
  pdl_begin();
  const int64_t r = blockIdx.x, c0 = int64_t(blockIdx.y) * kChunk;
  const int64_t V = int64_t(a.Hv) * a.dv, K = int64_t(a.Hk) * a.dk, n = a.entry != nullptr ? V + K : V;
  const int64_t e = a.entry != nullptr ? a.entry[r] : 0;
  for (int64_t c = c0 + threadIdx.x; c < min(n, c0 + kChunk); c += blockDim.x) {
    if (c < V) a.v[r * V + c] = a.v_in[r * a.ldv + c];
    else if (e >= 0) a.log_k[e * K + c - V] = a.k[r * K + c - V];
  }
  if (a.entry == nullptr || e < 0 || blockIdx.y != 0) return;
  for (int h = threadIdx.x; h < a.Hv; h += blockDim.x) a.log_g[e * a.Hv + h] = a.g[r * a.Hv + h];
}

__global__ void __launch_bounds__(kAppendThreads) log_rows_kernel(LogRowsArgs a) {
  pdl_begin();
  const int64_t r = blockIdx.x, c0 = int64_t(blockIdx.y) * kChunk;
  const int64_t s = a.src_row != nullptr ? a.src_row[r] : r, e = a.entry != nullptr ? a.entry[r] : r;
  if (e < 0) return;  // a row the chunk scan takes
  for (int64_t c = c0 + threadIdx.x; c < min(a.width, c0 + kChunk); c += blockDim.x)
    a.dst[e * a.width + c] = a.src[s * a.lds + c];
}

__global__ void __launch_bounds__(kAppendThreads) log_move_kernel(LogMoveArgs a) {
  pdl_begin();
  const int b = blockIdx.x, n = a.count[b], from = a.from[b];
  // Entry by entry, in order (dst s < src from + s): a source is read before
  // any later copy can reach it, overlapping ranges included.
  for (int s = 0; s < n; ++s) {
#pragma unroll
    for (int i = 0; i < kLogArrays; ++i) {
      if (a.array[i] == nullptr) continue;
      uint16_t* base = static_cast<uint16_t*>(a.array[i]) + int64_t(b) * a.W * a.width[i];
      const int64_t w = a.width[i];
      for (int64_t e = threadIdx.x; e < w; e += blockDim.x) base[s * w + e] = base[(from + s) * w + e];
    }
    __syncthreads();
  }
}


// The append's shapes and pointers (xbc too unless the conv makes it).
cudaError_t check(const Mamba2AppendArgs& a, bool from_conv) {
  if (a.rows < 0 || a.rows > 2147483647 || a.H < 1 || a.P < 1 || a.G < 1 || a.N < 1 || a.H % a.G != 0 ||
      (!from_conv && a.ldxbc < int64_t(a.H) * a.P + 2 * int64_t(a.G) * a.N) || a.lddt < a.H ||
      !(a.dt_min <= a.dt_max))
    return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  if ((!from_conv && a.xbc == nullptr) || a.dt_raw == nullptr || a.dt_bias == nullptr || a.entry == nullptr ||
      a.x == nullptr || a.Bm == nullptr || a.dt == nullptr || a.Cm == nullptr)
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

cudaError_t mamba2_append_cuda(const Mamba2AppendArgs& a, cudaStream_t stream) {
  if (cudaError_t e = check(a, false); e != cudaSuccess || a.rows == 0) return e;
  const int64_t n = int64_t(a.H) * a.P + 2 * int64_t(a.G) * a.N;
  launch_kernel(mamba2_append_kernel, dim3(unsigned(a.rows), chunks(n)), kAppendThreads, 0, stream, a);
  return cudaGetLastError();
}

cudaError_t mamba2_conv_append_cuda(const Conv1dArgs& cv, const Mamba2AppendArgs& a, cudaStream_t stream) {
  if (cudaError_t e = conv1d_check(cv); e != cudaSuccess) return e;
  if (cudaError_t e = check(a, true); e != cudaSuccess) return e;
  if (a.rows != cv.batch || int64_t(cv.C) != int64_t(a.H) * a.P + 2 * int64_t(a.G) * a.N) return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  bool vec = false;
  if (cudaError_t e = conv1d_step_vec(cv, &vec); e != cudaSuccess) return e;
  const int64_t HP = int64_t(a.H) * a.P, GN = int64_t(a.G) * a.N;
  vec = vec && HP % kConvVec == 0 && GN % kConvVec == 0 && aligned_to(a.x, kConvVecBytes) &&
        aligned_to(a.Bm, kConvVecBytes) && aligned_to(a.Cm, kConvVecBytes);
  const int per_block = kConvThreads * (vec ? kConvVec : 1);
  const dim3 grid((cv.C + per_block - 1) / per_block, unsigned(a.rows));
  if (cv.log_rows != nullptr)
    launch_kernel(vec ? mamba2_conv_append_kernel<kConvVec, true> : mamba2_conv_append_kernel<1, true>, grid,
                  kConvThreads, 0, stream, cv, a);
  else
    launch_kernel(vec ? mamba2_conv_append_kernel<kConvVec, false> : mamba2_conv_append_kernel<1, false>, grid,
                  kConvThreads, 0, stream, cv, a);
  return cudaGetLastError();
}

cudaError_t gdn_append_cuda(const GdnAppendArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.rows > 2147483647 || a.Hk < 1 || a.Hv < 1 || a.dk < 1 || a.dv < 1 ||
      a.ldv < int64_t(a.Hv) * a.dv)
    return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  if (a.v_in == nullptr || a.v == nullptr ||
      (a.entry != nullptr && (a.k == nullptr || a.g == nullptr || a.log_k == nullptr || a.log_g == nullptr)))
    return cudaErrorInvalidValue;
  const int64_t n = int64_t(a.Hv) * a.dv + (a.entry != nullptr ? int64_t(a.Hk) * a.dk : 0);
  launch_kernel(gdn_append_kernel, dim3(unsigned(a.rows), chunks(n)), kAppendThreads, 0, stream, a);
  return cudaGetLastError();
}

cudaError_t log_rows_cuda(const LogRowsArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.rows > 2147483647 || a.width < 1 || a.lds < a.width) return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  if (a.src == nullptr || a.dst == nullptr) return cudaErrorInvalidValue;
  launch_kernel(log_rows_kernel, dim3(unsigned(a.rows), chunks(a.width)), kAppendThreads, 0, stream, a);
  return cudaGetLastError();
}

cudaError_t log_move_cuda(const LogMoveArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.W < 1) return cudaErrorInvalidValue;
  bool any = false;
  for (int i = 0; i < kLogArrays; ++i) {
    if (a.array[i] != nullptr && a.width[i] < 1) return cudaErrorInvalidValue;
    any |= a.array[i] != nullptr;
  }
  if (a.batch == 0) return cudaSuccess;
  if (a.from == nullptr || a.count == nullptr || !any) return cudaErrorInvalidValue;
  launch_kernel(log_move_kernel, unsigned(a.batch), kAppendThreads, 0, stream, a);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
