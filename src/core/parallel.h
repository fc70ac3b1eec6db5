// parallel_for: the CPU reference's one thread pool.
//
// The pool's threads (one per core beyond the caller's) are started once
// and kept; a call splits [0, n) into contiguous ranges, one per thread,
// the caller taking the first, and returns when all are done. The split
// depends on n and the thread count only, so work that gives each index
// its own result (the GEMM's outputs) is independent of it.
#pragma once

#include <cstdint>
#include <functional>

namespace replayssm {

// fn(begin, end) over a partition of [0, n); nothing when n <= 0. Not
// reentrant: fn must not call parallel_for.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

// The threads parallel_for uses (the caller included).
int parallel_threads();

}  // namespace replayssm
