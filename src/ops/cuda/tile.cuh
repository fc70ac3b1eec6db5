// Device helpers shared by the SSM decode kernels: bf16 access, warp sums,
// 16-byte loads of the log into shared memory, and the register tile that
// the decode kernels stream a head's state through.
//
// What the H200 measurements taught (docs/perf/README.md): a decode kernel
// is a state read (maybe a write) plus a little latency-bound work on the
// token and the log. It reaches the bandwidth floor when (1) the state's
// first rows are requested before that work and later rows one pass ahead,
// in a steady loop per block, (2) the per-element coefficients (B, C) are
// loaded once per pass as 16-byte vectors, not per element, and (3) rows
// are reduced with a transposed butterfly. Kernels that loaded a whole
// slice then exited, or streamed through a deep shared-memory ring with few
// warps, were slower.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace replayssm::ops::cuda {

__device__ __forceinline__ float bf(const uint16_t* p, int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void put_bf(uint16_t* p, int64_t i, float v) {
  reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
}

__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Inclusive prefix sum over v[0..n) in shared memory, n ≤ 64, by one warp.
__device__ __forceinline__ void warp_prefix_sum(float* v, int n, int lane) {
  float carry = 0.0f;
  for (int base = 0; base < n; base += 32) {
    float x = base + lane < n ? v[base + lane] : 0.0f;
    for (int o = 1; o < 32; o <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (base + lane < n) v[base + lane] = x + carry;
    carry += __shfl_sync(0xffffffffu, x, 31);
  }
}

// cp.async: kBytes (4, 8 or 16) from global to shared memory, in flight
// until a cp_async_wait<n> leaves at most n committed groups pending.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(kBytes) : "memory");
}
// Asks L2 to fetch `bytes` (a multiple of 16) at p (16-byte aligned) from
// DRAM, without a register or shared memory to land in (sm_90 bulk
// prefetch): a stream's reads further ahead than its registers hold.
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Sums of acc[k] over the warp for every k < M at once (a transposed
// butterfly: M − 1 + 5 − log2 M shuffles instead of 5·M). Afterwards value
// k's sum is in the lanes with summed_index<M>(lane) == k.
// Stage K of transposed_sums (K values still per lane, exchanged at lane
// distance o); templated so that every index into acc is a constant.
template <int M, int K>
__device__ __forceinline__ void transposed_stage(float (&acc)[M], int lane, int o) {
  if constexpr (K >= 1) {
    const bool upper = lane & o;
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const float send = upper ? acc[i] : acc[i + K];
      const float keep = upper ? acc[i + K] : acc[i];
      acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
    transposed_stage<M, K / 2>(acc, lane, o / 2);
  } else {
    for (; o >= 1; o /= 2) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], o);
  }
}
template <int M>
__device__ __forceinline__ void transposed_sums(float (&acc)[M], int lane) {
  static_assert((M & (M - 1)) == 0 && M <= 32, "M: a power of two ≤ 32");
  transposed_stage<M, M / 2>(acc, lane, 16);
}
template <int M>
__device__ __forceinline__ int summed_index(int lane) {
  int r = 0;
#pragma unroll
  for (int k = M / 2, o = 16; k >= 1; k /= 2, o /= 2)
    if (lane & o) r += k;
  return r;
}
// One lane per value writes its sum: the lowest lane of the value's group.
template <int M>
__device__ __forceinline__ bool sum_writer(int lane) {
  return (lane & (32 / M - 1)) == 0;
}

// A block's slice of a head's fp32 state, held in registers: up to
// nw·kR rows × cols of a row-major matrix with row stride ld. Warp w owns
// rows w + nw·r (r < kR); lane l owns columns (l + 32·j)·kV + e (j < kJ,
// e < kV). kV = 4 (2): 16-byte (8-byte) accesses, coalesced across the warp;
// the vector paths need cols a multiple of kV and 16 (8)-byte aligned rows.
template <int kV, int kJ, int kR>
struct Tile {
  static constexpr int kRows = kR, kColChunks = kJ, kVec = kV;
  static constexpr int kCols = 32 * kJ * kV;  // columns a warp row covers: a GDN block's slice
  float v[kR][kJ][kV];

