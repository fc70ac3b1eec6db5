// The conformance suite: every workload under every strategy on every
// backend this build has (make_backend), against the CPU reference
// backend run with the same options — and against transformers' greedy
// tokens where the fixtures have them. A token is compared only where the
// reference's top-2 logit gap exceeds what the backend's rounding can move
// (kMinGap: the CPU's fp32 against transformers; a device backend's bf16
// against the CPU, the margin its own parity tests use). The state
// manager's counters — replayed tokens, restores by path, shared flushes,
// evictions — come from the same manager on every backend, so they must be
// equal; bytes differ by the backends' units only.
//
// A device backend's reference is the CPU backend on a copy of the model
// with its matrices rounded to bf16 (what the device holds), planned as the
// device backend is (its units: both managers then emit the same plans, so
// a budget's evictions and a family's flushes agree). Options a backend
// refuses by name (check_options: the CUDA kernels read the log through
// pages of a power of two) are swapped for the nearest it takes.
//
// A device backend without its device is skipped (GTEST_SKIP names why);
// nothing else is.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "replayssm/engine.h"
#include "replayssm/make_backend.h"
#include "replayssm/tree_search.h"
#include "backend_test_util.h"
#include "test_util.h"
#include "workloads/beam_search.h"
#include "workloads/generate.h"
#include "workloads/session.h"

namespace replayssm {
namespace {

// The gap below which two backends may pick different tokens: fp32 rounding
// on the CPU; bf16 activations on a device (the CUDA tests' margin,
// tests/cuda/cuda_test_util.h kGreedyGap: past a near tie the paths may
// part).
double min_gap(const std::string& backend) { return backend == "cpu" ? 2e-3 : 0.15; }
// A logit's tolerance against the reference, relative to 1 + |reference|:
// the tiny fixtures amplify a device's bf16 activations along a sequence
// (tests/cuda/cuda_test_util.h: kLogitTol 6e-2 × kFixtureRatio 25, the
// bound the CUDA fixture tests hold).
double logit_tol(const std::string& backend) { return backend == "cpu" ? 1e-4 : 6e-2 * 25; }

struct Named {
  std::string name;
  StateOptions opt;
};

// The strategies every workload runs under; a page size `b` refuses (3:
// pages that straddle windows) becomes 2.
std::vector<Named> strategies(const Backend& b) {
  auto make = [&](Strategy s, int64_t w, bool exact, int64_t k, int64_t page, int64_t retention) {
    StateOptions o;
    o.strategy = s, o.window = w, o.exact = exact, o.checkpoint_interval = k, o.page_size = page;
    o.log_retention = retention;
    if (!b.check_options(o).ok()) o.page_size = 2;
    return o;
  };
  return {{"replay_exact", make(Strategy::kReplay, 4, true, 0, 4, 0)},
          {"replay_fast_k8", make(Strategy::kReplay, 8, false, 8, 3, -1)},
          {"snapshot", make(Strategy::kSnapshot, 8, false, 0, 4, 0)},
          {"recompute", make(Strategy::kRecompute, 8, false, 8, 4, 0)}};
}

struct Case {
  std::string backend, model;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.backend << "/" << c.model; }

class Conformance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto m = Model::load(test::data_dir(GetParam().model));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
    expected_ = test::read_json(test::data_dir(GetParam().model) + "/expected.json");
    auto b = make_backend(GetParam().backend, *model_);
    if (!b.ok() && GetParam().backend != "cpu") GTEST_SKIP() << b.status().message();
    ASSERT_TRUE(b.ok()) << b.status().message();
    backend_ = std::move(b).value();
    if (GetParam().backend == "cpu") {
      cpu_ = test::cpu_backend(*model_);
      ref_ = cpu_.get();
      return;
    }
    auto r = Model::load(test::data_dir(GetParam().model));
    ASSERT_TRUE(r.ok()) << r.status().message();
    ref_model_ = std::move(r).value();
    test::round_matrices_to_bf16(*ref_model_);
    cpu_ = test::cpu_backend(*ref_model_);
    planned_ = std::make_unique<test::PlannedAs>(*cpu_, *backend_);
    ref_ = planned_.get();
  }
  std::vector<int32_t> prompt(size_t i) const { return expected_["prompts"][i].get<std::vector<int32_t>>(); }
  // Greedy tokens of the reference with their top-2 gaps, for comparing a
  // backend's tokens only while the gaps are clear.
  struct Greedy {
    std::vector<int32_t> tokens;
    std::vector<double> gaps;
  };
  Greedy reference_greedy(const std::vector<int32_t>& p, int64_t n, const StateOptions& so) {
    auto s = Session::create(*ref_, so);
    EXPECT_TRUE(s.ok()) << s.status().message();
    Greedy g;
    const int64_t seq = (*s)->state().add_sequence();
    std::vector<float> row;
    StepInput in{seq, p};
    std::vector<int32_t> feed;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE((*s)->step({&in, 1}, &row).ok());
      std::vector<float> sorted = row;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      g.tokens.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
      g.gaps.push_back(static_cast<double>(sorted[0] - sorted[1]));
      feed.assign(1, g.tokens.back());
      in = StepInput{seq, feed};
    }
    return g;
  }
  // Compares while the reference's gaps stay clear; returns how many.
  int compare(const std::vector<int32_t>& got, const Greedy& want, const std::string& what) {
    int n = 0;
    for (size_t i = 0; i < want.tokens.size() && i < got.size() && want.gaps[i] > min_gap(GetParam().backend);
         ++i, ++n)
      EXPECT_EQ(got[i], want.tokens[i]) << what << " token " << i;
    return n;
  }
  // The manager's counters, equal on every backend for the same plans.
  static void expect_same_counters(const StateStats& a, const StateStats& b, const std::string& what) {
    EXPECT_EQ(a.replayed_tokens, b.replayed_tokens) << what;
    EXPECT_EQ(a.restores_checkpoint, b.restores_checkpoint) << what;
    EXPECT_EQ(a.restores_log_replay, b.restores_log_replay) << what;
    EXPECT_EQ(a.restores_reprefill, b.restores_reprefill) << what;
    EXPECT_EQ(a.shared_flushes, b.shared_flushes) << what;
    EXPECT_EQ(a.evictions, b.evictions) << what;
  }

  std::unique_ptr<Model> model_, ref_model_;
  nlohmann::json expected_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  std::unique_ptr<test::PlannedAs> planned_;
  Backend* ref_ = nullptr;  // cpu_, planned as backend_ where that is a device
};

