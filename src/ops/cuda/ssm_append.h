// From a projection's post-conv rows to what the SSM decode kernels read
// (mamba2_decode.h, gdn_decode.h): the inputs of each new token, dense,
// either into a step's compact buffers (standard: entry[r] = r) or into the
// sequence's log (replay: entry[r] = b·W + its log position s; with a
// paged log, log_pages.h, entry[r] = row(b, s) — the host computes it, the
// kernels here only write where entry[r] says). One kernel per layer and
// step, so a decode step does not pay a launch per array.
//
//   mamba2_append_cuda — x, B (bf16) and dt = clamp(softplus(dt_raw + dt_bias),
//                        dt_min, dt_max) (fp32) to `entry[r]`; C (bf16) to row r;
//   gdn_append_cuda    — v (bf16) to row r; with a log, k (bf16) and g (fp32)
//                        to `entry[r]` as well (q, β stay in gdn_prepare's dense rows);
//   log_rows_cuda      — whole rows (a token's pre-conv row, which a
//                        rewindable log keeps beside each entry) to `entry[r]`,
//                        or gathered from `src_row[r]` (a ragged step's last
//                        row of each sequence, for the LM head);
//   log_move_cuda      — after a fold that left the newest entries at the
//                        end of a log (GDN's AR fold; either kind after a
//                        verify folds its committed prefix), moves them to
//                        its front.
//
// A ragged step mixes rows the decode kernels take with rows the chunk
// scans take: entry[r] < 0 leaves row r out — mamba2_append_cuda writes
// none of it (its C row neither), gdn_append_cuda only its dense v (the
// scan reads it), log_rows_cuda nothing. (mamba2_conv_append_cuda, a
// one-token step's, takes every row.)
//
// Shapes are checked before anything touches the device (cudaErrorInvalidValue);
// rows = 0 is a no-op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/conv1d.h"

namespace replayssm::ops::cuda {

struct Mamba2AppendArgs {
  int64_t rows = 0;
  int H = 0, P = 0, G = 0, N = 0;
  const uint16_t* xbc = nullptr;   // (rows, H·P + 2·G·N) post-conv x | B | C, row stride ldxbc
  int64_t ldxbc = 0;
  const uint16_t* dt_raw = nullptr;  // (rows, H) bf16 before softplus, row stride lddt
  int64_t lddt = 0;
  const float* dt_bias = nullptr;  // (H)
  float dt_min = 0.0f, dt_max = 3.4e38f;
  const int32_t* entry = nullptr;  // (rows) destination entry of row r
  uint16_t* x = nullptr;           // (entries, H·P)
  uint16_t* Bm = nullptr;          // (entries, G·N)
  float* dt = nullptr;             // (entries, H)
  uint16_t* Cm = nullptr;          // (rows, G·N)
  // The kernel launched after this one reads, before its PDL wait, nothing
  // the kernel launched before this one writes (the backend's Mamba2 step
  // or replay reads state and older log entries there, which its in_proj
  // does not write, nor in a ragged step the chunk scan, which writes only
  // the slots of other sequences): released at the start (launch.cuh).
  bool release_early = false;
};

cudaError_t mamba2_append_cuda(const Mamba2AppendArgs& a, cudaStream_t stream);

// A decode step's conv1d_step_cuda(cv) and this append as one kernel
// (rows = cv.batch, C = H·P + 2·G·N): the conv's output goes to cv.y as
// before and is the append's source (xbc, ldxbc unused). Same bits as the
// two launches; at batch 1 a launch boundary is most of either's time.
// cv's window may be paged (Conv1dArgs::log_rows), as for conv1d_step_cuda.
cudaError_t mamba2_conv_append_cuda(const Conv1dArgs& cv, const Mamba2AppendArgs& a, cudaStream_t stream);

struct GdnAppendArgs {
  int64_t rows = 0;
  int Hk = 0, Hv = 0, dk = 0, dv = 0;
  const uint16_t* v_in = nullptr;  // (rows, Hv·dv) post-conv v, row stride ldv
  int64_t ldv = 0;
  uint16_t* v = nullptr;           // (rows, Hv·dv) dense
  // Replay only (entry nullptr: none): gdn_prepare's dense k and g into the log.
  const int32_t* entry = nullptr;  // (rows)
  const uint16_t* k = nullptr;     // (rows, Hk·dk) dense
  const float* g = nullptr;        // (rows, Hv) dense
  uint16_t* log_k = nullptr;       // (entries, Hk·dk)
  float* log_g = nullptr;          // (entries, Hv)
};

cudaError_t gdn_append_cuda(const GdnAppendArgs& a, cudaStream_t stream);

struct LogRowsArgs {
  int64_t rows = 0;
  int64_t width = 0;                 // 16-bit units per row
  const uint16_t* src = nullptr;     // (source rows, width), row stride lds
  int64_t lds = 0;
  const int32_t* src_row = nullptr;  // (rows) the source row of row r; nullptr: r
  const int32_t* entry = nullptr;    // (rows) destination entry of row r; nullptr: r (a gather)
  uint16_t* dst = nullptr;           // (entries, width)
};

cudaError_t log_rows_cuda(const LogRowsArgs& a, cudaStream_t stream);

// Sequence b's log entries [from[b], from[b] + count[b]) move to [0, count[b])
// (count[b] = 0: untouched) in each of a log's arrays (B, W, width[i]
// 16-bit units per entry: bf16 elements, or two per fp32). Entries are
// copied in order, one after another, so the ranges may overlap
// (from[b] ≥ 1): a source is read before any later entry's copy can
// overwrite it.
constexpr int kLogArrays = 3;
struct LogMoveArgs {
  int batch = 0, W = 0;
  const int32_t* from = nullptr;   // (B)
  const int32_t* count = nullptr;  // (B)
  void* array[kLogArrays] = {};    // nullptr: unused
  int64_t width[kLogArrays] = {};  // 16-bit units per entry
};

cudaError_t log_move_cuda(const LogMoveArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
