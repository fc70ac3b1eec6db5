// The MoE launches around the grouped linear (see moe.h; the grouped
// linear is moe_grouped_linear.cu):
//
//   router   a warp per (expert, tile of rows): the expert's fp32 row is
//            read once per tile, the tile's bf16 rows through L1;
//   route    a warp per row, its scores in shared memory: top-k as k rounds
//            of a warp argmax under ops/cpu/moe_routing.cpp's total order
//            (larger first, lower index on ties, NaN last), so the chosen
//            set is the CPU's; the sums the CPU makes in sequence (the
//            softmax's denominator, the K weights) are made in the same
//            sequence by one lane, so they round alike;
//   group    one block: a stable counting sort of the rows·K pairs, each
//            warp counting and then placing a contiguous run of pairs, so
//            that the order within an expert is the pairs' order without
//            any atomics (the result is the same bits every run);
//   combine  a block per row, summing in ascending expert order with
//            separate multiplies and adds (no FMA contraction), as the CPU.
#include "ops/cuda/moe.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/moe_tiles.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

// ---- router ----

constexpr int kRouterWarps = 8;  // experts per block

// Warp w of block (bx, by) sums expert bx·kRouterWarps + w over rows
// [by·kR, by·kR + kR) (then every gridDim.y·kR rows further). kVec: four
// columns a lane per step (D % 4 == 0, the router 16-byte and x 8-byte
// aligned with ldx % 4 == 0).
template <int kR, bool kVec>
__global__ void __launch_bounds__(32 * kRouterWarps)
    moe_router_kernel(const uint16_t* x, int64_t ldx, int64_t rows, int64_t D, const float* router, int64_t E,
                      float* logits, int64_t ldl) {
  pdl_begin();
  const int lane = threadIdx.x % 32;
  const int64_t e = int64_t(blockIdx.x) * kRouterWarps + threadIdx.x / 32;
  if (e >= E) return;
  const float* wr = router + e * D;
  for (int64_t r0 = int64_t(blockIdx.y) * kR; r0 < rows; r0 += int64_t(gridDim.y) * kR) {
    const int n = int(min(int64_t(kR), rows - r0));
    const uint16_t* xr = x + r0 * ldx;
    float acc[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i) acc[i] = 0.0f;
    if constexpr (kVec) {
      for (int64_t d = int64_t(lane) * 4; d < D; d += 128) {
        const float4 wv = *reinterpret_cast<const float4*>(wr + d);
#pragma unroll
        for (int i = 0; i < kR; ++i) {
          if (i >= n) break;
          const uint2 xv = *reinterpret_cast<const uint2*>(xr + i * ldx + d);
          const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&xv.x));
          const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&xv.y));
          acc[i] = fmaf(lo.x, wv.x, acc[i]);
          acc[i] = fmaf(lo.y, wv.y, acc[i]);
          acc[i] = fmaf(hi.x, wv.z, acc[i]);
          acc[i] = fmaf(hi.y, wv.w, acc[i]);
        }
      }
    } else {
      for (int64_t d = lane; d < D; d += 32) {
        const float wv = wr[d];
#pragma unroll
        for (int i = 0; i < kR; ++i) {
          if (i >= n) break;
          acc[i] = fmaf(bf(xr, i * ldx + d), wv, acc[i]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const float s = warp_sum(acc[i]);
      if (lane == 0 && i < n) logits[(r0 + i) * ldl + e] = s;
    }
  }
}

template <int kR>
cudaError_t launch_router(bool vec, dim3 grid, cudaStream_t stream, const uint16_t* x, int64_t ldx, int64_t rows,
                          int64_t D, const float* router, int64_t E, float* logits, int64_t ldl) {
  return launch_kernel(vec ? moe_router_kernel<kR, true> : moe_router_kernel<kR, false>, grid, 32 * kRouterWarps, 0,
                       stream, x, ldx, rows, D, router, E, logits, ldl);
}

// ---- route ----

constexpr int kRouteWarps = 4;  // rows per block
constexpr int kMaxE = int(kMoeMaxExperts), kMaxK = int(kMoeMaxTopK);
constexpr int kPerLane = kMaxE / 32;  // experts a lane owns: e = lane + 32·i
static_assert(kPerLane <= 32, "a lane's experts fit a 32-bit mask");

// Whether (a, ia) ranks before (b, ib): ops/cpu/moe_routing.cpp's RankDesc.
__device__ __forceinline__ bool ranks_before(float a, int ia, float b, int ib) {
  const bool na = isnan(a), nb = isnan(b);
  if (na != nb) return nb;
  if (!na && a != b) return a > b;
  return ia < ib;
}

// The warp's first (v, i) under ranks_before; every lane gets it. The
// order is total, so the butterfly leaves the same winner in every lane.
__device__ __forceinline__ void warp_first(float& v, int& i) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (ranks_before(ov, oi, v, i)) v = ov, i = oi;
  }
}

