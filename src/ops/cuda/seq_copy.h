// Per-sequence block copies on CUDA — what a fork moves on the device:
// block dst[b] of an array (blocks of `block_bytes`) gets the first
// rows[b] rows (of `row_bytes`) of block src[b], for every b with
// rows[b] > 0. A sequence's log entries, conv window, K/V rows or (the
// standard layout's copy on fork) its state are such blocks.
//
// Unless `direct`, the copy goes through `temp` (batch × block_bytes):
// every source is read before any destination is written, so a block may
// be both the source of one copy and the destination of another (a beam
// that is a parent and also takes another beam's place). `direct` is for
// callers whose destinations are never sources.
//
// Shapes are checked before anything touches the device
// (cudaErrorInvalidValue); batch = 0 is a no-op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::ops::cuda {

struct SeqCopyArgs {
  int batch = 0;
  void* array = nullptr;
  int64_t block_bytes = 0;         // stride between blocks
  int64_t row_bytes = 0;           // a multiple of 2
  int max_rows = 0;                // host bound on rows[b] (rows[b] · row_bytes ≤ block_bytes)
  const int32_t* src = nullptr;    // (B) source block
  const int32_t* dst = nullptr;    // (B) destination block
  const int32_t* rows = nullptr;   // (B) rows to copy; 0: none
  void* temp = nullptr;            // (B, block_bytes) unless direct
  bool direct = false;
};

cudaError_t seq_copy_cuda(const SeqCopyArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
