// RMS norms (see norm.h). One kernel serves all four forms: a row is cut
// into groups of n elements (one group for a plain norm, one per head or
// Mamba2 group otherwise), each group is reduced by one warp when it is
// short (head-sized: 8 groups per block) or by a whole block when it is
// long (hidden-sized; 1024 threads when the groups are too few to fill the
// GPU, else 256). The values are held in registers (rownorm_held_kernel:
// up to 16 a lane, 32 a thread of 256, 8 of 1024) and only longer groups
// take rownorm_kernel, which reads each value twice — the same sums in the
// same order either way (norm_order.cuh). Rows on 16 bytes with groups of
// a multiple of 8 up to 8192 take 16-byte pieces instead
// (rownorm_pieces_kernel) — the residual stream only where its groups are
// 256 threads.
#include "ops/cuda/norm.h"

#include <atomic>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/norm_order.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

enum Gate : int { kNoGate = 0, kGateBefore = 1, kGateAfter = 2 };

struct RowNormArgs {
  int64_t rows = 0, groups = 1, n = 0;  // groups per row, n elements per group
  const uint16_t* x = nullptr;          // bf16 input, or
  float* h = nullptr;                   // fp32 residual stream (+ d, written back)
  const uint16_t* d = nullptr;
  int64_t ldx = 0, ldh = 0, ldd = 0;
  const uint16_t* z = nullptr;
  int64_t ldz = 0;
  int gate = kNoGate;
  const float* w = nullptr;
  int64_t w_group_stride = 0;  // n: weights span the row (Mamba2); 0: shared per head (GDN)
  bool unit_offset = false;
  float eps = 0.0f;
  uint16_t* y = nullptr;
  int64_t ldy = 0;
  bool release_early = false;  // norm.h
};

// The block shapes and summation order: norm_order.cuh (shared with the
// GEMV that normalises in its epilogue).

__global__ void __launch_bounds__(kNormThreadsWide) rownorm_kernel(RowNormArgs a, int tpg) {
  __shared__ float red[kMaxBlockWarps];
  if (a.release_early) pdl_release();
  pdl_begin();
  const int64_t gi = int64_t(blockIdx.x) * (blockDim.x / tpg) + threadIdx.x / tpg;
  if (tpg == 32 && gi >= a.rows * a.groups) return;  // whole warps leave; no block barrier on this path
  const int64_t r = gi / a.groups, g = gi % a.groups, c0 = g * a.n;
  const int t = threadIdx.x % tpg;
  auto value = [&](int64_t c) {
    if (a.h != nullptr) return a.h[r * a.ldh + c];
    const float v = bf(a.x, r * a.ldx + c);
    return a.gate == kGateBefore ? v * silu_f(bf(a.z, r * a.ldz + c)) : v;
  };
  float ss = 0.0f;
  for (int64_t i = t; i < a.n; i += tpg) {
    const int64_t c = c0 + i;
    if (a.h != nullptr && a.d != nullptr) a.h[r * a.ldh + c] += bf(a.d, r * a.ldd + c);
    const float v = value(c);
    ss += v * v;
  }
  ss = tpg == 32 ? warp_sum(ss) : block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.n) + a.eps);
  for (int64_t i = t; i < a.n; i += tpg) {
    const int64_t c = c0 + i;
    float wi = 1.0f;
    if (a.w != nullptr) wi = a.unit_offset ? 1.0f + a.w[g * a.w_group_stride + i] : a.w[g * a.w_group_stride + i];
    float out = wi * (value(c) * inv);
    if (a.gate == kGateAfter) out *= silu_f(bf(a.z, r * a.ldz + c));
    put_bf(a.y, r * a.ldy + c, out);
  }
}

