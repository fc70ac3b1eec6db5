// SlotPool: the replay layout's checkpoint slots when sequences fork. A
// fork makes the child read its parent's checkpoint slot (refcounted, no
// copy); a fold writes a new checkpoint in place only when no other
// sequence reads the slot, otherwise into a free one — so a family of
// forks holds one checkpoint until its members fold apart. Host
// bookkeeping only; the Decoder puts slot() and fold_target() in its plan.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace replayssm::cuda {

class SlotPool {
 public:
  SlotPool() = default;
  // `sequences` sequences, sequence b in slot b, over `slots` ≥ sequences slots.
  SlotPool(int64_t sequences, int64_t slots);
  void reset();

  int32_t slot(int64_t b) const { return slot_[size_t(b)]; }
  // Sequence b reads parent[b]'s slot from now on (parent[b] = b keeps it).
  void share(std::span<const int32_t> parent);
  // Where sequence b's fold this step writes: its own slot when it alone
  // reads it, else a free slot reserved for it. Then folded() once the
  // step has run.
  int32_t fold_target(int64_t b);
  void folded(int64_t b, int32_t target);

  // Sequences reading `slot` (or reserving it for a fold).
  int32_t refs(int32_t slot) const { return refs_[size_t(slot)]; }
  // Sequence b reads `slot` from now on (a family member joining the
  // checkpoint another member folded).
  void move_to(int64_t b, int32_t slot);

  int64_t live() const;  // slots read by a sequence or reserved for a fold
  int64_t peak_live() const { return peak_; }

 private:
  void note_peak();
  std::vector<int32_t> slot_, refs_, free_;
  int64_t peak_ = 0, slots_ = 0;
};

}  // namespace replayssm::cuda
