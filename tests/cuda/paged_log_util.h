// Paged copies of contiguous SSM logs, for the parity tests between the
// two layouts (ops/cuda/log_pages.h): the same entries at scattered log
// slots — a random permutation of more slots than the sequences need, a
// random offset of entry 0 within its first page — and every row no entry
// owns filled with a NaN pattern, so that a kernel reading a wrong row
// shows it in its outputs and one writing a wrong row shows it there.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cuda/log_pages.h"

namespace replayssm::test {

// Values no kernel computes: a row read from the wrong place turns its
// outputs into NaN (or, copied as bits, into this pattern).
constexpr uint16_t kBf16Garbage = 0x7fc1;
inline float f32_garbage() { return std::numeric_limits<float>::quiet_NaN(); }

// B sequences' logs of up to `entries` entries each, in pages of
// page_size: sequence b's entry s at row(b, s) of (slots·page_size) rows.
struct PagedLayout {
  int B = 0, entries = 0, page_size = 1, page_stride = 0, slots = 0;
  std::vector<int32_t> page, first;  // (B, page_stride), (B)

  PagedLayout(std::mt19937& g, int batch, int n_entries, int psize) : B(batch), entries(n_entries), page_size(psize) {
    std::uniform_int_distribution<int> off(0, page_size - 1);
    std::vector<int> pages(B);
    int used = 0;
    for (int b = 0; b < B; ++b) {
      first.push_back(off(g));
      pages[b] = (first[b] + std::max(entries, 1) + page_size - 1) / page_size;
      page_stride = std::max(page_stride, pages[b] + 1);  // a spare table entry past the last page
      used += pages[b];
    }
    // A third more slots than the logs need, owned by no sequence, and the
    // used ones in random order.
    slots = used + used / 3 + 1;
    std::vector<int32_t> perm(slots);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    const int32_t spare = perm[used];  // what the table holds past a sequence's pages
    page.assign(size_t(B) * page_stride, spare);
    for (int b = 0, k = 0; b < B; ++b)
      for (int i = 0; i < pages[b]; ++i) page[size_t(b) * page_stride + i] = perm[k++];
  }
  // Host pointers: for log_row on the host only.
  ops::cuda::LogPages host() const { return {page.data(), page_stride, first.data(), page_size}; }
  int64_t row(int b, int s) const { return ops::cuda::log_row(host(), b, s); }
  int64_t rows() const { return int64_t(slots) * page_size; }

  // The paged copy of a contiguous log (B, W, width): entries s < n of each
  // sequence, every other row `fill`.
  template <typename E>
  std::vector<E> scatter(const std::vector<E>& contiguous, int W, int64_t width, E fill) const {
    std::vector<E> out(size_t(rows() * width), fill);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < std::min(W, entries); ++s)
        std::copy_n(contiguous.begin() + (int64_t(b) * W + s) * width, width, out.begin() + row(b, s) * width);
    return out;
  }
  // Back: entries s < n[b] of each sequence into a contiguous (B, W, width)
  // log, the rest `fill`.
  template <typename E>
  std::vector<E> gather(const std::vector<E>& paged, int W, int64_t width, const std::vector<int32_t>& n,
                        E fill) const {
    std::vector<E> out(size_t(int64_t(B) * W * width), fill);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < n[b]; ++s)
        std::copy_n(paged.begin() + row(b, s) * width, width, out.begin() + (int64_t(b) * W + s) * width);
    return out;
  }
  // Whether the rows of no entry below n[b] still hold what `before` held
  // there: a kernel wrote no row outside the logs in use.
  template <typename E>
  ::testing::AssertionResult only_entries_written(const std::vector<E>& before, const std::vector<E>& after,
                                                  int64_t width, const std::vector<int32_t>& n) const {
    std::vector<char> owned(size_t(rows()), 0);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < n[b]; ++s) owned[size_t(row(b, s))] = 1;
    for (int64_t r = 0; r < rows(); ++r)
      if (!owned[size_t(r)] && std::memcmp(before.data() + r * width, after.data() + r * width, sizeof(E) * width) != 0)
        return ::testing::AssertionFailure() << "row " << r << " (no entry's) written";
    return ::testing::AssertionSuccess();
  }
};

// Fork groups for the replay kernels (group_start, seq): kind 0 none
// (start {0}, the decode order the batch's); 1 groups of 3, 1, 2, …
// members at consecutive positions of the batch; 2 the same over a
// shuffled decode order, with two empty groups after the last. Members
// share their first's slot, and a member of a group of more than one
// folds nothing (fold[b] = 0).
struct ForkGroups {
  std::vector<int32_t> start{0}, order;  // (groups + 1), (B)
  ForkGroups(std::mt19937& g, int B, int kind, std::vector<int32_t>& slot, std::vector<int32_t>& fold) : order(B) {
    std::iota(order.begin(), order.end(), 0);
    if (kind == 0) return;
    if (kind == 2) std::shuffle(order.begin(), order.end(), g);
    for (int v = 0, n = 0; v < B; ++n) {
      const int members = std::min(B - v, n % 3 == 0 ? 3 : (n % 3 == 1 ? 1 : 2));
      for (int m = 0; m < members; ++m) {
        slot[order[v + m]] = slot[order[v]];
        if (members > 1) fold[order[v + m]] = 0;
      }
      v += members;
      start.push_back(v);
    }
    if (kind == 2) start.push_back(B), start.push_back(B);
  }
};

template <typename E>
::testing::AssertionResult same_bits(const std::vector<E>& got, const std::vector<E>& want, const char* what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": sizes " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(E)) != 0)
      return ::testing::AssertionFailure() << what << " differ first at " << i << " of " << got.size();
  return ::testing::AssertionSuccess();
}

}  // namespace replayssm::test
