// OracleDraft (see oracle_draft.h).
#include "bench/oracle_draft.h"

namespace replayssm::bench {

Result<Draft> OracleDraft::propose(std::span<const int32_t> context, int64_t max_tokens) {
  Draft d;
  const int64_t L = static_cast<int64_t>(context.size()), n = static_cast<int64_t>(ref_->size());
  for (int64_t pos = L; pos < n && pos < L + max_tokens; ++pos) {
    int32_t t = (*ref_)[pos];
    // A wrong token: any other id, uniformly (mt19937_64 output is fixed by
    // the standard, so runs repeat exactly on every platform).
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    if (u >= accuracy_ && vocab_ > 1)
      t = static_cast<int32_t>((t + 1 + static_cast<int64_t>(rng_() % static_cast<uint64_t>(vocab_ - 1))) % vocab_);
    d.tokens.push_back(t);
  }
  return d;
}

}  // namespace replayssm::bench
