// Warp-level TF32 tensor-core products at fp32 accuracy (sm_80+).
//
// mma.sync m16n8k8 multiplies a 16×8 tile A by an 8×8 tile B into a 16×8
// fp32 accumulator, the operands as TF32 (10 mantissa bits). The replay
// kernels' operands are an fp32 state (or fp32 fold coefficients) against
// bf16 log vectors, which TF32 holds exactly; so the fp32 side is split
// into hi + lo (both TF32) and multiplied twice: the product then misses
// only lo's own truncation, < 2^−20 of the value, where one TF32 product
// would miss 2^−11 (outside the state tolerance of the CPU parity tests).
//
// Fragments (PTX ISA, mma.m16n8k8 .tf32), lane = 4·g + t:
//   A: a0 (row g, k t), a1 (row g+8, k t), a2 (row g, k t+4), a3 (row g+8, k t+4)
//   B: b0 (k t, col g), b1 (k t+4, col g)
//   C/D: c0 (row g, col 2t), c1 (row g, col 2t+1), c2 (row g+8, col 2t), c3 (row g+8, col 2t+1)
// The sum over k does not care which column of the data is which k, and
// the product not which column is which n, so callers map both to what
// their 16-byte loads hold (mamba2_replay_mma.cu).
#pragma once

#include <cstdint>

namespace replayssm::ops::cuda {

// x ≈ hi + lo, both TF32 by truncation: three instructions, where
// cvt.rna.tf32 is emulated on sm_90 (about five each: H200 SASS of the GDN
// verify pass; rounding split this way cost 160 of a pass's 289
// instructions). hi keeps x's top 10 mantissa bits, x − hi is exact in
// fp32 and below 2^−10·|x|, and lo truncates that: hi + lo misses x by
// under 2^−20·|x|.
struct Tf32Pair {
  uint32_t hi, lo;
};
__device__ __forceinline__ Tf32Pair tf32_split(float x) {
  constexpr uint32_t kMask = 0xffffe000u;  // sign, exponent, 10 mantissa bits
  const uint32_t hi = __float_as_uint(x) & kMask;
  return {hi, __float_as_uint(x - __uint_as_float(hi)) & kMask};
}

// d += A·B over one k8 step; B's values already TF32 (bf16 widened).
__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, float b0,
                                         float b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
}

// d += A·B with A given in fp32 (a0..a3 as the A fragment), at fp32
// accuracy: A's hi and lo parts, two products.
__device__ __forceinline__ void mma_f32_split(float (&d)[4], float a0, float a1, float a2, float a3, float b0,
                                              float b1) {
  const Tf32Pair p0 = tf32_split(a0), p1 = tf32_split(a1), p2 = tf32_split(a2), p3 = tf32_split(a3);
  mma_tf32(d, p0.hi, p1.hi, p2.hi, p3.hi, b0, b1);
  mma_tf32(d, p0.lo, p1.lo, p2.lo, p3.lo, b0, b1);
}

}  // namespace replayssm::ops::cuda
