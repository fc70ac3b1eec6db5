// The tree workload's walk over TreeSearch (on either backend): `expansions` times, take the leaf with the
// best mean log-probability per token and expand it into its k most likely
// next tokens, one expand (a fork and a one-token step) each. The search
// jumps between branches, so most expansions fork a node that is not the
// one just stepped — the access pattern forks and restores exist for.
// Returns the nodes added (the tokens the expansions appended).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "replayssm/status.h"

namespace replayssm::bench {

template <typename Tree>
Result<int64_t> best_first(Tree& tree, typename Tree::NodeId root, int64_t prompt_tokens, int64_t vocab, int64_t k,
                           int64_t expansions) {
  using NodeId = typename Tree::NodeId;
  // Leaves ordered by (−mean log-probability, id): begin() is the best.
  std::set<std::pair<double, NodeId>> leaves{{0.0, root}};
  k = std::min(k, vocab);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  int64_t added = 0;
  for (int64_t e = 0; e < expansions && !leaves.empty(); ++e) {
    const NodeId node = leaves.begin()->second;
    leaves.erase(leaves.begin());
    RSSM_ASSIGN_OR_RETURN(std::span<const float> logits, tree.logits(node));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    const std::vector<int32_t> top(ids.begin(), ids.begin() + k);  // logits dies with the next expand
    for (int32_t t : top) {
      RSSM_ASSIGN_OR_RETURN(const NodeId child, tree.expand(node, {&t, 1}));
      RSSM_ASSIGN_OR_RETURN(const double score, tree.score(child));
      RSSM_ASSIGN_OR_RETURN(auto path, tree.tokens(child));
      const double depth = static_cast<double>(static_cast<int64_t>(path.size()) - prompt_tokens);
      leaves.insert({-score / depth, child});
      ++added;
    }
  }
  return added;
}

}  // namespace replayssm::bench