TEST_P(Conformance, GenerateAndSpeculationGiveTheReferencesTokens) {
  const std::vector<int32_t> hf_prompt = prompt(1);
  int compared = 0;
  for (const Named& s : strategies(*backend_)) {
    GenerateOptions g;
    g.max_new_tokens = 12;
    g.stop_at_eos = false;
    g.state = s.opt;
    auto got = generate(*backend_, hf_prompt, g);
    ASSERT_TRUE(got.ok()) << s.name << ": " << got.status().message();
    // transformers' own greedy tokens, where the fixture's gaps are clear.
    const auto& want = expected_["greedy"][1];
    for (size_t i = 0; i < 12 && want["gaps"][i].get<double>() > min_gap(GetParam().backend); ++i, ++compared)
      EXPECT_EQ(got->tokens[i], want["tokens"][i].get<int32_t>()) << s.name << " step " << i;
    auto ref = generate(*ref_, hf_prompt, g);
    ASSERT_TRUE(ref.ok());
    expect_same_counters(got->state, ref->state, s.name + " generate");
    // Speculation (n-gram) emits greedy decoding's tokens.
    GenerateOptions sp = g;
    sp.spec.kind = SpecOptions::kNgram;
    sp.spec.tokens = 3;
    const std::vector<int32_t> repetitive = {5, 9, 13, 5, 9, 13, 5, 9, 13, 5};
    const Greedy plain = reference_greedy(repetitive, 12, s.opt);
    auto spec = generate(*backend_, repetitive, sp);
    ASSERT_TRUE(spec.ok()) << s.name << ": " << spec.status().message();
    compared += compare(spec->tokens, plain, s.name + " ngram speculation");
    EXPECT_GT(spec->spec.drafted, 0) << s.name;
  }
  EXPECT_GE(compared, 4 * 6) << "too few clear steps to compare";
}

