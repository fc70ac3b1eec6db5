// SlotPool (runtime/cuda/slot_pool.h): host bookkeeping only, so it runs
// in CI too. Shares count one slot once; a fold writes in place when the
// sequence alone reads its slot, else into a free slot; slots come back
// once nobody reads them; the peak counts reserved slots.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/cuda/slot_pool.h"

namespace replayssm {
namespace {

TEST(SlotPool, SharesFoldsAndFreesSlots) {
  cuda::SlotPool p(4, 8);
  for (int64_t b = 0; b < 4; ++b) EXPECT_EQ(p.slot(b), b);
  EXPECT_EQ(p.live(), 4);
  EXPECT_EQ(p.fold_target(2), 2) << "alone on its slot: in place";
  p.folded(2, 2);
  p.share(std::vector<int32_t>{0, 0, 0, 3});  // 1 and 2 take 0's slot; 1's and 2's come free
  EXPECT_EQ(p.slot(1), 0);
  EXPECT_EQ(p.slot(2), 0);
  EXPECT_EQ(p.live(), 2);
  // 0, 1, 2 share slot 0: each folds into a fresh slot while the others read it.
  std::vector<int32_t> t;
  for (int64_t b = 0; b < 3; ++b) t.push_back(p.fold_target(b));
  EXPECT_EQ(p.live(), 5) << "two read, three reserved";
  EXPECT_EQ(p.peak_live(), 5);
  for (int32_t s : t) EXPECT_NE(s, 0);
  EXPECT_NE(t[0], t[1]);
  EXPECT_NE(t[1], t[2]);
  EXPECT_NE(t[0], t[2]);
  for (int64_t b = 0; b < 3; ++b) p.folded(b, t[size_t(b)]);
  EXPECT_EQ(p.live(), 4) << "slot 0 free once nobody reads it";
  for (int64_t b = 0; b < 3; ++b) EXPECT_EQ(p.slot(b), t[size_t(b)]);
  EXPECT_EQ(p.fold_target(3), 3);
  p.reset();
  EXPECT_EQ(p.live(), 4);
  EXPECT_EQ(p.peak_live(), 4);
  for (int64_t b = 0; b < 4; ++b) EXPECT_EQ(p.slot(b), b);
}

// The decoder's pool of 2 × sequences never runs out: every sequence on
// one shared slot, then all folding at once.
TEST(SlotPool, TwiceTheSequencesCoverAFamilyFoldingTogether) {
  const int64_t B = 16;
  cuda::SlotPool p(B, 2 * B);
  p.share(std::vector<int32_t>(size_t(B), 5));
  EXPECT_EQ(p.live(), 1);
  std::vector<int32_t> t;
  for (int64_t b = 0; b < B; ++b) t.push_back(p.fold_target(b));
  EXPECT_EQ(p.live(), B + 1);
  for (int64_t b = 0; b < B; ++b) p.folded(b, t[size_t(b)]);
  EXPECT_EQ(p.live(), B);
  p.share(std::vector<int32_t>(size_t(B), 0));
  for (int64_t b = 0; b < B; ++b) t[size_t(b)] = p.fold_target(b);
  EXPECT_EQ(p.peak_live(), B + 1);
}

// A family folding once: one member writes a fresh slot, the others join
// it, and the slot they all read before is free again.
TEST(SlotPool, AFamilyJoinsTheSlotOneMemberFolds) {
  cuda::SlotPool p(4, 8);
  p.share(std::vector<int32_t>{2, 2, 2, 3});
  EXPECT_EQ(p.refs(2), 3);
  EXPECT_EQ(p.live(), 2);
  const int32_t t = p.fold_target(0);
  EXPECT_NE(t, 2);
  EXPECT_EQ(p.live(), 3) << "reserved";
  p.folded(0, t);
  p.move_to(1, t);
  p.move_to(2, t);
  EXPECT_EQ(p.refs(t), 3);
  EXPECT_EQ(p.refs(2), 0);
  EXPECT_EQ(p.live(), 2) << "the old slot free";
  for (int64_t b = 0; b < 3; ++b) EXPECT_EQ(p.slot(b), t);
  EXPECT_EQ(p.slot(3), 3);
}

}  // namespace
}  // namespace replayssm
