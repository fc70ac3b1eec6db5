// seq_copy (see seq_copy.h). Blocks over (chunk of a sequence's bytes,
// sequence); 16-byte units where every address and size allows, else 2.
#include "ops/cuda/seq_copy.h"
#include "ops/cuda/launch.cuh"

namespace replayssm::ops::cuda {

namespace {

constexpr int kCopyThreads = 256;
constexpr int64_t kUnitsPerBlock = 8 * kCopyThreads;

// units of U from block from_block of `from` (stride from_stride) to block
// to_block of `to`, for sequence b (blockIdx.y).
template <typename U>
__global__ void __launch_bounds__(kCopyThreads)
    copy_kernel(const U* from, int64_t from_stride, const int32_t* from_block, U* to, int64_t to_stride,
                const int32_t* to_block, const int32_t* rows, int64_t row_units) {
  pdl_begin();
  const int b = blockIdx.y;
  const int64_t n = int64_t(rows[b]) * row_units, u0 = int64_t(blockIdx.x) * kUnitsPerBlock;
  if (n <= u0) return;
  const U* s = from + (from_block ? int64_t(from_block[b]) : b) * from_stride;
  U* d = to + (to_block ? int64_t(to_block[b]) : b) * to_stride;
  for (int64_t u = u0 + threadIdx.x; u < min(n, u0 + kUnitsPerBlock); u += blockDim.x) d[u] = s[u];
}

template <typename U>
cudaError_t launch(const SeqCopyArgs& a, cudaStream_t stream) {
  const int64_t stride = a.block_bytes / int64_t(sizeof(U)), row_units = a.row_bytes / int64_t(sizeof(U));
  const dim3 grid(unsigned((int64_t(a.max_rows) * row_units + kUnitsPerBlock - 1) / kUnitsPerBlock), unsigned(a.batch));
  if (grid.x == 0) return cudaSuccess;
  U* arr = static_cast<U*>(a.array);
  if (a.direct) {
    launch_kernel(copy_kernel<U>, grid, kCopyThreads, 0, stream, arr, stride, a.src, arr, stride, a.dst, a.rows,
                  row_units);
    return cudaGetLastError();
  }
  U* tmp = static_cast<U*>(a.temp);  // temp block b holds sequence b's copy in between
  launch_kernel(copy_kernel<U>, grid, kCopyThreads, 0, stream, arr, stride, a.src, tmp, stride, nullptr, a.rows,
                row_units);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  launch_kernel(copy_kernel<U>, grid, kCopyThreads, 0, stream, tmp, stride, nullptr, arr, stride, a.dst, a.rows,
                row_units);
  return cudaGetLastError();
}

}  // namespace

cudaError_t seq_copy_cuda(const SeqCopyArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.batch > 65535 || a.block_bytes < 2 || a.row_bytes < 2 || a.row_bytes % 2 != 0 ||
      a.block_bytes % 2 != 0 || a.max_rows < 0 || int64_t(a.max_rows) * a.row_bytes > a.block_bytes)
    return cudaErrorInvalidValue;
  if (a.batch == 0 || a.max_rows == 0) return cudaSuccess;
  if (a.array == nullptr || a.src == nullptr || a.dst == nullptr || a.rows == nullptr ||
      (!a.direct && a.temp == nullptr))
    return cudaErrorInvalidValue;
  const auto aligned = [&](int64_t n) { return n % 16 == 0; };
  if (aligned(reinterpret_cast<intptr_t>(a.array)) && aligned(reinterpret_cast<intptr_t>(a.temp)) &&
      aligned(a.block_bytes) && aligned(a.row_bytes))
    return launch<uint4>(a, stream);
  return launch<uint16_t>(a, stream);
}

}  // namespace replayssm::ops::cuda