  __device__ static int col(int lane, int j, int e) { return (lane + 32 * j) * kV + e; }
  __device__ static int row(int w, int nw, int r) { return w + nw * r; }

  __device__ void load(const float* m, int rows, int cols, int64_t ld, int w, int nw, int lane) {
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int i = row(w, nw, r);
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        if constexpr (kV == 4) {
          float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
          if (i < rows && col(lane, j, 0) < cols) x = *reinterpret_cast<const float4*>(m + i * ld + col(lane, j, 0));
          v[r][j][0] = x.x, v[r][j][1] = x.y, v[r][j][2] = x.z, v[r][j][3] = x.w;
        } else if constexpr (kV == 2) {
          float2 x = make_float2(0.f, 0.f);
          if (i < rows && col(lane, j, 0) < cols) x = *reinterpret_cast<const float2*>(m + i * ld + col(lane, j, 0));
          v[r][j][0] = x.x, v[r][j][1] = x.y;
        } else {
#pragma unroll
          for (int e = 0; e < kV; ++e) {
            const int c = col(lane, j, e);
            v[r][j][e] = i < rows && c < cols ? m[i * ld + c] : 0.0f;
          }
        }
      }
    }
  }

  // As load, for a whole tile (rows ≥ nw·kR, cols ≥ kCols: the caller's
  // block-uniform test): no bounds, and each row one add past the last.
  // H200 (ncu, GDN replay's one-token pass, 2026-12-04, 0ed4a48): load's
  // bounds and 64-bit row products were 123 of a pass's 196 instructions.
  __device__ void load_whole(const float* m, int64_t ld, int w, int nw, int lane) {
    const float* p = m + w * ld + col(lane, 0, 0);
    const int64_t rs = nw * ld;
#pragma unroll
    for (int r = 0; r < kR; ++r, p += rs)
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const float* q = p + 32 * j * kV;
        if constexpr (kV == 4) {
          const float4 x = *reinterpret_cast<const float4*>(q);
          v[r][j][0] = x.x, v[r][j][1] = x.y, v[r][j][2] = x.z, v[r][j][3] = x.w;
        } else if constexpr (kV == 2) {
          const float2 x = *reinterpret_cast<const float2*>(q);
          v[r][j][0] = x.x, v[r][j][1] = x.y;
        } else {
#pragma unroll
          for (int e = 0; e < kV; ++e) v[r][j][e] = q[e];
        }
      }
  }

  // Requests this thread's elements of m (as load) into shared memory at
  // dst (row stride ldd) with cp.async, 16 or 8 bytes at a time where kV
  // allows: no registers held, nothing waited for (cp_async_commit /
  // cp_async_wait). The thread that copied an element may read it after
  // its wait without a barrier; others need one.
  __device__ static void copy_async(float* dst, const float* m, int rows, int cols, int64_t ld, int ldd, int w, int nw,
                                    int lane) {
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int i = row(w, nw, r);
      if (i >= rows) continue;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        if constexpr (kV == 4 || kV == 2) {
          if (col(lane, j, 0) < cols) cp_async<4 * kV>(dst + i * ldd + col(lane, j, 0), m + i * ld + col(lane, j, 0));
        } else {
#pragma unroll
          for (int e = 0; e < kV; ++e)
            if (col(lane, j, e) < cols) cp_async<4>(dst + i * ldd + col(lane, j, e), m + i * ld + col(lane, j, e));
        }
      }
    }
  }

  // This thread's columns of a shared-memory vector v (length cols): one
  // 16-byte load per chunk (v must be 16-byte aligned when kV = 4), so the
  // per-element coefficients cost nothing in the row loops.
  __device__ static void columns(const float* v, int cols, int lane, float (&out)[kJ][kV]) {
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      if constexpr (kV == 4) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (col(lane, j, 0) < cols) x = *reinterpret_cast<const float4*>(v + col(lane, j, 0));
        out[j][0] = x.x, out[j][1] = x.y, out[j][2] = x.z, out[j][3] = x.w;
      } else if constexpr (kV == 2) {
        float2 x = make_float2(0.f, 0.f);
        if (col(lane, j, 0) < cols) x = *reinterpret_cast<const float2*>(v + col(lane, j, 0));
        out[j][0] = x.x, out[j][1] = x.y;
      } else {
#pragma unroll
        for (int e = 0; e < kV; ++e) out[j][e] = col(lane, j, e) < cols ? v[col(lane, j, e)] : 0.0f;
      }
    }
  }

  // As columns, every lane loading without a bound or zeros: a lane whose
  // columns lie past the row reads the row's last kV values instead (v's
  // rows n4 ≥ kV apart, n4 a multiple of kV), so its products must go
  // unused. For loops whose loads would otherwise each carry a predicate
  // and the zeroing of their registers.
  __device__ static void columns_unmasked(const float* v, int n4, int lane, float (&out)[kJ][kV]) {
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int c = min(col(lane, j, 0), n4 - kV);
      if constexpr (kV == 4) {
        const float4 x = *reinterpret_cast<const float4*>(v + c);
        out[j][0] = x.x, out[j][1] = x.y, out[j][2] = x.z, out[j][3] = x.w;
      } else if constexpr (kV == 2) {
        const float2 x = *reinterpret_cast<const float2*>(v + c);
        out[j][0] = x.x, out[j][1] = x.y;
      } else {
#pragma unroll
        for (int e = 0; e < kV; ++e) out[j][e] = v[c + e];
      }
    }
  }

  // Sums of acc[r] over the warp for every r at once (a transposed
  // butterfly, as transposed_sums). This loop form is kept for the row
  // tiles: with the recursive one the 4-warp replay took 8 more registers
  // (64 → 72, a wave more at batch 8); for 16 values it left the array in
  // local memory, hence transposed_sums. Afterwards row r's sum is in the
  // lanes summed_row(lane) == r.
  __device__ static void row_sums(float (&acc)[kR], int lane) {
    int o = 16;
#pragma unroll
    for (int k = kR / 2; k >= 1; k /= 2, o /= 2) {
      const bool upper = lane & o;
#pragma unroll
      for (int i = 0; i < k; ++i) {
        const float send = upper ? acc[i] : acc[i + k];
        const float keep = upper ? acc[i + k] : acc[i];
        acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
      }
    }
    for (; o >= 1; o /= 2) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], o);
  }
  __device__ static int summed_row(int lane) { return summed_index<kR>(lane); }
  // One lane per row writes its sum: the lowest lane of the row's group.
  __device__ static bool row_writer(int lane) { return sum_writer<kR>(lane); }

  __device__ void store(float* m, int rows, int cols, int64_t ld, int w, int nw, int lane) const {
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int i = row(w, nw, r);
      if (i >= rows) continue;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        if constexpr (kV == 4) {
          if (col(lane, j, 0) < cols)
            *reinterpret_cast<float4*>(m + i * ld + col(lane, j, 0)) =
                make_float4(v[r][j][0], v[r][j][1], v[r][j][2], v[r][j][3]);
        } else if constexpr (kV == 2) {
          if (col(lane, j, 0) < cols) *reinterpret_cast<float2*>(m + i * ld + col(lane, j, 0)) = make_float2(v[r][j][0], v[r][j][1]);
        } else {
#pragma unroll
          for (int e = 0; e < kV; ++e) {
            const int c = col(lane, j, e);
            if (c < cols) m[i * ld + c] = v[r][j][e];
          }
        }
      }
    }
  }
};