// The same sums in the same order as rownorm_kernel — the same bits — with
// a thread's kHold values loaded at once and kept in registers, and its
// weights loaded before the PDL wait (weights are never written by a
// step), for groups of up to kHold·kTpg (kTpg: the threads of a group, 32,
// kNormThreads or kNormThreadsWide, as rownorm_kernel's tpg).
// rownorm_kernel's loops reload each value per pass, one dependent DRAM
// round trip after another: at batch 1 its 1024-thread block sat ~6 µs on
// one SM while the GPU waited, and at 256 rows of 4096 its 256-thread
// blocks took 19 µs a norm (ncu) for 12 MB, 0.6 TB/s.
template <int kTpg, int kHold>
__global__ void __launch_bounds__(kTpg == kNormThreadsWide ? kNormThreadsWide : kNormThreads)
    rownorm_held_kernel(RowNormArgs a) {
  __shared__ float red[kMaxBlockWarps];
  static_assert(kTpg == 32 || kTpg == kNormThreads || kTpg == kNormThreadsWide, "rownorm_kernel's group shapes");
  const int64_t gi = int64_t(blockIdx.x) * (blockDim.x / kTpg) + threadIdx.x / kTpg;
  if (a.release_early) pdl_release();
  if (kTpg == 32 && gi >= a.rows * a.groups) return;  // whole warps leave; no block barrier on this path
  const int64_t r = gi / a.groups, g = gi % a.groups, c0 = g * a.n;
  const int t = threadIdx.x % kTpg, n = int(a.n);
  float wv[kHold];
#pragma unroll
  for (int m = 0; m < kHold; ++m) {
    const int i = t + m * kTpg;
    const float wi = a.w != nullptr && i < n ? a.w[g * a.w_group_stride + i] : 0.0f;
    wv[m] = a.w == nullptr ? 1.0f : a.unit_offset ? 1.0f + wi : wi;
  }
  pdl_begin();
  float v[kHold], zv[kHold], dv[kHold];
#pragma unroll
  for (int m = 0; m < kHold; ++m) {  // every load of the thread in flight at once
    const int64_t c = c0 + t + m * kTpg;
    const bool in = t + m * kTpg < n;
    if (a.h != nullptr) {
      v[m] = in ? a.h[r * a.ldh + c] : 0.0f;
      dv[m] = in && a.d != nullptr ? bf(a.d, r * a.ldd + c) : 0.0f;
    } else {
      v[m] = in ? bf(a.x, r * a.ldx + c) : 0.0f;
    }
    zv[m] = in && a.gate != kNoGate ? bf(a.z, r * a.ldz + c) : 0.0f;
  }
  float ss = 0.0f;
#pragma unroll
  for (int m = 0; m < kHold; ++m) {
    if (t + m * kTpg >= n) continue;
    const int64_t c = c0 + t + m * kTpg;
    if (a.h != nullptr && a.d != nullptr) a.h[r * a.ldh + c] = v[m] = v[m] + dv[m];
    if (a.gate == kGateBefore) v[m] = v[m] * silu_f(zv[m]);
    ss += v[m] * v[m];
  }
  ss = kTpg == 32 ? warp_sum(ss) : block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.n) + a.eps);
#pragma unroll
  for (int m = 0; m < kHold; ++m) {
    if (t + m * kTpg >= n) continue;
    float out = wv[m] * (v[m] * inv);
    if (a.gate == kGateAfter) out *= silu_f(zv[m]);
    put_bf(a.y, r * a.ldy + c0 + t + m * kTpg, out);
  }
}

