// SlotPool (see slot_pool.h).
#include "runtime/cuda/slot_pool.h"

#include <algorithm>

#include "core/check.h"

namespace replayssm::cuda {

SlotPool::SlotPool(int64_t sequences, int64_t slots) : slot_(size_t(sequences)), slots_(slots) { reset(); }

void SlotPool::reset() {
  refs_.assign(size_t(slots_), 0);
  free_.clear();
  for (size_t b = 0; b < slot_.size(); ++b) slot_[b] = int32_t(b), refs_[b] = 1;
  for (int64_t s = slots_ - 1; s >= int64_t(slot_.size()); --s) free_.push_back(int32_t(s));
  peak_ = 0;
  note_peak();
}

void SlotPool::share(std::span<const int32_t> parent) {
  std::vector<int32_t> next(slot_.size());
  for (size_t b = 0; b < slot_.size(); ++b) next[b] = slot_[size_t(parent[b])];
  for (size_t b = 0; b < slot_.size(); ++b) ++refs_[size_t(next[b])];
  for (size_t b = 0; b < slot_.size(); ++b)
    if (--refs_[size_t(slot_[b])] == 0) free_.push_back(slot_[b]);
  slot_ = std::move(next);
  note_peak();
}

int32_t SlotPool::fold_target(int64_t b) {
  const int32_t s = slot_[size_t(b)];
  if (refs_[size_t(s)] == 1) return s;
  RSSM_CHECK(!free_.empty());  // live ≤ sequences and reserved ≤ sequences: 2 × sequences slots suffice
  const int32_t t = free_.back();
  free_.pop_back();
  note_peak();
  return t;
}

void SlotPool::folded(int64_t b, int32_t target) {
  const int32_t s = slot_[size_t(b)];
  if (target == s) return;
  refs_[size_t(target)] = 1;
  if (--refs_[size_t(s)] == 0) free_.push_back(s);
  slot_[size_t(b)] = target;
}

void SlotPool::move_to(int64_t b, int32_t slot) {
  const int32_t s = slot_[size_t(b)];
  if (slot == s) return;
  ++refs_[size_t(slot)];
  if (--refs_[size_t(s)] == 0) free_.push_back(s);
  slot_[size_t(b)] = slot;
}

// A slot is either free or read or reserved: no count over the slots.
int64_t SlotPool::live() const { return slots_ - int64_t(free_.size()); }

void SlotPool::note_peak() { peak_ = std::max(peak_, live()); }

}  // namespace replayssm::cuda