// Calls f(r, k) for every row r < n and chunk k < chunks, spread over the
// block as the element r·chunks + k to thread (r·chunks + k) mod blockDim.x
// (a loop over i = r·chunks + k by blockDim.x). kStepped: the row and chunk
// stepped, not divided out of i per element — one division a thread (H200,
// ncu: the log copies' divisions were a tenth of a GDN verify block's
// instructions); not the default, as it cost kernels held at their
// register bound 8–24 bytes of spills.
template <bool kStepped, typename F>
__device__ __forceinline__ void for_rows_chunks(int n, int chunks, F&& f) {
  if constexpr (kStepped) {
    const int dr = blockDim.x / chunks, dk = blockDim.x % chunks;
    int r = threadIdx.x / chunks, k = threadIdx.x % chunks;
    while (r < n) {
      f(r, k);
      r += dr, k += dk;
      if (k >= chunks) k -= chunks, ++r;
    }
  } else {
    for (int i = threadIdx.x; i < n * chunks; i += blockDim.x) f(i / chunks, i % chunks);
  }
}

// Row maps of the bulk loaders below (the *_at forms): the source row of
// loaded row r, whose values start at src + row(r)·lds. Consecutive: row r
// of a strided run, what the plain forms read; a paged log's map
// (log_pages.cuh) gives each entry's own row. Alignment is judged on src
// and lds, so it holds for every row a map may give.
struct Consecutive {
  __device__ __forceinline__ int64_t operator()(int r) const { return r; }
};

