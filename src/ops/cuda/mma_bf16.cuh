// Warp-level bf16 tensor-core products (sm_80+): mma.sync m16n8k16 with
// fp32 accumulation. bf16 products are exact in fp32, so a dot of bf16
// vectors on tensor cores differs from the FMA pipe's only in the order
// of its fp32 sums.
#pragma once

#include <cstdint>

namespace replayssm::ops::cuda {

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