// The held kernel by 16-byte pieces (norm_pieces_threads: where it runs,
// and its threads a group): thread t of a group's kTpg holds the
// group's pieces t, t + kTpg, … (kPieces of them), each 8 adjacent
// elements — one 16-byte access of bf16 x, z, d and y, two of the fp32
// residual and weights — where n % 8 = 0 and every row and the weights
// start on 16 bytes (the real models' rows do). The 2-byte and 4-byte
// element loops before it made the Mamba2 gated norm and the residual norm
// the slowest of a batch-256 step's row kernels for their bytes (ncu,
// H200: 19 and 14 µs for 12 MB; 2026-12-03, b56a768). Its sums run over
// a thread's pieces in order, then the group's warp or block sum: an order
// of its own, so the residual stream takes it only where rownorm_kernel
// uses 256-thread groups — the GEMV's fused norm (norm_order.cuh) keeps the
// warp and 1024-thread orders, and with them its bits.
constexpr int kPiece = 8;
// Threads a pieces launch aims for: 16 warps an SM of the H200's 132.
constexpr int64_t kPiecesThreads = 65536;
// A block of the pieces kernel: one group of kTpg threads, or two of a warp
// (small blocks, so that a few hundred groups still spread over every SM).
template <int kTpg>
constexpr int kPiecesBlock = kTpg == 32 ? 64 : kTpg;
template <int kTpg, int kPieces>
__global__ void __launch_bounds__(kPiecesBlock<kTpg>) rownorm_pieces_kernel(RowNormArgs a) {
  __shared__ float red[kMaxBlockWarps];
  static_assert(kTpg % 32 == 0 && kTpg <= kNormThreads, "whole warps, at most 256 threads a group");
  const int64_t gi = int64_t(blockIdx.x) * (kPiecesBlock<kTpg> / kTpg) + threadIdx.x / kTpg;
  if (a.release_early) pdl_release();
  if (kTpg == 32 && gi >= a.rows * a.groups) return;  // whole warps leave; no block barrier on this path
  const int64_t r = gi / a.groups, g = gi % a.groups, c0 = g * a.n;
  const int t = threadIdx.x % kTpg, pieces = int(a.n / kPiece);
  auto in = [&](int m) { return t + m * kTpg < pieces; };
  auto col = [&](int m) { return c0 + int64_t(t + m * kTpg) * kPiece; };  // the piece's first element
  float wv[kPieces][kPiece];
#pragma unroll
  for (int m = 0; m < kPieces; ++m) {
    float4 lo = make_float4(1.0f, 1.0f, 1.0f, 1.0f), hi = lo;
    if (a.w != nullptr && in(m)) {
      const float* wp = a.w + g * a.w_group_stride + (t + m * kTpg) * kPiece;
      lo = *reinterpret_cast<const float4*>(wp), hi = *reinterpret_cast<const float4*>(wp + 4);
      if (a.unit_offset)
        lo = make_float4(1 + lo.x, 1 + lo.y, 1 + lo.z, 1 + lo.w),
        hi = make_float4(1 + hi.x, 1 + hi.y, 1 + hi.z, 1 + hi.w);
    }
    wv[m][0] = lo.x, wv[m][1] = lo.y, wv[m][2] = lo.z, wv[m][3] = lo.w;
    wv[m][4] = hi.x, wv[m][5] = hi.y, wv[m][6] = hi.z, wv[m][7] = hi.w;
  }
  pdl_begin();
  float v[kPieces][kPiece];
  uint4 zp[kPieces], dp[kPieces];
#pragma unroll
  for (int m = 0; m < kPieces; ++m) {  // every load of the thread in flight at once
    zp[m] = dp[m] = make_uint4(0, 0, 0, 0);
    if (!in(m)) continue;
    if (a.h != nullptr) {
      const float4 lo = *reinterpret_cast<const float4*>(a.h + r * a.ldh + col(m));
      const float4 hi = *reinterpret_cast<const float4*>(a.h + r * a.ldh + col(m) + 4);
      v[m][0] = lo.x, v[m][1] = lo.y, v[m][2] = lo.z, v[m][3] = lo.w;
      v[m][4] = hi.x, v[m][5] = hi.y, v[m][6] = hi.z, v[m][7] = hi.w;
      if (a.d != nullptr) dp[m] = *reinterpret_cast<const uint4*>(a.d + r * a.ldd + col(m));
    } else {
      const uint4 x = *reinterpret_cast<const uint4*>(a.x + r * a.ldx + col(m));
#pragma unroll
      for (int e = 0; e < kPiece; ++e) v[m][e] = bf(reinterpret_cast<const uint16_t*>(&x), e);
    }
    if (a.gate != kNoGate) zp[m] = *reinterpret_cast<const uint4*>(a.z + r * a.ldz + col(m));
  }
  float ss = 0.0f;
#pragma unroll
  for (int m = 0; m < kPieces; ++m) {
    if (!in(m)) continue;
    const uint16_t* ze = reinterpret_cast<const uint16_t*>(&zp[m]);
    if (a.h != nullptr && a.d != nullptr) {
#pragma unroll
      for (int e = 0; e < kPiece; ++e) v[m][e] += bf(reinterpret_cast<const uint16_t*>(&dp[m]), e);
      float* hp = a.h + r * a.ldh + col(m);
      *reinterpret_cast<float4*>(hp) = make_float4(v[m][0], v[m][1], v[m][2], v[m][3]);
      *reinterpret_cast<float4*>(hp + 4) = make_float4(v[m][4], v[m][5], v[m][6], v[m][7]);
    }
#pragma unroll
    for (int e = 0; e < kPiece; ++e) {
      if (a.gate == kGateBefore) v[m][e] = v[m][e] * silu_f(bf(ze, e));
      ss += v[m][e] * v[m][e];
    }
  }
  ss = kTpg == 32 ? warp_sum(ss) : block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.n) + a.eps);
#pragma unroll
  for (int m = 0; m < kPieces; ++m) {
    if (!in(m)) continue;
    const uint16_t* ze = reinterpret_cast<const uint16_t*>(&zp[m]);
    uint4 o;
    uint16_t* oe = reinterpret_cast<uint16_t*>(&o);
#pragma unroll
    for (int e = 0; e < kPiece; ++e) {
      float out = wv[m][e] * (v[m][e] * inv);
      if (a.gate == kGateAfter) out *= silu_f(bf(ze, e));
      put_bf(oe, e, out);
    }
    *reinterpret_cast<uint4*>(a.y + r * a.ldy + col(m)) = o;
  }
}

