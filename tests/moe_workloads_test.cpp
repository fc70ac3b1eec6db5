// The branching workloads on mixture-of-experts models of both families
// (moe_test_util.h), under every strategy on the CPU backend: beam search
// (width 1 is greedy; every strategy finds the same beams), best-of-n
// (sample i is generate's draw with seed + i), draft-model speculation
// (greedy, and sampled reproducibly) and tree search under a budget that
// evicts (every node's logits are those of a full prefill of its path).
// moe_model_test.cpp has plain decoding, n-gram speculation and the engine;
// together they run every workload the dense fixtures run.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/dense_cache.h"
#include "moe_test_util.h"
#include "replayssm/model.h"
#include "replayssm/tree_search.h"
#include "test_util.h"
#include "workloads/beam_search.h"
#include "workloads/generate.h"

namespace replayssm {
namespace {

using test::TempDir;

using Family = test::MoeFamily;

std::vector<Family> families() { return test::moe_families(/*with_vl=*/false); }

struct Named {
  std::string name;
  StateOptions opt;
};

std::vector<Named> strategies() {
  auto make = [](Strategy s, int64_t w, bool exact, int64_t k) {
    StateOptions o;
    o.strategy = s, o.window = w, o.exact = exact, o.checkpoint_interval = k, o.page_size = 4;
    return o;
  };
  return {{"replay_exact", make(Strategy::kReplay, 4, true, 0)},
          {"replay_fast_k8", make(Strategy::kReplay, 8, false, 8)},
          {"snapshot", make(Strategy::kSnapshot, 8, false, 0)},
          {"recompute", make(Strategy::kRecompute, 8, false, 8)}};
}

// One family's model, written and loaded in a scratch directory.
class MoeWorkloads : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    test::write_moe_checkpoint(dir_.path(), GetParam().config, /*per_expert=*/false, /*bf16=*/false);
    auto m = Model::load(dir_.path());
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
    backend_ = test::cpu_backend(*model_);
  }
  // Next-token logits after `tokens`, from one prefill of all of them.
  std::vector<float> prefill_last(const std::vector<int32_t>& tokens) const {
    DenseCache cache(cache_spec(model_->config()));
    const int64_t n = static_cast<int64_t>(tokens.size()), V = model_->config().vocab_size;
    SeqSlice s{cache.add_sequence(), 0, n, 0};
    const int64_t row = n - 1;
    std::vector<float> logits(static_cast<size_t>(V));
    EXPECT_TRUE(model_->forward({&s, 1}, tokens, cache, {&row, 1}, logits.data()).ok());
    return logits;
  }

  TempDir dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<cpu::CpuBackend> backend_;
};

const std::vector<int32_t> kPrompt = {6, 1, 33, 14, 8, 27};

TEST_P(MoeWorkloads, BeamSearchIsGreedyAtWidthOneAndAgreesAcrossStrategies) {
  std::vector<Hypothesis> first;
  for (const Named& s : strategies()) {
    GenerateOptions g;
    g.max_new_tokens = 8;
    g.stop_at_eos = false;
    g.state = s.opt;
    auto greedy = generate(*backend_, kPrompt, g);
    BeamOptions b;
    b.width = 1;
    b.max_new_tokens = 8;
    b.stop_at_eos = false;
    b.state = s.opt;
    auto one = beam_search(*backend_, kPrompt, b);
    ASSERT_TRUE(greedy.ok() && one.ok()) << s.name;
    ASSERT_EQ(one->size(), 1u);
    EXPECT_EQ((*one)[0].tokens, greedy->tokens) << s.name;

    b.width = 3;
    b.max_new_tokens = 6;
    auto three = beam_search(*backend_, kPrompt, b);
    ASSERT_TRUE(three.ok()) << s.name << ": " << three.status().message();
    ASSERT_EQ(three->size(), 3u);
    if (first.empty()) first = *three;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ((*three)[i].tokens, first[i].tokens) << s.name << " beam " << i;
      EXPECT_NEAR((*three)[i].logprob, first[i].logprob, 1e-3) << s.name << " beam " << i;
    }
  }
}

