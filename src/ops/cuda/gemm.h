// Linear layers on CUDA through cuBLAS: y = x·Wᵀ (+ b), bf16 x and W,
// fp32 accumulation, bf16 or fp32 y — the CPU's ops/cpu/gemm.h matmul with
// the weights in bf16.
//
// W is an nn.Linear weight, (n_out, n_in) row-major. In cuBLAS's
// column-major terms that is Wᵀ with leading dimension n_in, so
// yᵀ (n_out × rows) = op_T(W) · xᵀ and no copy or transpose is made.
// A Gemm owns one cuBLAS handle and a fixed workspace, so that a captured
// CUDA graph never makes cuBLAS allocate. One or two rows (decode at batch
// 1–2) go to gemv_cuda instead (gemv.h), which reads the weights in one pass
// with no split-K reduce kernel — and there the kernel after a projection
// (the MLP activation; the residual add and the next block's norm) runs in
// the GEMV's epilogue (linear_act, linear_residual_norm), with the bits of
// the separate kernels the larger batches run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "replayssm/model_config.h"

namespace replayssm::ops::cuda {

// Read once per process: which kernels that follow a projection run inside
// it at 1–2 rows. REPLAYSSM_FUSE:
//   unset, 1 — the MLP activation in the up projection's GEMV (linear_act)
//              and the Mamba2 conv with its log append as one kernel;
//   2        — also the residual add and the next norm in the out
//              projection's GEMV (linear_residual_norm). Same bits, but
//              measured slower at batch 1 on the H200 (docs/perf): every
//              block of the GEMV fences its writes before counting itself;
//   0        — none (for measuring the gain).
inline int fusion_level() {
  static const int level = [] {
    const char* v = std::getenv("REPLAYSSM_FUSE");
    if (v == nullptr) return 1;
    return std::strcmp(v, "0") == 0 ? 0 : std::strcmp(v, "2") == 0 ? 2 : 1;
  }();
  return level;
}
inline bool fusion_enabled() { return fusion_level() >= 1; }

class Gemm {
 public:
  Gemm() = default;
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Creates the handle on the current device, bound to `stream`.
  cudaError_t init(cudaStream_t stream);

  // x: (rows, n_in) bf16, row stride ldx ≥ n_in. w: (n_out, n_in) bf16
  // dense. bias: (n_out) fp32 or nullptr. y: (rows, n_out), row stride
  // ldy ≥ n_out, bf16 (y_fp32 false) or fp32. rows = 0 is a no-op.
  // Shapes are checked first (cudaErrorInvalidValue); a cuBLAS failure
  // comes back as cudaErrorUnknown.
  cudaError_t linear(const uint16_t* x, int64_t ldx, int64_t rows, const uint16_t* w, int64_t n_out, int64_t n_in,
                     const float* bias, void* y, int64_t ldy, bool y_fp32);

  // y = act(x·Wᵀ + b), bf16: the MLP's ungated middle (mlp_activation_cuda).
  cudaError_t linear_act(const uint16_t* x, int64_t ldx, int64_t rows, const uint16_t* w, int64_t n_out, int64_t n_in,
                         const float* bias, Activation act, uint16_t* y, int64_t ldy);

  // A block's output projection into the fp32 residual stream h, then the
  // next block's input norm: d = x·Wᵀ + b (bf16), h += d, xn = norm(h)
  // with norm_w (residual_rmsnorm_cuda). d: (rows, n_out) scratch, row
  // stride ldd (not written when the GEMV fuses it: fusion_level() 2).
  // release_early: the norm's (norm.h).
  cudaError_t linear_residual_norm(const uint16_t* x, int64_t ldx, int64_t rows, const uint16_t* w, int64_t n_out,
                                   int64_t n_in, const float* bias, float* h, int64_t ldh, const float* norm_w,
                                   float eps, bool unit_offset, uint16_t* xn, int64_t ldxn, uint16_t* d, int64_t ldd,
                                   bool release_early = false);

 private:
  void* handle_ = nullptr;  // cublasHandle_t
  void* workspace_ = nullptr;
  int* counter_ = nullptr;  // the fused GEMV's last-block count (gemv.h)
  cudaStream_t stream_ = nullptr;
};

}  // namespace replayssm::ops::cuda
