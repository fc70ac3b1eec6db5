// Where a decode kernel's sequence finds its rows (Mamba2DecodeArgs::row,
// GdnDecodeArgs::row): a uniform step's sequence b has rows b·T .. b·T+T−1
// of every per-row array; a ragged step's, row[b] onward — the rows are
// packed, a prompt chunk's beside a decoding sequence's one — and a
// sequence with row[b] < 0 takes no part in the launch (another kernel,
// the chunk scan, takes it, or it takes no tokens). The plan is on the
// device before the step's first kernel, so a block may read it before its
// PDL wait.
#pragma once

#include <cstdint>

namespace replayssm::ops::cuda {

__device__ __forceinline__ int64_t decode_row0(const int32_t* row, int b, int T) {
  return row != nullptr ? int64_t(row[b]) : int64_t(b) * T;
}

}  // namespace replayssm::ops::cuda
