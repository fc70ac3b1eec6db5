// Paged SSM logs: where sequence b's log entry s lives when the logs are
// kept in positional pages (the host state manager, src/state) rather than
// in one private run of W entries per sequence.
//
// A log slot holds page_size consecutive positions' entries, one row each
// in every log array (Mamba2: log_x, log_B, log_dt; GDN: log_k, log_u,
// log_g; a rewindable log's pre-conv rows). Sequence b's block table lists
// the log slot of each page from the one holding its entry 0 (the position
// of its checkpoint) on; that entry sits at offset first[b] of its page:
//
//   row(b, s) = page[b·page_stride + (first[b] + s) / page_size] · page_size
//             + (first[b] + s) % page_size
//
// and an array of rows of `width` values keeps entry s of b at row(b, s) ·
// width (row(b, s) · ld with a row stride). page == nullptr: the contiguous
// layout, row(b, s) = b·W + s. page_size is a power of two, so that the
// kernels divide by a shift.
//
// page and first are a plan's arrays, copied from the host and written by
// no kernel: the decode kernels may read them before their PDL wait, as
// they read slot and n_log (launch.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::ops::cuda {

struct LogPages {
  const int32_t* page = nullptr;   // (B, page_stride) log slot of each page, the first one holding entry 0
  int page_stride = 0;             // entries of `page` per sequence
  const int32_t* first = nullptr;  // (B) entry 0's offset within its page, 0..page_size−1
  int page_size = 0;               // entries per log slot, a power of two ≥ 1
};

// Whether the fields are usable: off (page nullptr), or a stride, an offset
// array and a power-of-two page size. What every launcher checks.
inline bool log_pages_valid(const LogPages& p) {
  return p.page == nullptr ||
         (p.page_stride > 0 && p.first != nullptr && p.page_size >= 1 && (p.page_size & (p.page_size - 1)) == 0);
}

// log2 of a power of two.
__host__ __device__ inline int log_page_shift(int page_size) {
#if defined(__CUDA_ARCH__)
  return __ffs(page_size) - 1;
#else
  int s = 0;
  while ((1 << s) < page_size) ++s;
  return s;
#endif
}

// The row of sequence b's entry s (p.page set; s ≥ 0). Host and device: the
// tests lay out logs with it.
__host__ __device__ inline int64_t log_row(const LogPages& p, int b, int s) {
  const int e = p.first[b] + s, shift = log_page_shift(p.page_size);
  return (int64_t(p.page[int64_t(b) * p.page_stride + (e >> shift)]) << shift) + (e & (p.page_size - 1));
}

}  // namespace replayssm::ops::cuda