// n rows of `cols` bf16 values at src (row stride lds elements) into dst
// as fp32 (row stride ldd, default cols), by the whole block: 16-byte
// loads when the layout allows, so the log arrives in one or two rounds.
template <bool kStepped = false, typename RowOf>
__device__ inline void load_bf_rows_at(float* dst, const uint16_t* src, RowOf row_of, int n, int cols, int64_t lds,
                                       int ldd = 0) {
  if (ldd == 0) ldd = cols;
  const bool vec = cols % 8 == 0 && lds % 8 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
  if (vec) {
    for_rows_chunks<kStepped>(n, cols / 8, [&](int r, int k) {
      const int c = 8 * k;
      const uint4 x = *reinterpret_cast<const uint4*>(src + row_of(r) * lds + c);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&x);
      float* d = dst + r * ldd + c;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 f = __bfloat1622float2(h[q]);
        d[2 * q] = f.x, d[2 * q + 1] = f.y;
      }
    });
  } else {
    for_rows_chunks<kStepped>(n, cols, [&](int r, int c) { dst[r * ldd + c] = bf(src, row_of(r) * lds + c); });
  }
}
template <bool kStepped = false>
__device__ inline void load_bf_rows(float* dst, const uint16_t* src, int n, int cols, int64_t lds, int ldd = 0) {
  load_bf_rows_at<kStepped>(dst, src, Consecutive{}, n, cols, lds, ldd);
}

// n rows of `cols` fp32 at src (row stride lds) into shared memory at dst
// (row stride ldd), by the whole block with cp.async — 16 bytes at a time
// where the layout allows, else 4 — for the caller to commit and wait for.
template <bool kStepped = false, typename RowOf>
__device__ inline void copy_async_rows_at(float* dst, const float* src, RowOf row_of, int n, int cols, int64_t lds,
                                          int ldd) {
  const bool vec = cols % 4 == 0 && lds % 4 == 0 && ldd % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  if (vec) {
    for_rows_chunks<kStepped>(n, cols / 4, [&](int r, int k) {
      cp_async<16>(dst + r * ldd + 4 * k, src + row_of(r) * lds + 4 * k);
    });
  } else {
    for_rows_chunks<kStepped>(n, cols,
                              [&](int r, int c) { cp_async<4>(dst + r * ldd + c, src + row_of(r) * lds + c); });
  }
}
template <bool kStepped = false>
__device__ inline void copy_async_rows(float* dst, const float* src, int n, int cols, int64_t lds, int ldd) {
  copy_async_rows_at<kStepped>(dst, src, Consecutive{}, n, cols, lds, ldd);
}

