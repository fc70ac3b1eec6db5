// TreeSearchCuda: a random tree grown over 4 slots (so nodes are evicted
// and made resident again from an ancestor all the time), then restores to
// random nodes — every node's logits, the logits after expanding a
// restored node, and every score against running the node's token path
// from scratch. Both layouts, two windows, four models.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "workloads/sampler.h"
#include "decoder_test_util.h"
#include "replayssm/model.h"
#include "runtime/cuda/tree_search_cuda.h"

namespace replayssm {
namespace {

using cuda::DecodeStrategy;
using cuda::TreeSearchCuda;

class CudaTree : public test::DeviceModelTest {
 protected:
  float bound() const { return trained() ? 3.0f : 25.0f; }  // as decoder_cuda_test.cpp
};

TEST_P(CudaTree, RestoredNodesMatchTheirPathsFromScratch) {
  const int64_t V = dm_->config().vocab_size;
  struct Case {
    DecodeStrategy strategy;
    int window, chunk;
  };
  for (const Case& c : {Case{DecodeStrategy::kReplay, 16, 8}, Case{DecodeStrategy::kReplay, 8, 4},
                        Case{DecodeStrategy::kStandard, 16, 8}, Case{DecodeStrategy::kRecompute, 4, 4}}) {
    SCOPED_TRACE(std::string(cuda::decode_strategy_name(c.strategy)) + " window " + std::to_string(c.window));
    cuda::TreeSearchCudaOptions o;
    o.strategy = c.strategy, o.window = c.window, o.chunk = c.chunk, o.slots = 4, o.max_context = 128;
    auto tree = TreeSearchCuda::create(*dm_, o);
    ASSERT_TRUE(tree.ok()) << tree.status().message();
    std::mt19937 g(31);
    std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
    std::vector<int32_t> prompt;
    for (int i = 0; i < 10; ++i) prompt.push_back(id(g));
    auto root = (*tree)->root(prompt);
    ASSERT_TRUE(root.ok()) << root.status().message();
    std::vector<TreeSearchCuda::NodeId> nodes{*root};
    for (int e = 0; e < 30; ++e) {
      const TreeSearchCuda::NodeId at = nodes[g() % nodes.size()];
      std::vector<int32_t> toks(1 + g() % 5);
      for (auto& t : toks) t = id(g);
      auto child = (*tree)->expand(at, toks);
      ASSERT_TRUE(child.ok()) << child.status().message();
      nodes.push_back(*child);
    }
    float worst = 0.0f;
    double worst_score = 0.0;
    int reprefilled = 0;
    for (int k = 0; k < 12; ++k) {
      const TreeSearchCuda::NodeId n = nodes[g() % nodes.size()];
      auto plan = (*tree)->restore(n);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      reprefilled += plan->path == RestorePath::kReprefill;
      auto path = (*tree)->tokens(n);
      ASSERT_TRUE(path.ok());
      std::vector<int32_t> ids(path->begin(), path->end());
      const auto ref = test::stepped(*dm_, ids);
      auto lg = (*tree)->logits(n);
      ASSERT_TRUE(lg.ok());
      worst = std::max(worst, test::worst_row_ratio(std::vector<float>(lg->begin(), lg->end()), ref.back()));
      double lp = 0.0;  // the node's score: its tokens after the prompt
      for (size_t i = prompt.size(); i < ids.size(); ++i) lp += ops::cpu::log_prob(ref[i - 1], ids[i]);
      worst_score = std::max(worst_score, std::abs(lp - *(*tree)->score(n)));
      // The restored state itself: one more token from it.
      const int32_t t = id(g);
      auto child = (*tree)->expand(n, std::vector<int32_t>{t});
      ASSERT_TRUE(child.ok()) << child.status().message();
      ids.push_back(t);
      auto cl = (*tree)->logits(*child);
      ASSERT_TRUE(cl.ok());
      worst = std::max(worst, test::worst_row_ratio(std::vector<float>(cl->begin(), cl->end()), test::stepped(*dm_, ids).back()));
    }
    const auto& st = (*tree)->stats();
    std::printf("  %s %s W=%d: %lld expansions, %lld evictions, %lld re-prefills (%lld tokens); worst ratio vs the path "
                "from scratch %.3f, worst |score - teacher-forced| %.4f\n",
                GetParam().c_str(), cuda::decode_strategy_name(c.strategy), c.window, (long long)st.expansions,
                (long long)st.evictions, (long long)st.reprefills, (long long)st.reprefilled_tokens, worst, worst_score);
    EXPECT_LE(worst, bound());
    EXPECT_LT(worst_score, bound() == 3.0f ? 0.5 : 2.0);
    EXPECT_GT(st.evictions, 10);
    EXPECT_GT(reprefilled, 0);
  }
}

TEST_P(CudaTree, MisuseIsRefused) {
  cuda::TreeSearchCudaOptions o;
  o.slots = 2;
  EXPECT_FALSE(TreeSearchCuda::create(*dm_, o).ok()) << "fewer than 3 slots";
  o.slots = 3, o.max_context = 12;
  auto tree = TreeSearchCuda::create(*dm_, o);
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  EXPECT_FALSE((*tree)->expand(0, std::vector<int32_t>{1}).ok()) << "no root yet";
  EXPECT_FALSE((*tree)->root(std::vector<int32_t>{}).ok()) << "empty prompt";
  auto root = (*tree)->root(std::vector<int32_t>{1, 2, 3});
  ASSERT_TRUE(root.ok());
  EXPECT_FALSE((*tree)->root(std::vector<int32_t>{1}).ok()) << "a second root";
  EXPECT_FALSE((*tree)->expand(*root, std::vector<int32_t>{}).ok()) << "no tokens";
  EXPECT_FALSE((*tree)->expand(*root, std::vector<int32_t>{-1}).ok()) << "bad id";
  EXPECT_FALSE((*tree)->expand(7, std::vector<int32_t>{1}).ok()) << "no node 7";
  const Status full = (*tree)->expand(*root, std::vector<int32_t>(10, 1)).status();
  EXPECT_EQ(full.code(), StatusCode::kOutOfBudget) << full.message();
}

INSTANTIATE_TEST_SUITE_P(Models, CudaTree,
                         ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny", "models/nemotron_h_small",
                                           "models/qwen3_5_small"),
                         test::model_param_name);

}  // namespace
}  // namespace replayssm