// The first of `values` at the positions lane + 32·i for the bits i of
// `mask` (every lane its own), then warp_first: (v, i), or (NaN, INT_MAX)
// where no lane had a candidate.
__device__ __forceinline__ void warp_pick(const float* values, uint32_t mask, int lane, float& v, int& idx) {
  v = NAN, idx = INT_MAX;
  for (uint32_t m = mask; m != 0; m &= m - 1) {
    const int j = lane + 32 * (__ffs(int(m)) - 1);
    if (ranks_before(values[j], j, v, idx)) v = values[j], idx = j;
  }
  warp_first(v, idx);
}

__global__ void __launch_bounds__(32 * kRouteWarps)
    moe_route_kernel(MoeRoutingParams p, const float* logits, int64_t ld, int64_t rows, int32_t* experts,
                     float* weights) {
  __shared__ float s_score[kRouteWarps][kMaxE], s_choice[kRouteWarps][kMaxE], s_group[kRouteWarps][kMaxE / 2];
  __shared__ int s_keep[kRouteWarps][kMaxE / 2];
  __shared__ int s_picked[kRouteWarps][kMaxK];
  pdl_begin();
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = int64_t(blockIdx.x) * kRouteWarps + w;
  if (r >= rows) return;
  const int E = int(p.n_experts), K = int(p.top_k);
  const bool sigmoid_scoring = p.scoring == MoeRoutingParams::kSigmoid;
  const int G = sigmoid_scoring ? int(p.n_group) : 1, per_group = E / G, kept_groups = int(p.topk_group);
  float* score = s_score[w];
  float* choice = s_choice[w];
  const float* l = logits + r * ld;

  if (!sigmoid_scoring) {
    float m = -INFINITY;
    for (int e = lane; e < E; e += 32) m = fmaxf(m, l[e]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    for (int e = lane; e < E; e += 32) score[e] = expf(l[e] - m);
    __syncwarp();
    // The CPU's denominator: the exponentials summed in index order.
    float sum = 0.0f;
    if (lane == 0)
      for (int e = 0; e < E; ++e) sum += score[e];
    sum = __shfl_sync(0xffffffffu, sum, 0);
    for (int e = lane; e < E; e += 32) choice[e] = score[e] = score[e] / sum;
  } else {
    for (int e = lane; e < E; e += 32) {
      const float s = sigmoid_f(l[e]);
      score[e] = s;
      choice[e] = p.correction_bias != nullptr ? s + p.correction_bias[e] : s;
    }
  }
  __syncwarp();

  // avail, bit i: expert lane + 32·i may still be chosen.
  uint32_t avail = 0;
  if (sigmoid_scoring && kept_groups < G) {
    // Each group's score is its two best choices; the kept_groups best
    // groups stay. (Keeping all G groups keeps every expert: skipped.)
    float* gs = s_group[w];
    int* keep = s_keep[w];
    for (int g = lane; g < G; g += 32) {
      const float* c = choice + g * per_group;
      int ia = 0;
      for (int j = 1; j < per_group; ++j)
        if (ranks_before(c[j], j, c[ia], ia)) ia = j;
      int ib = ia == 0 ? 1 : 0;
      for (int j = 0; j < per_group; ++j)
        if (j != ia && ranks_before(c[j], j, c[ib], ib)) ib = j;
      gs[g] = c[ia] + c[ib];
      keep[g] = 0;
    }
    __syncwarp();
    uint32_t gavail = 0;
#pragma unroll
    for (int i = 0; i < kPerLane / 2; ++i)
      if (lane + 32 * i < G) gavail |= 1u << i;
    for (int t = 0; t < kept_groups; ++t) {
      float v;
      int g;
      warp_pick(gs, gavail, lane, v, g);
      if (g == INT_MAX) break;  // fewer groups than asked: the host refuses that
      if ((g & 31) == lane) gavail &= ~(1u << (g >> 5)), keep[g] = 1;
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < E && keep[e / per_group]) avail |= 1u << i;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (lane + 32 * i < E) avail |= 1u << i;
  }

  // The K best choices, best first (the order the CPU sums their weights in).
  int* picked = s_picked[w];
  for (int k = 0; k < K; ++k) {
    float v;
    int e;
    warp_pick(choice, avail, lane, v, e);
    if (e == INT_MAX) e = 0;  // fewer candidates than K: the host refuses that
    if ((e & 31) == lane) avail &= ~(1u << (e >> 5));
    if (lane == 0) picked[k] = e;
  }
  __syncwarp();
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += score[picked[k]];
  if (sigmoid_scoring) sum += 1e-20f;
  if (lane < K) {
    const int e = picked[lane];
    float wt = score[e];
    if (p.norm_topk_prob) wt /= sum;
    wt *= p.routed_scaling_factor;
    int pos = 0;  // ascending expert order
    for (int k = 0; k < K; ++k) pos += picked[k] < e;
    experts[r * K + pos] = e;
    weights[r * K + pos] = wt;
  }
}

// ---- group ----

constexpr int kGroupWarps = 16;
constexpr int kGroupThreads = 32 * kGroupWarps;
static_assert(kGroupThreads >= kMaxE, "one thread per expert in the scans");

struct Scan {
  int before, total;
};
// Exclusive prefix sum of one value per thread over the whole block, and
// the total, to every thread. warp_tot: kGroupWarps ints of shared memory.
__device__ Scan block_scan(int v, int* warp_tot) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  int x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) warp_tot[w] = x;
  __syncthreads();
  Scan s{x - v, 0};
  for (int i = 0; i < kGroupWarps; ++i) {
    const int t = warp_tot[i];
    if (i < w) s.before += t;
    s.total += t;
  }
  __syncthreads();  // warp_tot is free again
  return s;
}

