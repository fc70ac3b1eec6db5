// RMS norms on CUDA: the four forms the models use, with the math of the
// CPU reference ops/cpu/norm.h (fp32 sums; y = w'·(x·inv) with
// inv = 1/sqrt(mean(x²) + eps), w' = w or 1 + w with unit_offset).
//
//   rmsnorm_cuda             — rows of bf16 x; also Qwen3.5's q/k norms, per
//                              head, where a token's heads are evenly spaced:
//                              rows = tokens·heads, ldx = the head stride (q in
//                              its [query | gate] rows: 2·D; k in its own
//                              buffer: D);
//   residual_rmsnorm_cuda    — the block-entry and final norm on the fp32
//                              residual stream, the previous block's bf16
//                              output added first (h += d; y = norm(h)), so the
//                              stream is read once per block;
//   rmsnorm_gated_group_cuda — Mamba2: x ⊙ silu(z) BEFORE the norm, per group;
//   rmsnorm_then_gate_cuda   — Gated DeltaNet: per head (shared w), THEN ⊙ silu(z).
//
// Activations are bf16 (uint16_t bits), weights fp32 (a norm weight is a
// few KB; the loader converts it once), strides in elements. y may alias
// the input (each element is read and written by the same thread, after
// the row's sum). Shapes are checked before anything touches the device:
// a bad one returns cudaErrorInvalidValue; rows = 0 is a no-op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::ops::cuda {

// release_early: the kernel launched after this one reads, before its PDL
// wait, nothing that the kernel launched before this one writes (the
// backend's GEMV after a norm reads only weights there): the norm then
// releases it at its start, so its blocks are scheduled and its weights
// requested while the norm waits and runs (launch.cuh).

// x, y: (rows, dim) bf16, strides ldx, ldy ≥ dim. w: (dim) or nullptr (= 1).
cudaError_t rmsnorm_cuda(const uint16_t* x, int64_t ldx, int64_t rows, int64_t dim, const float* w, float eps,
                         bool unit_offset, uint16_t* y, int64_t ldy, cudaStream_t stream, bool release_early = false);

// h: (rows, dim) fp32, stride ldh, updated to h + d when d is given.
// d: (rows, dim) bf16 stride ldd, or nullptr. y: (rows, dim) bf16 = norm(h).
cudaError_t residual_rmsnorm_cuda(float* h, int64_t ldh, const uint16_t* d, int64_t ldd, int64_t rows, int64_t dim,
                                  const float* w, float eps, bool unit_offset, uint16_t* y, int64_t ldy,
                                  cudaStream_t stream, bool release_early = false);

// x, z, y: (rows, dim) bf16; dim a multiple of group_size; w: (dim).
cudaError_t rmsnorm_gated_group_cuda(const uint16_t* x, int64_t ldx, const uint16_t* z, int64_t ldz, int64_t rows,
                                     int64_t dim, int64_t group_size, const float* w, float eps, uint16_t* y,
                                     int64_t ldy, cudaStream_t stream, bool release_early = false);

// x, z, y: (rows, heads·head_dim) bf16; w: (head_dim), shared by the heads.
cudaError_t rmsnorm_then_gate_cuda(const uint16_t* x, int64_t ldx, const uint16_t* z, int64_t ldz, int64_t rows,
                                   int64_t heads, int64_t head_dim, const float* w, float eps, uint16_t* y,
                                   int64_t ldy, cudaStream_t stream, bool release_early = false);

// Where the launch takes 16-byte pieces (8 adjacent elements a thread a
// step) instead of element accesses: the threads a group then reduces
// over — the fewest of 32, 64, 128, 256 that hold its n/8 pieces 4 a
// thread and give the launch 65,536 threads, or a piece each where fewer
// do — for groups of n among n_groups (rows × groups a
// row) of the residual stream (residual_rmsnorm_cuda) or of bf16 rows (the
// other three), given n % 8 = 0, every row and the weights 16-byte
// aligned; 0 where the element kernels run. Pieces change the order of the
// sums (bits, not tolerances); the residual stream keeps the order that
// the GEMV's fused norm shares (gemv.h) — it takes pieces only at ≥ 256
// groups of more than 512. Exposed for the tests.
int norm_pieces_threads(int64_t n, int64_t n_groups, bool residual);
// How many of this process's norm launches (every thread's, every entry
// point above) took the 16-byte pieces: the tests read it before and after
// a call to check which kernels ran, not only the rule. Thread-safe.
int64_t norm_pieces_launches();

}  // namespace replayssm::ops::cuda
