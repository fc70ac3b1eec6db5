// OracleDraft: speculative drafts of controlled accuracy, for measuring
// verify and rollback costs in isolation.
//
// It proposes the target's own greedy continuation (computed beforehand),
// replacing each token with a wrong one with probability 1 − accuracy. It
// runs no model, so a spec run's decode time is the target's verify steps
// and rollbacks alone; sweeping the accuracy sweeps the acceptance rate
// (greedy acceptance keeps the drafts up to the first wrong one). Under
// temperature 0 the emitted tokens are the target's whatever the accuracy.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "workloads/speculative.h"

namespace replayssm::bench {

class OracleDraft final : public DraftSource {
 public:
  // reference: prompt + the target's greedy continuation.
  OracleDraft(const std::vector<int32_t>* reference, double accuracy, int64_t vocab, uint64_t seed)
      : ref_(reference), accuracy_(accuracy), vocab_(vocab), rng_(seed) {}
  Result<Draft> propose(std::span<const int32_t> context, int64_t max_tokens) override;

 private:
  const std::vector<int32_t>* ref_;
  double accuracy_;
  int64_t vocab_;
  std::mt19937_64 rng_;
};

}  // namespace replayssm::bench
