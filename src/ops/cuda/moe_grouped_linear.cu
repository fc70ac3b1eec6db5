// moe_grouped_linear_cuda (see moe.h): every chosen expert's sorted rows
// through its (N, Kd) matrix on tensor cores (mma.sync m16n8k16, bf16 in,
// fp32 sums).
//
// A block is one tile of moe_group_cuda's list (up to kMoeTileRows rows of
// one expert: the M side) by kBN output columns, and streams that expert's
// kBN weight rows through a cp.async ring of kStages k-slices once. At
// decode an expert has a row or a few, so each weight byte is read once a
// call and the product is a stream of the expert's matrix; the rows are the
// M side so that the weights are never re-read per row. An m16 fragment
// with no live row is skipped (a tile of 3 rows runs one m16 of the four).
// Two shapes of block: kBN = 32 while experts average few rows (more
// blocks over the weights, so the whole GPU streams them), kBN = 128 once
// the tiles are full (the rows' fragments then serve four times the
// columns per shared-memory read).
//
// Alignment: the cp.async ring (kVec) needs Kd % 8 == 0, ldx % 8 == 0 and
// x, w on 16 bytes; any other layout takes the same kernel with plain
// element loads into shared memory (slower, for the odd shapes of the test
// fixtures). Outputs go two columns a store where ldo is even and out is
// aligned to the pair, else one.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>

#include "ops/cuda/launch.cuh"
#include "ops/cuda/mma_bf16.cuh"
#include "ops/cuda/moe.h"
#include "ops/cuda/moe_tiles.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTM = int(kMoeTileRows);  // rows of a tile: kMF fragments of 16
constexpr int kMF = kTM / 16;
constexpr int kBK = 64;  // k per ring slot
// Row stride of the shared tiles in bf16: 144 bytes, so the 8 rows × 4
// columns of a fragment load fall in 32 distinct banks, and every 16-byte
// chunk stays 16-byte aligned for cp.async.
constexpr int kLds = kBK + 8;
constexpr int kChunks = kBK / 8;  // 16-byte chunks per row of a slot
static_assert((32 * kChunks) % kThreads == 0, "the weight rows' chunks spread evenly over the threads");

template <int kBN>
struct Shape;
template <>
struct Shape<32> {
  static constexpr int kStages = 5;
};
template <>
struct Shape<128> {
  static constexpr int kStages = 4;
};
template <int kBN>
constexpr size_t smem_bytes() {
  return size_t(Shape<kBN>::kStages) * (kTM + kBN) * kLds * sizeof(uint16_t);
}

__device__ __forceinline__ uint32_t lds32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Eight bf16 of `row` from column k into dst (16 bytes of shared memory),
// zeros past Kd: by cp.async where kVec, else by plain loads.
template <bool kVec>
__device__ __forceinline__ void load8(uint16_t* dst, const uint16_t* row, int64_t k, int64_t Kd) {
  if constexpr (kVec) {
    if (k < Kd) cp_async<16>(dst, row + k);  // Kd % 8 == 0: the chunk is whole
    else *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) dst[e] = k + e < Kd ? row[k + e] : uint16_t(0);
  }
}

struct Launch {
  MoeGroupedLinearArgs a;
  bool pair = false;  // two output columns a store
};

template <int kBN, bool kVec, bool kF32>
__global__ void __launch_bounds__(kThreads) grouped_linear_kernel(Launch L) {
  constexpr int kStages = Shape<kBN>::kStages;
  constexpr int kWN = kBN / kWarps, kNF = kWN / 8;  // a warp's columns, in n8 fragments
  constexpr int kSlot = (kTM + kBN) * kLds;         // a ring slot: A rows, then B rows
  extern __shared__ __align__(16) uint16_t smem[];
  __shared__ int64_t s_xoff[kTM];
  const MoeGroupedLinearArgs& a = L.a;
  pdl_begin();
  const int t = blockIdx.x;
  if (t >= *a.n_tiles) return;
  const int code = a.tiles[t];
  const int e = moe_tile_expert(code);
  const int start = a.first[e] + moe_tile_index(code) * kTM;
  const int rows = min(kTM, a.first[e + 1] - start);
  if (rows <= 0) return;
  const int64_t N = a.N, Kd = a.Kd, n0 = int64_t(blockIdx.y) * kBN;
  const uint16_t* w = a.w + int64_t(e) * N * Kd;
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    const int64_t slot = start + i;
    s_xoff[i] = (a.x_row != nullptr ? int64_t(a.x_row[slot]) : slot) * a.ldx;
  }
  __syncthreads();

  // Ring slot s gets k-slice kt: the tile's rows of x, then the kBN weight
  // rows (zeros past N: their columns are never stored, but zeros keep
  // the products finite). A rows past `rows` are left as they are: an
  // mma row's outputs depend on that row alone, and those are not stored.
  const int nk = int((Kd + kBK - 1) / kBK);
  auto load = [&](int s, int kt) {
    uint16_t* As = smem + s * kSlot;
    uint16_t* Bs = As + kTM * kLds;
    const int64_t k0 = int64_t(kt) * kBK;
    for (int i = threadIdx.x; i < rows * kChunks; i += kThreads) {
      const int r = i / kChunks, q = i % kChunks;
      load8<kVec>(As + r * kLds + 8 * q, a.x + s_xoff[r], k0 + 8 * q, Kd);
    }
#pragma unroll
    for (int j = 0; j < kBN * kChunks / kThreads; ++j) {
      const int i = threadIdx.x + j * kThreads, r = i / kChunks, q = i % kChunks;
      uint16_t* dst = Bs + r * kLds + 8 * q;
      if (n0 + r < N) load8<kVec>(dst, w + (n0 + r) * Kd, k0 + 8 * q, Kd);
      else *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  };

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
  const int live_mf = (rows + 15) / 16;
  float acc[kMF][kNF][4];
#pragma unroll
  for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
    for (int nf = 0; nf < kNF; ++nf)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mf][nf][q] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nk) load(s, s);
    cp_async_commit();  // one group per slot, empty or not: the wait below counts them
  }
  for (int kt = 0; kt < nk; ++kt) {
    cp_async_wait<kStages - 2>();  // slice kt has landed (this thread's copies)
    __syncthreads();               // ... everyone's; and slice kt − 1's slot is free
    if (kt + kStages - 1 < nk) load((kt + kStages - 1) % kStages, kt + kStages - 1);
    cp_async_commit();
    const uint16_t* As = smem + (kt % kStages) * kSlot;
    const uint16_t* Bs = As + kTM * kLds + warp * kWN * kLds;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t b[kNF][2];
#pragma unroll
      for (int nf = 0; nf < kNF; ++nf) {
        const uint16_t* p = Bs + (nf * 8 + g) * kLds + kk + 2 * c;
        b[nf][0] = lds32(p), b[nf][1] = lds32(p + 8);
      }
#pragma unroll
      for (int mf = 0; mf < kMF; ++mf) {
        if (mf >= live_mf) break;
        const uint16_t* p = As + (mf * 16 + g) * kLds + kk + 2 * c;
        const uint32_t af[4] = {lds32(p), lds32(p + 8 * kLds), lds32(p + 8), lds32(p + 8 * kLds + 8)};
#pragma unroll
        for (int nf = 0; nf < kNF; ++nf) mma_bf16_16816(acc[mf][nf], af, b[nf][0], b[nf][1]);
      }
    }
  }

  // Fragment d: rows g and g + 8, columns 2c and 2c + 1 of each 16 × 8.