// Every row and the weights on 16 bytes, for the pieces kernel.
bool pieces_aligned(const RowNormArgs& a) {
  auto rows_ok = [](const void* p, int64_t ld, int64_t elems) { return aligned_to(p, 16) && ld % elems == 0; };
  if (!rows_ok(a.y, a.ldy, 8) || (a.w != nullptr && !rows_ok(a.w, a.w_group_stride, 4))) return false;
  if (a.h != nullptr ? !rows_ok(a.h, a.ldh, 4) || (a.d != nullptr && !rows_ok(a.d, a.ldd, 8)) : !rows_ok(a.x, a.ldx, 8))
    return false;
  return a.gate == kNoGate || rows_ok(a.z, a.ldz, 8);
}

// The instance for groups of n at tpg threads (norm_pieces_threads: at
// most 4 pieces a thread; nullptr past that, the element kernels then),
// and its block.
template <int kTpg>
auto pieces_instance(int64_t n) -> void (*)(RowNormArgs) {
  const int64_t per = (n / kPiece + kTpg - 1) / kTpg;
  return per <= 1   ? rownorm_pieces_kernel<kTpg, 1>
         : per <= 2 ? rownorm_pieces_kernel<kTpg, 2>
         : per <= 4 ? rownorm_pieces_kernel<kTpg, 4>
                    : nullptr;
}
auto pieces_kernel(int tpg, int64_t n, int* block) -> void (*)(RowNormArgs) {
  switch (tpg) {
    case 32:
      return *block = kPiecesBlock<32>, pieces_instance<32>(n);
    case 64:
      return *block = kPiecesBlock<64>, pieces_instance<64>(n);
    case 128:
      return *block = kPiecesBlock<128>, pieces_instance<128>(n);
    default:
      return *block = kPiecesBlock<kNormThreads>, pieces_instance<kNormThreads>(n);
  }
}

// The held kernel for groups of n at tpg threads each, or nullptr where a
// thread would hold more than the largest instance (rownorm_kernel then).
template <int kTpg, int kMaxHold>
auto held_for(int64_t n) -> void (*)(RowNormArgs) {
  const int64_t hold = (n + kTpg - 1) / kTpg;
  if (hold <= kMaxHold / 8) return rownorm_held_kernel<kTpg, kMaxHold / 8>;
  if (hold <= kMaxHold / 4) return rownorm_held_kernel<kTpg, kMaxHold / 4>;
  if (hold <= kMaxHold / 2) return rownorm_held_kernel<kTpg, kMaxHold / 2>;
  if (hold <= kMaxHold) return rownorm_held_kernel<kTpg, kMaxHold>;
  return nullptr;
}

// Launches that took the pieces kernel (norm_pieces_launches).
std::atomic<int64_t> pieces_launches{0};

// Common checks; then the launch.
cudaError_t launch(const RowNormArgs& a, cudaStream_t stream) {
  const int64_t width = a.groups * a.n;
  if (a.rows < 0 || a.n < 1 || a.groups < 1 || a.y == nullptr || a.ldy < width) return cudaErrorInvalidValue;
  if (a.h != nullptr ? (a.ldh < width || (a.d != nullptr && a.ldd < width)) : (a.x == nullptr || a.ldx < width))
    return cudaErrorInvalidValue;
  if (a.gate != kNoGate && (a.z == nullptr || a.ldz < width)) return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  const int64_t n_groups = a.rows * a.groups;
  int block = 0;
  const int pt = pieces_aligned(a) ? norm_pieces_threads(a.n, n_groups, a.h != nullptr) : 0;
  if (auto kernel = pt > 0 ? pieces_kernel(pt, a.n, &block) : nullptr; kernel != nullptr) {
    const int64_t blocks = (n_groups * pt + block - 1) / block;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    launch_kernel(kernel, unsigned(blocks), block, 0, stream, a);
    pieces_launches.fetch_add(1, std::memory_order_relaxed);
    return cudaGetLastError();
  }
  // A long group's two passes are latency-bound loops: at 256 threads a
  // 4096-wide decode row took 16 µs on the H200, so when the groups are too
  // few to fill the GPU each gets a block of 1024.
  const int threads = a.n > kWarpGroupMax && n_groups < kWideBelowGroups ? kNormThreadsWide : kNormThreads;
  const int tpg = a.n <= kWarpGroupMax ? 32 : threads;
  const int64_t per_block = threads / tpg, blocks = (n_groups + per_block - 1) / per_block;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  // Values held in registers wherever a thread's share fits (kHold ≤ 8 for
  // the 1024-thread groups, 16 a lane for a warp's, 32 for 256 threads).
  void (*held)(RowNormArgs) = tpg == 32                 ? held_for<32, 16>(a.n)
                              : tpg == kNormThreadsWide ? held_for<kNormThreadsWide, 8>(a.n)
                                                        : held_for<kNormThreads, 32>(a.n);
  if (held != nullptr) {
    launch_kernel(held, unsigned(blocks), threads, 0, stream, a);
    return cudaGetLastError();
  }
  launch_kernel(rownorm_kernel, unsigned(blocks), threads, 0, stream, a, tpg);
  return cudaGetLastError();
}

}  // namespace