// Pairs s = r·K + j in [0, n). Warp w owns the run [lo, hi); cur[w][e]
// first counts its pairs of expert e, then becomes the sorted slot of the
// next one: the pairs before it in expert e are those of warps < w and
// those of its own run already placed, so the order within an expert is
// the order of s.
__global__ void __launch_bounds__(kGroupThreads)
    moe_group_kernel(const int32_t* experts, int64_t n, int K, int E, MoeGroups g) {
  __shared__ int cur[kGroupWarps][kMaxE];
  __shared__ int warp_tot[kGroupWarps];
  pdl_begin();
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  for (int i = threadIdx.x; i < kGroupWarps * kMaxE; i += kGroupThreads) (&cur[0][0])[i] = 0;
  __syncthreads();
  // Runs of whole multiples of 32 pairs: every lane of a warp loops alike.
  const int64_t per = ((n + kGroupWarps - 1) / kGroupWarps + 31) / 32 * 32;
  const int64_t lo = min(n, w * per), hi = min(n, lo + per);
  // An expert outside [0, E) (not moe_route's output) is left out: -1.
  auto expert_of = [&](int64_t s) {
    if (s >= hi) return -1;
    const int e = experts[s];
    return e >= 0 && e < E ? e : -1;
  };
  for (int64_t b = lo; b < hi; b += 32) {
    const int e = expert_of(b + lane);
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && lane == __ffs(int(peers)) - 1) cur[w][e] += __popc(peers);
  }
  __syncthreads();

  const int e = threadIdx.x;
  int count = 0;
  if (e < E)
    for (int v = 0; v < kGroupWarps; ++v) {
      const int c = cur[v][e];
      cur[v][e] = count;
      count += c;
    }
  const Scan first = block_scan(e < E ? count : 0, warp_tot);
  if (e < E) {
    g.first[e] = first.before;
    for (int v = 0; v < kGroupWarps; ++v) cur[v][e] += first.before;
  }
  if (threadIdx.x == 0) g.first[E] = first.total;
  const int tiles_e = int((count + kMoeTileRows - 1) / kMoeTileRows);
  const Scan tile = block_scan(e < E ? tiles_e : 0, warp_tot);  // its barriers also publish cur
  if (e < E)
    for (int i = 0; i < tiles_e; ++i) g.tiles[tile.before + i] = moe_tile_code(e, i);
  if (threadIdx.x == 0) *g.n_tiles = tile.total;

  for (int64_t b = lo; b < hi; b += 32) {
    const int64_t s = b + lane;
    const int ex = expert_of(s);
    const unsigned peers = __match_any_sync(0xffffffffu, ex);
    const int pos = ex >= 0 ? cur[w][ex] + __popc(peers & ((1u << lane) - 1u)) : -1;
    __syncwarp();  // every peer has read cur[w][ex] before it moves on
    if (ex >= 0 && lane == __ffs(int(peers)) - 1) cur[w][ex] += __popc(peers);
    __syncwarp();
    if (s < hi) {
      g.slot_of[s] = pos;
      if (pos >= 0) g.src_row[pos] = int32_t(s / K);
    }
  }
}

