// TreeSearch: nodes expanded in random order under a tight state budget
// (so the store evicts and nodes must be restored by log replay or
// re-prefill); every node's logits and every restored node's next step are
// checked against running its token path from scratch.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "workloads/sampler.h"
#include "replayssm/tree_search.h"
#include "backend/cpu/dense_cache.h"
#include "test_util.h"

namespace replayssm {
namespace {

std::vector<float> from_scratch(const Model& m, std::span<const int32_t> path) {
  DenseCache c(cache_spec(m.config()));
  SeqSlice s{c.add_sequence(), 0, static_cast<int64_t>(path.size()), 0};
  const int64_t last = s.n - 1;
  std::vector<float> l(m.config().vocab_size);
  EXPECT_TRUE(m.forward({&s, 1}, path, c, {&last, 1}, l.data()).ok());
  return l;
}

void expect_close(std::span<const float> got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i])));
}

class Tree : public ::testing::TestWithParam<Strategy> {};

TEST_P(Tree, RestoresToAnyNode) {
  auto m = Model::load(test::data_dir("nemotron_h_tiny"));
  ASSERT_TRUE(m.ok());
  const Model& model = **m;
  StateOptions o;
  o.strategy = GetParam();
  o.window = 3;
  o.page_size = 4;
  o.log_retention = -1;
  // About three nodes' worth of state: most nodes get evicted.
  o.state_budget = 3 * ssm_state_bytes_per_sequence(model.config(), 4) + 20000;
  auto backend = test::cpu_backend(model);
  auto t = TreeSearch::create(*backend, o);
  ASSERT_TRUE(t.ok());
  TreeSearch& tree = **t;
  const std::vector<int32_t> prompt = {7, 3, 9, 27, 81};
  std::vector<TreeSearch::NodeId> nodes{*tree.root(prompt)};
  std::mt19937 g(5);
  for (int i = 0; i < 60; ++i) {
    const TreeSearch::NodeId at = nodes[g() % nodes.size()];
    std::vector<int32_t> add(1 + g() % 3);
    for (int32_t& x : add) x = static_cast<int32_t>(g() % 97);
    if (g() % 4 == 0) {  // sometimes come back explicitly first
      auto plan = tree.restore(at);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
    }
    auto child = tree.expand(at, add);
    ASSERT_TRUE(child.ok()) << child.status().message();
    nodes.push_back(*child);
    const std::span<const int32_t> path = *tree.tokens(*child);
    expect_close(*tree.logits(*child), from_scratch(model, path));
    if (HasFatalFailure()) return;
    // Its score is the path's log-probability after the prompt.
    double want = 0;
    for (size_t j = prompt.size(); j < path.size(); ++j)
      want += ops::cpu::log_prob(from_scratch(model, path.subspan(0, j)), path[j]);
    EXPECT_NEAR(*tree.score(*child), want, 1e-3);
  }
  const StateStats& st = tree.state().stats();
  EXPECT_GT(st.evictions, 0);
  EXPECT_GT(st.restores_log_replay + st.restores_reprefill, 0);
  EXPECT_LE(st.state_bytes_peak, o.state_budget);
  // Releasing the root frees everything.
  ASSERT_TRUE(tree.release(nodes[0]).ok());
  EXPECT_EQ(tree.state().n_sequences(), 0);
  EXPECT_EQ(tree.state().n_pages(), 0);
  EXPECT_EQ(tree.state().n_checkpoints(), 0);
  EXPECT_FALSE(tree.expand(nodes[1], std::vector<int32_t>{1}).ok());
}

TEST(TreeErrors, BadCalls) {
  auto m = Model::load(test::data_dir("qwen3_5_tiny"));
  ASSERT_TRUE(m.ok());
  auto backend = test::cpu_backend(**m);
  auto t = TreeSearch::create(*backend, StateOptions{});
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE((*t)->root(std::vector<int32_t>{}).ok());
  const auto r = (*t)->root(std::vector<int32_t>{1, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*t)->root(std::vector<int32_t>{1}).ok());
  EXPECT_FALSE((*t)->expand(*r, std::vector<int32_t>{}).ok());
  EXPECT_FALSE((*t)->expand(*r, std::vector<int32_t>{500}).ok());
  EXPECT_FALSE((*t)->expand(42, std::vector<int32_t>{1}).ok());
  EXPECT_EQ((*t)->state().n_sequences(), 1);
}

INSTANTIATE_TEST_SUITE_P(Strategies, Tree, ::testing::Values(Strategy::kReplay, Strategy::kSnapshot, Strategy::kRecompute),
                         [](const ::testing::TestParamInfo<Strategy>& i) { return std::string(strategy_name(i.param)); });

}  // namespace
}  // namespace replayssm