TEST_P(Conformance, BeamSearchAndBestOfNMatchTheReference) {
  const std::vector<int32_t> p = prompt(2);
  for (const Named& s : strategies(*backend_)) {
    BeamOptions b;
    b.width = 3;
    b.max_new_tokens = 8;
    b.stop_at_eos = false;
    b.state = s.opt;
    SearchStats st, rst;
    auto got = beam_search(*backend_, p, b, &st);
    auto want = beam_search(*ref_, p, b, &rst);
    ASSERT_TRUE(got.ok() && want.ok()) << s.name;
    ASSERT_EQ(got->size(), want->size());
    // Beams whose scores sit apart more than the backends' rounding rank alike.
    for (size_t i = 0; i < want->size(); ++i) {
      const bool clear = (i == 0 || (*want)[i - 1].score - (*want)[i].score > min_gap(GetParam().backend)) &&
                         (i + 1 == want->size() || (*want)[i].score - (*want)[i + 1].score > min_gap(GetParam().backend));
      if (clear) EXPECT_EQ((*got)[i].tokens, (*want)[i].tokens) << s.name << " beam " << i;
    }
    if (GetParam().backend == "cpu") expect_same_counters(st.state, rst.state, s.name + " beam search");
    BestOfNOptions n;
    n.n = 3;
    n.max_new_tokens = 6;
    n.stop_at_eos = false;
    n.sampling = {0.0f, 1.0f, 5};  // greedy samples: comparable across backends
    n.state = s.opt;
    auto bo = best_of_n(*backend_, p, n, &st);
    ASSERT_TRUE(bo.ok()) << s.name << ": " << bo.status().message();
    const Greedy g = reference_greedy(p, 6, s.opt);
    for (const Hypothesis& h : *bo) compare(h.tokens, g, s.name + " best-of-n");
  }
}

TEST_P(Conformance, TreeSearchNodesMatchTheReferenceUnderABudget) {
  for (const Named& s : strategies(*backend_)) {
    StateOptions o = s.opt;
    o.state_budget = 3 * ssm_state_bytes_per_sequence(model_->config(), 4) + 20000;
    auto t = TreeSearch::create(*backend_, o);
    ASSERT_TRUE(t.ok()) << t.status().message();
    auto r = TreeSearch::create(*ref_, o);
    ASSERT_TRUE(r.ok());
    const std::vector<int32_t> p = {7, 3, 9, 27, 81};
    std::vector<TreeSearch::NodeId> nodes{*(*t)->root(p)}, ref_nodes{*(*r)->root(p)};
    for (int i = 0; i < 24; ++i) {
      const size_t at = static_cast<size_t>((i * 7) % nodes.size());
      const std::vector<int32_t> add = {static_cast<int32_t>(1 + (i * 13) % 60), static_cast<int32_t>(2 + i % 5)};
      auto c = (*t)->expand(nodes[at], add);
      auto rc = (*r)->expand(ref_nodes[at], add);
      ASSERT_TRUE(c.ok() && rc.ok()) << s.name << ": " << c.status().message();
      nodes.push_back(*c);
      ref_nodes.push_back(*rc);
      const std::span<const float> got = *(*t)->logits(*c), want = *(*r)->logits(*rc);
      ASSERT_EQ(got.size(), want.size());
      const double tol = logit_tol(GetParam().backend);
      for (size_t j = 0; j < want.size(); ++j)
        ASSERT_NEAR(got[j], want[j], tol * (1 + std::abs(want[j]))) << s.name << " node " << i;
    }
    expect_same_counters((*t)->state().stats(), (*r)->state().stats(), s.name + " tree");
    EXPECT_GT((*t)->state().stats().evictions, 0) << s.name;
  }
}

TEST_P(Conformance, EngineRequestsGiveGeneratesTokens) {
  for (const Named& s : strategies(*backend_)) {
    EngineOptions eo;
    eo.state = s.opt;
    eo.max_batch_tokens = 16;
    eo.prefill_chunk = 5;
    auto e = Engine::create(*backend_, eo);
    ASSERT_TRUE(e.ok()) << e.status().message();
    std::vector<int64_t> ids;
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < expected_["prompts"].size(); ++i) {
      RequestParams rp;
      rp.prompt = prompt(i);
      rp.max_new_tokens = 8;
      rp.stop_at_eos = false;
      prompts.push_back(rp.prompt);
      ids.push_back(*(*e)->submit(rp));
    }
    ASSERT_TRUE((*e)->run().ok()) << s.name;
    for (size_t i = 0; i < ids.size(); ++i) {
      const Greedy g = reference_greedy(prompts[i], 8, s.opt);
      compare(*(*e)->output(ids[i]), g, s.name + " engine request " + std::to_string(i));
    }
    EXPECT_EQ((*e)->state().n_sequences(), 0);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& b : backend_names())
    for (const char* m : {"nemotron_h_tiny", "qwen3_5_tiny"}) out.push_back({b, m});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.backend + "_" + i.param.model; });

}  // namespace
}  // namespace replayssm