// ---- combine ----

constexpr int kCombineThreads = 256;

// Block r: row r. kVec 4: four columns a thread (y 16-byte, shared and out
// 8-byte aligned, strides and D multiples of 4).
template <int kVec>
__global__ void __launch_bounds__(kCombineThreads) moe_combine_kernel(MoeCombineArgs a) {
  __shared__ int s_slot[kMaxK];
  __shared__ float s_w[kMaxK];
  pdl_begin();
  const int64_t r = blockIdx.x;
  const int K = int(a.K);
  // Pair j's place in the sum: its expert's rank in the row (ascending,
  // as the CPU adds them; route writes them so, the rank makes it so).
  if (int(threadIdx.x) < K) {
    const int j = threadIdx.x;
    const int32_t ej = a.experts[r * K + j];
    int rank = 0;
    for (int i = 0; i < K; ++i) {
      const int32_t ei = a.experts[r * K + i];
      rank += ei < ej || (ei == ej && i < j);
    }
    s_slot[rank] = a.slot_of[r * K + j];
    s_w[rank] = a.weights[r * K + j];
  }
  __syncthreads();
  const float gate = a.shared_gate != nullptr ? sigmoid_f(a.shared_gate[r]) : 1.0f;
  for (int64_t c = int64_t(threadIdx.x) * kVec; c < a.D; c += int64_t(kCombineThreads) * kVec) {
    float acc[kVec];
#pragma unroll
    for (int q = 0; q < kVec; ++q) acc[q] = 0.0f;
    for (int k = 0; k < K; ++k) {
      const int slot = s_slot[k];
      if (slot < 0) continue;  // a pair group left out (an expert outside [0, E))
      const float wk = s_w[k];
      const float* y = a.y + int64_t(slot) * a.ldy + c;
      float v[kVec];
      if constexpr (kVec == 4) {
        const float4 t = *reinterpret_cast<const float4*>(y);
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
      } else {
        v[0] = y[0];
      }
#pragma unroll
      for (int q = 0; q < kVec; ++q) acc[q] = __fadd_rn(acc[q], __fmul_rn(v[q], wk));
    }
    if (a.shared != nullptr) {
      const uint16_t* s = a.shared + r * a.lds + c;
      float v[kVec];
      if constexpr (kVec == 4) {
        const uint2 t = *reinterpret_cast<const uint2*>(s);
        const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&t.x));
        const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&t.y));
        v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
      } else {
        v[0] = bf(s, 0);
      }
#pragma unroll
      for (int q = 0; q < kVec; ++q)
        acc[q] = __fadd_rn(acc[q], a.shared_gate != nullptr ? __fmul_rn(gate, v[q]) : v[q]);
    }
    uint16_t* o = a.out + r * a.ldo + c;
    if constexpr (kVec == 4) {
      uint2 t;
      t.x = pack_bf16(acc[0], acc[1]);
      t.y = pack_bf16(acc[2], acc[3]);
      *reinterpret_cast<uint2*>(o) = t;
    } else {
      put_bf(o, 0, acc[0]);
    }
  }
}

}  // namespace

int64_t moe_max_tiles(int64_t slots, int64_t E) {
  if (slots <= 0 || E <= 0) return 0;
  return slots / kMoeTileRows + std::min(E, slots);
}