// bf16 elements per cp.async of copy_async_bf_rows: 8 (16 bytes), 2 (4
// bytes) or 1 (a plain copy), as the layout allows.
__device__ __forceinline__ int bf_rows_chunk(const uint16_t* dst, const uint16_t* src, int cols, int64_t lds, int ldd) {
  auto aligned = [&](int k) {
    return cols % k == 0 && lds % k == 0 && ldd % k == 0 && reinterpret_cast<uintptr_t>(src) % (2 * k) == 0 &&
           reinterpret_cast<uintptr_t>(dst) % (2 * k) == 0;
  };
  return aligned(8) ? 8 : aligned(2) ? 2 : 1;
}

// The same for bf16 rows, kept as bf16: 16 or 4 bytes at a time; a layout
// that allows neither (odd widths) is copied with plain loads, visible
// after the same wait and barrier.
template <bool kStepped = false, typename RowOf>
__device__ inline void copy_async_bf_rows_at(uint16_t* dst, const uint16_t* src, RowOf row_of, int n, int cols,
                                             int64_t lds, int ldd) {
  const int k = bf_rows_chunk(dst, src, cols, lds, ldd);
  for_rows_chunks<kStepped>(n, cols / k, [&](int r, int j) {
    uint16_t* d = dst + r * ldd + j * k;
    const uint16_t* g = src + row_of(r) * lds + j * k;
    if (k == 8) cp_async<16>(d, g);
    else if (k == 2) cp_async<4>(d, g);
    else *d = *g;
  });
}
template <bool kStepped = false>
__device__ inline void copy_async_bf_rows(uint16_t* dst, const uint16_t* src, int n, int cols, int64_t lds, int ldd) {
  copy_async_bf_rows_at<kStepped>(dst, src, Consecutive{}, n, cols, lds, ldd);
}

// The rows copy_async_bf_rows(stage, src, n, cols, lds, ldst) staged,
// as fp32 into dst (row stride ldd). Each thread converts the chunks it
// copied itself (the same loop), so after its own cp_async_wait it needs
// no barrier; `k` is bf_rows_chunk of that copy.
__device__ inline void unstage_bf_rows(float* dst, int ldd, const uint16_t* stage, int ldst, int n, int cols, int k) {
  for_rows_chunks<false>(n, cols / k, [&](int r, int j) {
    const int c = j * k;
    float* d = dst + r * ldd + c;
    if (k == 8) {
      const uint4 x = *reinterpret_cast<const uint4*>(stage + r * ldst + c);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&x);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 f = __bfloat1622float2(h[q]);
        d[2 * q] = f.x, d[2 * q + 1] = f.y;
      }
    } else {
      for (int e = 0; e < k; ++e) d[e] = bf(stage, r * ldst + c + e);
    }
  });
}

// load_bf_rows for fp32 rows (row stride of dst: cols).
template <typename RowOf>
__device__ inline void load_f32_rows_at(float* dst, const float* src, RowOf row_of, int n, int cols, int64_t lds) {
  const bool vec = cols % 4 == 0 && lds % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
  if (vec) {
    for_rows_chunks<false>(n, cols / 4, [&](int r, int k) {
      const float4 x = *reinterpret_cast<const float4*>(src + row_of(r) * lds + 4 * k);
      float* d = dst + r * cols + 4 * k;  // shared memory, not necessarily 16-byte aligned
      d[0] = x.x, d[1] = x.y, d[2] = x.z, d[3] = x.w;
    });
  } else {
    for_rows_chunks<false>(n, cols, [&](int r, int c) { dst[r * cols + c] = src[row_of(r) * lds + c]; });
  }
}
__device__ inline void load_f32_rows(float* dst, const float* src, int n, int cols, int64_t lds) {
  load_f32_rows_at(dst, src, Consecutive{}, n, cols, lds);
}

