// Warp-level bf16 tensor-core products (sm_80+): mma.sync m16n8k16 with
// fp32 accumulation. bf16 products are exact in fp32, so a dot of bf16
// vectors on tensor cores differs from the FMA pipe's only in the order
// of its fp32 sums.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace replayssm::ops::cuda {

// Two floats as one register of bf16 (round to nearest), lo in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// x0, x1 as bf16 pairs hi + lo: hi the rounded values, lo what rounding
// left (x − hi, rounded), so that hi + lo carries 16 bits of mantissa — an
// fp32 operand as two bf16 products.
__device__ __forceinline__ void split_bf16(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16(x0, x1);
  lo = pack_bf16(x0 - __uint_as_float(hi << 16), x1 - __uint_as_float(hi & 0xffff0000u));
}

// d += a·b for one 16×8 tile, k = 16: a row-major 16×16, b 16×8 (k × n).
// Fragments (g = lane/4, c = lane%4; two bf16 per register, lower column
// or k in the low half): a = {(g, 2c), (g+8, 2c), (g, 2c+8), (g+8, 2c+8)},
// b = {(k 2c, n g), (k 2c+8, n g)}, d = {(g, 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1)}.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same with A's rows 8..15 zero (a1 = a3 = 0) and only d's rows 0..7
// kept (d0, d1 above): for products whose M is at most 8 (attention
// decode's query heads of one KV head), so that the accumulators of the
// unused rows take no registers. a0, a2: A's (g, 2c), (g, 2c+8).
__device__ __forceinline__ void mma_bf16_16816_top(float& d0, float& d1, uint32_t a0, uint32_t a2, uint32_t b0,
                                                   uint32_t b1) {
  [[maybe_unused]] float d2, d3;  // rows 8..15: zero in, discarded out
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%5}, {%7,%8}, {%0,%1,%9,%9};\n"
      : "+f"(d0), "+f"(d1), "=f"(d2), "=f"(d3)
      : "r"(a0), "r"(0u), "r"(a2), "r"(b0), "r"(b1), "f"(0.0f));
}

// The max and sum over the 4 lanes (c = 0..3) that hold one accumulator
// row g of a fragment; every one of them gets the result.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

}  // namespace replayssm::ops::cuda