int64_t norm_pieces_launches() { return pieces_launches.load(std::memory_order_relaxed); }

int norm_pieces_threads(int64_t n, int64_t n_groups, bool residual) {
  if (n < kPiece || n % kPiece != 0 || n > 4 * kNormThreads * kPiece) return 0;
  // The residual stream only where the element kernels take 256-thread groups (launch).
  if (residual && (n <= kWarpGroupMax || n_groups < kWideBelowGroups)) return 0;
  const int64_t pieces = n / kPiece;
  // The fewest threads a group (a power of two, 32 to 256, at most 4
  // pieces a thread) that give the launch kPiecesThreads, or a piece a
  // thread: a thread's chain of loads, gates and sums stays short where the
  // groups are few. A warp per Mamba2 group of 1,024 (4 pieces a lane) made
  // the 8B step 2% slower at batch 1 and 8 and 0.5% at 64, and 2.5–3%
  // faster at 256 (H200, 2026-12-04, 2f25e2b).
  int tpg = 32;
  while (tpg < kNormThreads && (tpg < (pieces + 3) / 4 || (tpg < pieces && n_groups * tpg < kPiecesThreads))) tpg *= 2;
  return tpg;
}

cudaError_t rmsnorm_cuda(const uint16_t* x, int64_t ldx, int64_t rows, int64_t dim, const float* w, float eps,
                         bool unit_offset, uint16_t* y, int64_t ldy, cudaStream_t stream, bool release_early) {
  RowNormArgs a;
  a.release_early = release_early;
  a.rows = rows, a.n = dim, a.x = x, a.ldx = ldx, a.w = w, a.eps = eps, a.unit_offset = unit_offset;
  a.y = y, a.ldy = ldy;
  return launch(a, stream);
}

cudaError_t residual_rmsnorm_cuda(float* h, int64_t ldh, const uint16_t* d, int64_t ldd, int64_t rows, int64_t dim,
                                  const float* w, float eps, bool unit_offset, uint16_t* y, int64_t ldy,
                                  cudaStream_t stream, bool release_early) {
  if (h == nullptr) return cudaErrorInvalidValue;
  RowNormArgs a;
  a.release_early = release_early;
  a.rows = rows, a.n = dim, a.h = h, a.ldh = ldh, a.d = d, a.ldd = ldd, a.w = w, a.eps = eps;
  a.unit_offset = unit_offset, a.y = y, a.ldy = ldy;
  return launch(a, stream);
}

cudaError_t rmsnorm_gated_group_cuda(const uint16_t* x, int64_t ldx, const uint16_t* z, int64_t ldz, int64_t rows,
                                     int64_t dim, int64_t group_size, const float* w, float eps, uint16_t* y,
                                     int64_t ldy, cudaStream_t stream, bool release_early) {
  if (group_size < 1 || dim < 1 || dim % group_size != 0 || w == nullptr) return cudaErrorInvalidValue;
  RowNormArgs a;
  a.release_early = release_early;
  a.rows = rows, a.groups = dim / group_size, a.n = group_size, a.x = x, a.ldx = ldx, a.z = z, a.ldz = ldz;
  a.gate = kGateBefore, a.w = w, a.w_group_stride = group_size, a.eps = eps, a.y = y, a.ldy = ldy;
  return launch(a, stream);
}

cudaError_t rmsnorm_then_gate_cuda(const uint16_t* x, int64_t ldx, const uint16_t* z, int64_t ldz, int64_t rows,
                                   int64_t heads, int64_t head_dim, const float* w, float eps, uint16_t* y,
                                   int64_t ldy, cudaStream_t stream, bool release_early) {
  if (w == nullptr) return cudaErrorInvalidValue;
  RowNormArgs a;
  a.release_early = release_early;
  a.rows = rows, a.groups = heads, a.n = head_dim, a.x = x, a.ldx = ldx, a.z = z, a.ldz = ldz;
  a.gate = kGateAfter, a.w = w, a.w_group_stride = 0, a.eps = eps, a.y = y, a.ldy = ldy;
  return launch(a, stream);
}

}  // namespace replayssm::ops::cuda