// Mamba2's blocks: a slice of kR rows per warp, all of a row's columns
// (its dot with C is a warp sum). Calls f(TileT{}) for `cols` ≤ 256.
constexpr int kMaxTileCols = 256;
template <int kR, typename F>
cudaError_t with_row_slice_tile(int cols, F&& f) {
  if (cols == 128) return f(Tile<4, 1, kR>{});
  if (cols == 256) return f(Tile<4, 2, kR>{});
  if (cols >= 1 && cols <= kMaxTileCols) return f(Tile<1, 8, kR>{});
  return cudaErrorInvalidValue;
}

// GDN's streaming blocks: a slice of `slice` columns (64, 128 or 256,
// dividing cols) of kR rows per warp per pass; a width no slice divides:
// all of cols ≤ 256 in one slice, scalar. Calls f(TileT{}), whose slice is
// TileT::kCols wide.
inline int gdn_slice_cols(int cols, int slice) {
  if ((slice == 64 || slice == 128 || slice == 256) && cols % slice == 0) return slice;
  return cols >= 1 && cols <= kMaxTileCols ? kMaxTileCols : 0;
}
template <int kR, typename F>
cudaError_t with_gdn_slice_tile(int cols, int slice, F&& f) {
  if (slice == 64 && cols % 64 == 0) return f(Tile<2, 1, kR>{});
  if (slice == 128 && cols % 128 == 0) return f(Tile<4, 1, kR>{});
  if (slice == 256 && cols % 256 == 0) return f(Tile<4, 2, kR>{});
  if (cols >= 1 && cols <= kMaxTileCols) return f(Tile<1, 8, kR>{});
  return cudaErrorInvalidValue;
}

// GDN's blocks: a slice of 32 columns (one per lane), every row (its Sᵀk
// is a sum over rows: per thread, then across warps). Calls f(TileT{}, nw)
// with nw warps covering `rows` ≤ 512.
constexpr int kColumnSlice = 32;
template <typename F>
cudaError_t with_column_slice_tile(int rows, F&& f) {
  auto warps = [&](int kR) { return (rows + kR - 1) / kR; };
  if (rows < 1) return cudaErrorInvalidValue;
  if (rows <= 8 * 4) return f(Tile<1, 1, 4>{}, warps(4));
  if (rows <= 8 * 8) return f(Tile<1, 1, 8>{}, warps(8));
  if (rows <= 8 * 16) return f(Tile<1, 1, 16>{}, warps(16));
  if (rows <= 16 * 32) return f(Tile<1, 1, 32>{}, warps(32));
  return cudaErrorInvalidValue;
}

// Column sums over a column-slice block's warps, for n vectors at once:
// part(q) is this thread's partial for vector q (its column = lane);
// out[q·32 + lane] gets the sum. red: (n, nw, 32) shared. Ends with a barrier.
template <typename Part>
__device__ void column_sums(int n, Part&& part, float* red, float* out, int nw, int w, int lane) {
  for (int q = 0; q < n; ++q) red[(q * nw + w) * kColumnSlice + lane] = part(q);
  __syncthreads();
  for (int i = threadIdx.x; i < n * kColumnSlice; i += blockDim.x) {
    const int q = i / kColumnSlice, c = i % kColumnSlice;
    float s = 0.0f;
    for (int k = 0; k < nw; ++k) s += red[(q * nw + k) * kColumnSlice + c];
    out[i] = s;
  }
  __syncthreads();
}

// Lets `kernel` launch with `bytes` of dynamic shared memory: above the
// 48 KB default it must be raised per kernel; above what an SM has it
// cannot. A failure is returned and not left pending for the caller's
// next launch (cudaGetLastError would report it there).
template <typename Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  if (bytes > 227 * 1024) return cudaErrorInvalidValue;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e != cudaSuccess) cudaGetLastError();
  return e;
}

}  // namespace replayssm::ops::cuda
