// A fork group's place in a replay launch, for both families
// (Mamba2DecodeArgs and GdnDecodeArgs::group_start, seq, max_group): group
// k is positions group_start[k] .. group_start[k+1] − 1 of the decode order
// (position v is sequence seq[v], or v), at most max_group of them decoded.
// A group folds only when it is one sequence — decided by its size, so a
// larger group cut to max_group members folds nothing.
#pragma once

namespace replayssm::ops::cuda {

// The sequence at position v of the decode order.
template <typename Args>
__device__ __forceinline__ int replay_seq(const Args& a, int v) {
  return a.seq != nullptr ? a.seq[v] : v;
}

// Group k's block: its first position, members decoded (0: an empty
// group, nothing to decode), first member's sequence, and whether it is
// one sequence (the only kind that may fold).
struct ReplayGroup {
  int first, members, b;
  bool alone;
};
template <typename Args>
__device__ __forceinline__ ReplayGroup replay_group(const Args& a, int k) {
  if (a.group_start == nullptr) return {k, 1, k, true};
  const int first = a.group_start[k], size = a.group_start[k + 1] - first, members = min(size, a.max_group);
  return {first, members, members > 0 ? replay_seq(a, first) : 0, size == 1};
}

}  // namespace replayssm::ops::cuda