TEST_P(MoeWorkloads, BestOfNSampleIIsGeneratesDrawWithSeedPlusI) {
  for (const Named& s : strategies()) {
    BestOfNOptions o;
    o.n = 3;
    o.max_new_tokens = 6;
    o.stop_at_eos = false;
    o.sampling = {1.0f, 1.0f, 40};
    o.state = s.opt;
    auto all = best_of_n(*backend_, kPrompt, o);
    ASSERT_TRUE(all.ok()) << s.name << ": " << all.status().message();
    ASSERT_EQ(all->size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      GenerateOptions g;
      g.max_new_tokens = 6;
      g.stop_at_eos = false;
      g.sampling = {1.0f, 1.0f, 40 + i};
      g.state = s.opt;
      auto one = generate(*backend_, kPrompt, g);
      ASSERT_TRUE(one.ok());
      EXPECT_EQ(one->tokens, (*all)[i].tokens) << s.name << " sample " << i;
    }
  }
}

TEST_P(MoeWorkloads, DraftModelSpeculationGivesGreedyTokens) {
  // The model drafting for itself, through a second backend (one session each).
  auto self = test::cpu_backend(*model_);
  for (const Named& s : strategies()) {
    GenerateOptions plain;
    plain.max_new_tokens = 12;
    plain.stop_at_eos = false;
    plain.state = s.opt;
    auto want = generate(*backend_, kPrompt, plain);
    ASSERT_TRUE(want.ok());
    GenerateOptions sp = plain;
    sp.spec.kind = SpecOptions::kDraft;
    sp.spec.tokens = 3;
    sp.spec.draft = self.get();
    auto got = generate(*backend_, kPrompt, sp);
    ASSERT_TRUE(got.ok()) << s.name << ": " << got.status().message();
    EXPECT_EQ(got->tokens, want->tokens) << s.name;
    EXPECT_GT(got->spec.drafted, 0) << s.name;
    if (s.opt.exact) {
      EXPECT_DOUBLE_EQ(got->spec.acceptance_rate(), 1.0) << s.name;
    }
    // Sampled: rejection sampling from the same seed draws the same tokens.
    sp.sampling = {0.8f, 0.95f, 7};
    auto a = generate(*backend_, kPrompt, sp), b = generate(*backend_, kPrompt, sp);
    ASSERT_TRUE(a.ok() && b.ok()) << s.name;
    EXPECT_EQ(a->tokens, b->tokens) << s.name;
  }
}

TEST_P(MoeWorkloads, TreeSearchNodesAreFullPrefillsOfTheirPathsUnderABudget) {
  const int64_t V = model_->config().vocab_size;
  for (const Named& s : strategies()) {
    StateOptions o = s.opt;
    o.state_budget = 3 * ssm_state_bytes_per_sequence(model_->config(), 4) + 20000;
    auto t = TreeSearch::create(*backend_, o);
    ASSERT_TRUE(t.ok()) << t.status().message();
    std::vector<TreeSearch::NodeId> nodes{*(*t)->root(kPrompt)};
    std::vector<std::vector<int32_t>> paths{kPrompt};
    for (int i = 0; i < 16; ++i) {
      const size_t at = static_cast<size_t>((i * 7) % nodes.size());
      const std::vector<int32_t> add = {static_cast<int32_t>(1 + (i * 13) % (V - 1)), static_cast<int32_t>(2 + i % 5)};
      auto c = (*t)->expand(nodes[at], add);
      ASSERT_TRUE(c.ok()) << s.name << ": " << c.status().message();
      std::vector<int32_t> path = paths[at];
      path.insert(path.end(), add.begin(), add.end());
      nodes.push_back(*c);
      paths.push_back(path);
      const std::span<const float> got = *(*t)->logits(*c);
      const std::vector<float> want = prefill_last(path);
      ASSERT_EQ(got.size(), want.size());
      for (size_t j = 0; j < want.size(); ++j)
        ASSERT_NEAR(got[j], want[j], 1e-4 * (1 + std::abs(want[j]))) << s.name << " node " << i;
    }
    EXPECT_GT((*t)->state().stats().evictions, 0) << s.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, MoeWorkloads, ::testing::ValuesIn(families()),
                         [](const ::testing::TestParamInfo<Family>& i) { return i.param.name; });

}  // namespace
}  // namespace replayssm