cudaError_t moe_router_cuda(const uint16_t* x, int64_t ldx, int64_t rows, int64_t D, const float* router, int64_t E,
                            float* logits, int64_t ldl, cudaStream_t stream) {
  if (rows < 0 || D < 1 || E < 1 || ldx < D || ldl < E) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || router == nullptr || logits == nullptr) return cudaErrorInvalidValue;
  const bool vec = D % 4 == 0 && ldx % 4 == 0 && aligned_to(x, 8) && aligned_to(router, 16);
  const int64_t kR = rows == 1 ? 1 : rows <= 4 ? 4 : 16;
  const int64_t ex_blocks = (E + kRouterWarps - 1) / kRouterWarps;
  if (ex_blocks > INT_MAX) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(ex_blocks), unsigned(std::min<int64_t>((rows + kR - 1) / kR, 65535)));
  cudaError_t e = kR == 1    ? launch_router<1>(vec, grid, stream, x, ldx, rows, D, router, E, logits, ldl)
                  : kR == 4 ? launch_router<4>(vec, grid, stream, x, ldx, rows, D, router, E, logits, ldl)
                            : launch_router<16>(vec, grid, stream, x, ldx, rows, D, router, E, logits, ldl);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

cudaError_t moe_route_cuda(const MoeRoutingParams& p, const float* logits, int64_t ld, int64_t rows, int32_t* experts,
                           float* weights, cudaStream_t stream) {
  // ops::cpu::moe_route's checks, and this kernel's bounds on E and K.
  const int64_t E = p.n_experts, K = p.top_k;
  if (E < 1 || E > kMoeMaxExperts || K < 1 || K > E || K > kMoeMaxTopK || rows < 0 || ld < E)
    return cudaErrorInvalidValue;
  if (p.scoring != MoeRoutingParams::kSoftmax && p.scoring != MoeRoutingParams::kSigmoid) return cudaErrorInvalidValue;
  if (p.scoring == MoeRoutingParams::kSigmoid) {
    const int64_t G = p.n_group;
    if (G < 1 || E % G != 0 || p.topk_group < 1 || p.topk_group > G || E / G < 2 || p.topk_group * (E / G) < K)
      return cudaErrorInvalidValue;
  } else if (p.topk_group != 1) {
    return cudaErrorInvalidValue;  // one group under softmax: the CPU's check
  }
  if (rows == 0) return cudaSuccess;
  if (logits == nullptr || experts == nullptr || weights == nullptr) return cudaErrorInvalidValue;
  const int64_t blocks = (rows + kRouteWarps - 1) / kRouteWarps;
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  if (cudaError_t e = launch_kernel(moe_route_kernel, unsigned(blocks), 32 * kRouteWarps, 0, stream, p, logits, ld,
                                    rows, experts, weights);
      e != cudaSuccess)
    return e;
  return cudaGetLastError();
}

cudaError_t moe_group_cuda(const int32_t* experts, int64_t rows, int64_t K, int64_t E, const MoeGroups& g,
                           cudaStream_t stream) {
  if (rows < 0 || K < 1 || K > kMoeMaxTopK || E < 1 || E > kMoeMaxExperts || rows * K > kMoeMaxSlots)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (experts == nullptr || g.first == nullptr || g.src_row == nullptr || g.slot_of == nullptr ||
      g.tiles == nullptr || g.n_tiles == nullptr)
    return cudaErrorInvalidValue;
  if (cudaError_t e = launch_kernel(moe_group_kernel, 1, kGroupThreads, 0, stream, experts, rows * K, int(K), int(E), g);
      e != cudaSuccess)
    return e;
  return cudaGetLastError();
}

cudaError_t moe_combine_cuda(const MoeCombineArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.K < 1 || a.K > kMoeMaxTopK || a.D < 1 || a.ldy < a.D || a.ldo < a.D ||
      (a.shared != nullptr && a.lds < a.D) || (a.shared_gate != nullptr && a.shared == nullptr))
    return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  if (a.y == nullptr || a.experts == nullptr || a.weights == nullptr || a.slot_of == nullptr || a.out == nullptr ||
      a.rows > INT_MAX)
    return cudaErrorInvalidValue;
  const bool vec = a.D % 4 == 0 && a.ldy % 4 == 0 && a.ldo % 4 == 0 && aligned_to(a.y, 16) && aligned_to(a.out, 8) &&
                   (a.shared == nullptr || (a.lds % 4 == 0 && aligned_to(a.shared, 8)));
  if (cudaError_t e = launch_kernel(vec ? moe_combine_kernel<4> : moe_combine_kernel<1>, unsigned(a.rows),
                                    kCombineThreads, 0, stream, a);
      e != cudaSuccess)
    return e;
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
