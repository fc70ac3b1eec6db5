// Linear layers for a few rows (decode at batch ≤ 8) on CUDA: y = x·Wᵀ (+ b)
// with bf16 x and W, fp32 accumulation, bf16 or fp32 y — Gemm::linear's
// math (gemm.h) for the case where reading W once is the whole cost.
//
// Two warps per output row (one for rows too short to share) stream that
// row of W in 16-byte loads, eight in flight per lane (four
// past two input rows), and dot it with each of the ≤ 8 input rows (read
// through L1: a few KB, reused by every warp). The first loads go out
// before the kernel waits for the one before it (launch.cuh). At batch 1
// cuBLAS splits some of the 8B model's projections into split-K kernels
// plus a reduce kernel; end to end this kernel was level with it at 1–2
// rows and slower at 4 (docs/perf/README.md), so Gemm::linear uses it for
// 1–2 rows only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "replayssm/model_config.h"

namespace replayssm::ops::cuda {

constexpr int kGemvMaxRows = 8;

// Block shape knobs; 0 leaves the choice to the launcher. For the GEMV
// bench and the parity tests of every shape.
struct GemvTuning {
  int split = 0;   // warps per output row: 1, 2, 4 or 8
  int unroll = 0;  // 16-byte loads in flight per lane: 4 or 8
};

// x: (rows, n_in) bf16, row stride ldx ≥ n_in. w: (n_out, n_in) bf16 dense.
// bias: (n_out) fp32 or nullptr. y: (rows, n_out), row stride ldy, bf16
// or fp32. rows in 0..kGemvMaxRows. Shapes and knobs are checked first
// (cudaErrorInvalidValue).
cudaError_t gemv_cuda(const uint16_t* x, int64_t ldx, int rows, const uint16_t* w, int64_t n_out, int64_t n_in,
                      const float* bias, void* y, int64_t ldy, bool y_fp32, cudaStream_t stream,
                      const GemvTuning& tuning = {});

// What a GEMV of at most kGemvMaxFusedRows rows does with y = x·Wᵀ + b in
// the same kernel, instead of a kernel of its own after it. At batch 1 a
// step is ~290 kernels and each boundary costs a few µs of a ~5 ms step
// (docs/perf, "Batch 1"); these are the two that follow a projection
// every block:
//   act      — y ← act(y) after y's bf16 rounding: mlp_activation_cuda's
//              ungated form (NemotronH's relu²) on the stored y;
//   residual — residual[r] += y[r] as bf16 (fp32 rows): the update
//              residual_rmsnorm_cuda makes with d = y; y itself is not
//              stored (y may be nullptr). With norm_y, the grid's last
//              block then writes norm_y = residual_rmsnorm's output for the
//              updated rows (the next block's input norm), summing in
//              rownorm's order (norm_order.cuh): the bits of the two-kernel
//              path.
// counter: one device int, 0 before the launch; the last block leaves it 0.
// Launches that share it must be ordered on one stream.
constexpr int kGemvMaxFusedRows = 2;

struct GemvEpilogue {
  bool has_act = false;
  Activation act = Activation::kRelu2;
  float* residual = nullptr;  // (rows, n_out) fp32, row stride ld_residual
  int64_t ld_residual = 0;
  const float* norm_w = nullptr;  // (n_out) or nullptr (= 1)
  float eps = 0.0f;
  bool unit_offset = false;       // w' = 1 + w
  uint16_t* norm_y = nullptr;     // (rows, n_out) bf16, row stride ld_norm_y; nullptr: no norm
  int64_t ld_norm_y = 0;
  int* counter = nullptr;
};

// gemv_cuda with a bf16 y and the epilogue above: exactly one of has_act
// and residual; norm_y needs residual and counter; rows ≤
// kGemvMaxFusedRows. Checked first (cudaErrorInvalidValue).
cudaError_t gemv_epilogue_cuda(const uint16_t* x, int64_t ldx, int rows, const uint16_t* w, int64_t n_out,
                               int64_t n_in, const float* bias, uint16_t* y, int64_t ldy, const GemvEpilogue& epi,
                               cudaStream_t stream, const GemvTuning& tuning = {});

}  // namespace replayssm::ops::cuda
