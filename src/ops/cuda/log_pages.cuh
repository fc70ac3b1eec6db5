// Device side of paged logs (log_pages.h): one sequence's block table,
// resolved once by a block, and row maps for the bulk loaders of tile.cuh.
//
// The kernels that read or write log entries take the paged layout as an
// instance of their own (a template flag): their contiguous instances keep
// the code they had, and only the paged ones pay for the table — a load of
// it per row (a cached line: a sequence's table is a few entries), a shift
// and a mask.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/log_pages.h"

namespace replayssm::ops::cuda {

// Sequence b's log: row(s) is log_row(pages, b, s) with the table's row
// and the offset read once.
struct PagedLog {
  const int32_t* page;  // (page_stride) this sequence's block table
  int first, shift, mask;
  __device__ __forceinline__ int64_t row(int s) const {
    const int e = first + s;
    return (int64_t(page[e >> shift]) << shift) + (e & mask);
  }
};
__device__ __forceinline__ PagedLog paged_log(const LogPages& p, int b) {
  return {p.page + int64_t(b) * p.page_stride, p.first[b], log_page_shift(p.page_size), p.page_size - 1};
}

// paged_log in a kernel's paged instance; its contiguous instance gets an
// empty one it never reads.
template <bool kPaged>
__device__ __forceinline__ PagedLog paged_log_if(const LogPages& p, int b) {
  if constexpr (kPaged)
    return paged_log(p, b);
  else
    return {};
}

// Row map of the loaders (tile.cuh): loaded row r is entry s0 + r of the log.
struct PagedRows {
  PagedLog log;
  int s0;
  __device__ __forceinline__ int64_t operator()(int r) const { return log.row(s0 + r); }
};

}  // namespace replayssm::ops::cuda
