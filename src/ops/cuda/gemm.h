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
// with no split-K reduce kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::ops::cuda {

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

 private:
  void* handle_ = nullptr;  // cublasHandle_t
  void* workspace_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace replayssm::ops::cuda
