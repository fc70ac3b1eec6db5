// A small best-first tree search over a hybrid model with replayssm's
// TreeSearch: repeatedly take the highest-scoring unexpanded node, expand
// its two most likely next tokens, then print the tree. Every expansion
// forks a sequence of the state manager; under the replay strategy
// siblings share their parent's pages and checkpoints.
//
// Usage: replayssm_tree_example [MODEL_DIR] [EXPANSIONS] [DEVICE]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <set>
#include <string>

#include "replayssm/make_backend.h"
#include "replayssm/model.h"
#include "replayssm/tree_search.h"

using replayssm::TreeSearch;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "tests/data/nemotron_h_tiny";
  const int expansions = argc > 2 ? std::atoi(argv[2]) : 6;
  const std::string device = argc > 3 ? argv[3] : "cpu";
  auto model = replayssm::Model::load(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  auto backend = replayssm::make_backend(device, **model);
  if (!backend.ok()) {
    std::fprintf(stderr, "error: %s\n", backend.status().message().c_str());
    return 1;
  }
  replayssm::StateOptions state;
  state.window = 4;
  state.page_size = 4;
  auto tree = TreeSearch::create(**backend, state);
  if (!tree.ok()) {
    std::fprintf(stderr, "error: %s\n", tree.status().message().c_str());
    return 1;
  }
  TreeSearch& t = **tree;
  const std::vector<int32_t> prompt = {11, 22, 33, 44};
  const TreeSearch::NodeId root = *t.root(prompt);
  std::set<TreeSearch::NodeId> frontier{root};
  for (int e = 0; e < expansions && !frontier.empty(); ++e) {
    const TreeSearch::NodeId best = *std::max_element(frontier.begin(), frontier.end(), [&](auto a, auto b) {
      return *t.score(a) < *t.score(b);
    });
    frontier.erase(best);
    const auto logits = *t.logits(best);
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + 2, ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (int k = 0; k < 2; ++k) {
      auto child = t.expand(best, {&ids[k], 1});
      if (!child.ok()) {
        std::fprintf(stderr, "error: %s\n", child.status().message().c_str());
        return 1;
      }
      frontier.insert(*child);
    }
  }
  std::function<void(TreeSearch::NodeId, int)> show = [&](TreeSearch::NodeId n, int depth) {
    const auto toks = *t.tokens(n);
    std::printf("%*s%s token %d  score %.3f\n", 2 * depth, "", n == root ? "root" : "node",
                n == root ? -1 : toks.back(), *t.score(n));
    const std::vector<TreeSearch::NodeId> kids = t.children(n).value();
    for (TreeSearch::NodeId c : kids) show(c, depth + 1);
  };
  show(root, 0);
  const auto& st = t.state().stats();
  std::printf("nodes %zu; state bytes peak %lld; kv bytes peak %lld; checkpoint writes %lld bytes\n",
              static_cast<size_t>(2 * expansions + 1), (long long)st.state_bytes_peak, (long long)st.kv_bytes_peak,
              (long long)st.state_writes_bytes);
  return 0;
}