#pragma unroll
  for (int mf = 0; mf < kMF; ++mf) {
    if (mf >= live_mf) break;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = mf * 16 + g + 8 * h;
      if (r >= rows) continue;
      const int64_t slot = start + r;
#pragma unroll
      for (int nf = 0; nf < kNF; ++nf) {
        const int64_t col = n0 + warp * kWN + nf * 8 + 2 * c;
        if (col >= N) continue;
        const float v0 = acc[mf][nf][2 * h], v1 = acc[mf][nf][2 * h + 1];
        const bool both = col + 1 < N;
        if constexpr (kF32) {
          float* o = a.out_f32 + slot * a.ldo + col;
          if (both && L.pair) {
            *reinterpret_cast<float2*>(o) = make_float2(v0, v1);
          } else {
            o[0] = v0;
            if (both) o[1] = v1;
          }
        } else {
          uint16_t* o = a.out + slot * a.ldo + col;
          if (both && L.pair) {
            *reinterpret_cast<uint32_t*>(o) = pack_bf16(v0, v1);
          } else {
            put_bf(o, 0, v0);
            if (both) put_bf(o, 1, v1);
          }
        }
      }
    }
  }
}

template <int kBN, bool kVec>
cudaError_t launch_shape(const Launch& L, dim3 grid, cudaStream_t stream) {
  auto kernel = L.a.out_f32 != nullptr ? grouped_linear_kernel<kBN, kVec, true> : grouped_linear_kernel<kBN, kVec, false>;
  constexpr size_t shm = smem_bytes<kBN>();
  if (!launches_dry())
    if (cudaError_t e = allow_dynamic_smem(kernel, shm); e != cudaSuccess) return e;
  return launch_kernel(kernel, grid, kThreads, shm, stream, L);
}

}  // namespace

cudaError_t moe_grouped_linear_cuda(const MoeGroupedLinearArgs& a, cudaStream_t stream) {
  if (a.slots < 0 || a.slots > kMoeMaxSlots || a.E < 1 || a.E > kMoeMaxExperts || a.N < 1 || a.Kd < 1 ||
      a.Kd > INT_MAX || a.ldx < a.Kd || a.ldo < a.N || (a.out == nullptr) == (a.out_f32 == nullptr))
    return cudaErrorInvalidValue;
  if (a.slots == 0) return cudaSuccess;
  if (a.x == nullptr || a.w == nullptr || a.first == nullptr || a.tiles == nullptr || a.n_tiles == nullptr)
    return cudaErrorInvalidValue;
  // Wide blocks once an expert averages a full tile of rows.
  const bool wide = a.slots >= a.E * kMoeTileRows;
  const int bn = wide ? 128 : 32;
  const int64_t col_blocks = (a.N + bn - 1) / bn;
  if (col_blocks > 65535) return cudaErrorInvalidValue;
  const int64_t tiles = moe_max_tiles(a.slots, a.E);
  Launch L;
  L.a = a;
  L.pair = a.ldo % 2 == 0 && (a.out_f32 != nullptr ? aligned_to(a.out_f32, 8) : aligned_to(a.out, 4));
  const bool vec = a.Kd % 8 == 0 && a.ldx % 8 == 0 && aligned_to(a.x, 16) && aligned_to(a.w, 16);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(col_blocks));
  cudaError_t e = wide ? (vec ? launch_shape<128, true>(L, grid, stream) : launch_shape<128, false>(L, grid, stream))
                       : (vec ? launch_shape<32, true>(L, grid, stream) : launch_shape<32, false>(L, grid, stream));
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace replayssm::ops::cuda
