// Gemm (see gemm.h).
#include "ops/cuda/gemm.h"

#include <cublas_v2.h>

#include <climits>

#include "ops/cuda/elementwise.h"
#include "ops/cuda/gemv.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/norm.h"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

namespace {

// cuBLAS's documented recommendation for Hopper: 32 MiB of workspace.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// Up to this many rows gemv_cuda: measured end to end at 8B shapes on the
// H200 it matched cuBLAS at 1–2 rows (+2% at batch 1 under replay) and lost
// at 4 (6.34 ms a step against 5.85 at batch 8 through cuBLAS): every row
// re-reads x through L1.
constexpr int64_t kGemvRows = 2;
static_assert(kGemvRows <= kGemvMaxFusedRows, "the GEMV rows carry the fused epilogues");

__global__ void add_bias_kernel(void* y, int64_t ldy, bool y_fp32, int64_t rows, int64_t n, const float* bias) {
  pdl_begin();
  const int64_t total = rows * n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, c = i % n;
    if (y_fp32) {
      static_cast<float*>(y)[r * ldy + c] += bias[c];
    } else {
      uint16_t* yb = static_cast<uint16_t*>(y);
      put_bf(yb, r * ldy + c, bf(yb, r * ldy + c) + bias[c]);
    }
  }
}

}  // namespace

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(handle_));
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (counter_ != nullptr) cudaFree(counter_);
}

cudaError_t Gemm::init(cudaStream_t stream) {
  if (handle_ != nullptr) return cudaErrorInvalidValue;
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  handle_ = h;
  stream_ = stream;
  if (cudaError_t e = cudaMalloc(&workspace_, kWorkspaceBytes); e != cudaSuccess) return e;
  if (cudaError_t e = cudaMalloc(&counter_, sizeof(int)); e != cudaSuccess) return e;
  if (cudaError_t e = cudaMemset(counter_, 0, sizeof(int)); e != cudaSuccess) return e;
  if (cublasSetStream(h, stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(h, workspace_, kWorkspaceBytes) != CUBLAS_STATUS_SUCCESS)
    return cudaErrorUnknown;
  return cudaSuccess;
}

cudaError_t Gemm::linear(const uint16_t* x, int64_t ldx, int64_t rows, const uint16_t* w, int64_t n_out, int64_t n_in,
                         const float* bias, void* y, int64_t ldy, bool y_fp32) {
  if (handle_ == nullptr || rows < 0 || n_out < 1 || n_in < 1 || ldx < n_in || ldy < n_out || n_out > INT_MAX ||
      n_in > INT_MAX || rows > INT_MAX || ldx > INT_MAX || ldy > INT_MAX)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (x == nullptr || w == nullptr || y == nullptr) return cudaErrorInvalidValue;
  if (rows <= kGemvRows) return gemv_cuda(x, ldx, int(rows), w, n_out, n_in, bias, y, ldy, y_fp32, stream_);
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t s =
      cublasGemmEx(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, int(n_out), int(rows), int(n_in),
                   &one, w, CUDA_R_16BF, int(n_in), x, CUDA_R_16BF, int(ldx), &zero, y,
                   y_fp32 ? CUDA_R_32F : CUDA_R_16BF, int(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  if (bias == nullptr) return cudaSuccess;
  const int64_t total = rows * n_out;
  const int blocks = int((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
  launch_kernel(add_bias_kernel, blocks, 256, 0, stream_, y, ldy, y_fp32, rows, n_out, bias);
  return cudaGetLastError();
}

cudaError_t Gemm::linear_act(const uint16_t* x, int64_t ldx, int64_t rows, const uint16_t* w, int64_t n_out,
                             int64_t n_in, const float* bias, Activation act, uint16_t* y, int64_t ldy) {
  if (handle_ == nullptr) return cudaErrorInvalidValue;
  if (rows >= 1 && rows <= kGemvRows && fusion_enabled()) {
    GemvEpilogue e;
    e.has_act = true, e.act = act;
    return gemv_epilogue_cuda(x, ldx, int(rows), w, n_out, n_in, bias, y, ldy, e, stream_);
  }
  if (cudaError_t e = linear(x, ldx, rows, w, n_out, n_in, bias, y, ldy, false); e != cudaSuccess) return e;
  return mlp_activation_cuda(act, nullptr, 0, y, ldy, rows, n_out, y, ldy, stream_);
}

cudaError_t Gemm::linear_residual_norm(const uint16_t* x, int64_t ldx, int64_t rows, const uint16_t* w, int64_t n_out,
                                       int64_t n_in, const float* bias, float* h, int64_t ldh, const float* norm_w,
                                       float eps, bool unit_offset, uint16_t* xn, int64_t ldxn, uint16_t* d,
                                       int64_t ldd, bool release_early) {
  if (handle_ == nullptr || h == nullptr || xn == nullptr) return cudaErrorInvalidValue;
  if (rows >= 1 && rows <= kGemvRows && fusion_level() >= 2) {
    GemvEpilogue e;
    e.residual = h, e.ld_residual = ldh, e.norm_w = norm_w, e.eps = eps, e.unit_offset = unit_offset;
    e.norm_y = xn, e.ld_norm_y = ldxn, e.counter = counter_;
    return gemv_epilogue_cuda(x, ldx, int(rows), w, n_out, n_in, bias, nullptr, n_out, e, stream_);
  }
  if (cudaError_t e = linear(x, ldx, rows, w, n_out, n_in, bias, d, ldd, false); e != cudaSuccess) return e;
  return residual_rmsnorm_cuda(h, ldh, d, ldd, rows, n_out, norm_w, eps, unit_offset, xn, ldxn, stream_,
                               release_early);
}

}  // namespace replayssm::ops::cuda
