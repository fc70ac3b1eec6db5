// sample_cuda (see sampling.h): decode/sampler.h's sample_at on the
// device, one block per output. The CPU sorts the row to cut the top-p
// nucleus; here the cut is found by bisection over the row's values (as
// order-preserving 32-bit keys): the largest value v* whose "values ≥ v*"
// still hold top_p of the mass. Everything above v* is in, and of the
// values equal to v* the lowest ids, as many as the CPU's stable sort
// would take. The draw then walks the kept tokens in id order: each
// thread owns a contiguous chunk, a block scan of the chunks' masses finds
// the chunk where the running mass passes r × kept, and that thread walks
// it. Masses are fp64 like the CPU's; only their summation order differs.
#include "ops/cuda/launch.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/sampling.h"

namespace replayssm::ops::cuda {

namespace {

constexpr int kSampleThreads = 1024;

// Floats in order as unsigned keys (NaNs aside).
__device__ __forceinline__ uint32_t fkey(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float unkey(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ inline float block_min(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float m = red[0];
  for (int w = 1; w < int(blockDim.x / 32); ++w) m = fminf(m, red[w]);
  return m;
}

// Σ of v over the threads before this one (thread order); *total gets the block's Σ.
__device__ inline double block_exclusive_sum(double v, double* red, double* total) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  double x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) red[w] = x;
  __syncthreads();
  double base = 0.0, tot = 0.0;
  for (int i = 0; i < int(blockDim.x / 32); ++i) {
    if (i < w) base += red[i];
    tot += red[i];
  }
  *total = tot;
  return base + x - v;
}

__global__ void __launch_bounds__(kSampleThreads) sample_kernel(SampleArgs a) {
  pdl_begin();
  __shared__ float rv[kMaxBlockWarps];
  __shared__ int32_t ri[kMaxBlockWarps];
  __shared__ double rd[kMaxBlockWarps];
  __shared__ int32_t found;
  const float* x = a.logits + int64_t(a.row[blockIdx.x]) * a.ld;
  const int64_t V = a.V, C = (V + blockDim.x - 1) / blockDim.x;
  const int64_t lo = min(V, int64_t(threadIdx.x) * C), hi = min(V, lo + C);
  float bv = -INFINITY, mn = INFINITY;
  int32_t bi = 0x7fffffff;
  for (int64_t i = lo; i < hi; ++i) {
    const float v = x[i];
    if (argmax_better(v, int32_t(i), bv, bi)) bv = v, bi = int32_t(i);
    mn = fminf(mn, v);
  }
  block_argmax(bv, bi, rv, ri);
  mn = block_min(mn, rv);
  const float mx = bv;
  double s1 = 0.0;
  for (int64_t i = lo; i < hi; ++i) s1 += exp(double(x[i] - mx));
  const double log_s1 = log(block_sum_f64(s1, rd));
  int32_t tok = bi == 0x7fffffff ? 0 : bi;  // temperature 0: the argmax
  if (a.temperature > 0.0f) {
    const double T = double(a.temperature);
    auto e = [&](float v) { return exp(double(v - mx) / T); };
    double st = 0.0;
    for (int64_t i = lo; i < hi; ++i) st += e(x[i]);
    const double total = block_sum_f64(st, rd);
    // The nucleus: values above v*, and the first `take` of those equal to it.
    const bool cut = a.top_p < 1.0f;
    float vstar = -INFINITY;
    double take = 0.0, kept = total;
    if (cut) {
      const double target = double(a.top_p) * total;
      uint64_t klo = fkey(mn), khi = uint64_t(fkey(mx)) + 1;  // "≥ klo" holds all the mass, "≥ khi" none
      while (khi - klo > 1) {
        const uint64_t mid = klo + (khi - klo) / 2;
        double m = 0.0;
        for (int64_t i = lo; i < hi; ++i)
          if (fkey(x[i]) >= mid) m += e(x[i]);
        if (block_sum_f64(m, rd) >= target) klo = mid;
        else khi = mid;
      }
      vstar = unkey(uint32_t(klo));  // one of the row's values
      double gt = 0.0, eq = 0.0;
      for (int64_t i = lo; i < hi; ++i) {
        if (x[i] > vstar) gt += e(x[i]);
        else if (x[i] == vstar) eq += 1.0;
      }
      gt = block_sum_f64(gt, rd);
      eq = block_sum_f64(eq, rd);
      const double pv = e(vstar);
      take = fmin(fmax(ceil((target - gt) / pv), 1.0), eq);
      kept = gt + take * pv;
    }
    // Ties at v* are taken in id order: this chunk's first rank among them.
    double my_eq = 0.0, unused = 0.0;
    if (cut)
      for (int64_t i = lo; i < hi; ++i) my_eq += x[i] == vstar;
    const double eq_base = block_exclusive_sum(my_eq, rd, &unused);
    auto in = [&](int64_t i, double& rank) {
      if (!cut || x[i] > vstar) return true;
      if (x[i] != vstar) return false;
      return rank++ < take;
    };
    double mine = 0.0, rank = eq_base;
    int32_t last = -1;
    for (int64_t i = lo; i < hi; ++i)
      if (in(i, rank)) mine += e(x[i]), last = int32_t(i);
    double sum = 0.0;
    const double base = block_exclusive_sum(mine, rd, &sum);
    const double t = a.r[blockIdx.x] * kept;
    if (threadIdx.x == 0) found = -1;
    __syncthreads();
    if (base <= t && t < base + mine) {  // the chunk where the running mass passes t
      double cum = base;
      int32_t pick = last;
      rank = eq_base;
      for (int64_t i = lo; i < hi; ++i)
        if (in(i, rank)) {
          cum += e(x[i]);
          if (cum > t) {
            pick = int32_t(i);
            break;
          }
        }
      found = pick;
    }
    // Rounding past the end: the last kept token, as the CPU's draw.
    float lv = last >= 0 ? float(last) : -1.0f;
    int32_t li = 0;
    block_argmax(lv, li, rv, ri);
    __syncthreads();
    tok = found >= 0 ? found : int32_t(lv);
  }
  if (threadIdx.x == 0) {
    a.out[blockIdx.x] = tok;
    // The CPU's log_prob: the logit in fp64 less log Σ exp, no fp32 difference.
    a.lp[blockIdx.x] = double(x[tok]) - (log_s1 + double(mx));
  }
}

}  // namespace

cudaError_t sample_cuda(const SampleArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.n > 0x7fffffff || a.V < 1 || a.V > (int64_t{1} << 24) || a.ld < a.V || !(a.top_p > 0.0f) ||
      !(a.temperature >= 0.0f))
    return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (a.logits == nullptr || a.row == nullptr || a.r == nullptr || a.out == nullptr || a.lp == nullptr)
    return cudaErrorInvalidValue;
  launch_kernel(sample_kernel, unsigned(a.n), kSampleThreads, 0, stream, a);
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
