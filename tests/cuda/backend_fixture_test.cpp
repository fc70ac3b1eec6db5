// The CUDA backend on the transformers fixtures (tests/data/*/expected.json:
// prompts, transformers' prefill logits and greedy tokens with their top-2
// gaps), skipped where no GPU is visible. Every fixture, under each
// strategy, takes its prompts together in one step (the chunk scans) and,
// again, one token a step (the replay kernels, ragged as the prompts end):
// every row within kFixtureRatio of the CPU backend on the same bf16
// matrices, and — the oracle — the greedy tokens of generate_batch equal
// transformers' up to the first top-2 gap under kGreedyGap.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../backend_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "gpu_and_reference.h"
#include "workloads/generate.h"
#include "workloads/session.h"

namespace replayssm {
namespace {

StateOptions opts(Strategy s, int64_t w, bool exact, int64_t page) {
  StateOptions o;
  o.strategy = s, o.window = w, o.exact = exact, o.page_size = page;
  return o;
}

class CudaBackendFixture : public test::GpuAndReferenceTest {
 protected:
  void SetUp() override {
    GpuAndReferenceTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::ifstream in(test::fixture(GetParam()) + "/expected.json");
    expected_ = nlohmann::json::parse(in);
    for (const auto& p : expected_["prompts"]) prompts_.push_back(p.get<std::vector<int32_t>>());
    // Positions where transformers' own bf16 run moves the logits by more
    // than a quarter of the bound are ill-conditioned: bf16 rounding alone
    // moves them that far (measured 2026-12-07: 103.8 of the tolerance at
    // qwen3_5_vl_tied's token 87 first). Reported there, not held.
    ill_.resize(prompts_.size());
    for (size_t p = 0; p < prompts_.size(); ++p)
      for (size_t t = 0; t < prompts_[p].size(); ++t)
        ill_[p].push_back(expected_.contains("prefill_logits_bf16") &&
                          test::worst_row_ratio(expected_["prefill_logits_bf16"][p][t].get<std::vector<float>>(),
                                                expected_["prefill_logits"][p][t].get<std::vector<float>>()) >
                              test::kFixtureRatio / 4);
  }

  // Every prompt's logits, one row per position: all prompts in one step
  // (stepped = false) or one token a step.
  std::vector<std::vector<std::vector<float>>> run(Backend& be, const StateOptions& so, bool stepped) {
    std::vector<std::vector<std::vector<float>>> out(prompts_.size());
    auto s = Session::create(be, so);
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok()) return out;
    std::vector<int64_t> seqs;
    for (size_t i = 0; i < prompts_.size(); ++i) seqs.push_back((*s)->state().add_sequence());
    const size_t V = size_t(model_->config().vocab_size);
    size_t longest = 0;
    for (const auto& p : prompts_) longest = std::max(longest, p.size());
    for (size_t t = 0; t < (stepped ? longest : 1); ++t) {
      std::vector<StepInput> in;
      std::vector<size_t> who;
      for (size_t i = 0; i < prompts_.size(); ++i) {
        if (stepped && t >= prompts_[i].size()) continue;
        const std::span<const int32_t> all(prompts_[i]);
        in.push_back({seqs[i], stepped ? all.subspan(t, 1) : all, true, StepInput::kAll});
        who.push_back(i);
      }
      std::vector<float> logits;
      const Status st = (*s)->step(in, &logits);
      EXPECT_TRUE(st.ok()) << st.message();
      if (!st.ok()) return out;
      size_t row = 0;
      for (size_t k = 0; k < in.size(); ++k)
        for (size_t j = 0; j < in[k].tokens.size(); ++j, ++row)
          out[who[k]].emplace_back(logits.begin() + int64_t(row * V), logits.begin() + int64_t((row + 1) * V));
    }
    return out;
  }

  nlohmann::json expected_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::vector<bool>> ill_;  // [prompt][position]: bf16 alone moves it past a quarter of the bound
};

TEST_P(CudaBackendFixture, LogitsMatchTheCpuAndGreedyMatchesTransformers) {
  const StateOptions strategies[] = {opts(Strategy::kReplay, 4, false, 4), opts(Strategy::kReplay, 16, true, 1),
                                     opts(Strategy::kSnapshot, 8, false, 4), opts(Strategy::kRecompute, 8, false, 2)};
  for (const StateOptions& so : strategies) {
    const std::string name = std::string(strategy_name(so.strategy)) + (so.exact ? " exact" : "");
    for (bool stepped : {false, true}) {
      const auto got = run(*gpu_, so, stepped), want = run(*ref_, so, stepped);
      for (size_t p = 0; p < prompts_.size(); ++p) {
        ASSERT_EQ(got[p].size(), prompts_[p].size()) << name;
        ASSERT_EQ(want[p].size(), prompts_[p].size()) << name;
        float vs_cpu = 0.0f, vs_hf = 0.0f, ill_worst = 0.0f;
        size_t worst_at = 0, n_ill = 0;
        for (size_t t = 0; t < prompts_[p].size(); ++t) {
          const float r = test::worst_row_ratio(got[p][t], want[p][t]);
          if (ill_[p][t]) {
            ++n_ill, ill_worst = std::max(ill_worst, r);
            continue;
          }
          if (r > vs_cpu) vs_cpu = r, worst_at = t;
          vs_hf = std::max(vs_hf, test::worst_row_ratio(got[p][t], expected_["prefill_logits"][p][t].get<std::vector<float>>()));
        }
        std::printf("  %s %s %s prompt %zu (%zu tokens): worst ratio vs CPU on bf16 weights %.3f (position %zu), vs "
                    "transformers %.3f; %zu ill-conditioned positions, worst there %.3f\n",
                    GetParam().c_str(), name.c_str(), stepped ? "stepped" : "in one step", p, prompts_[p].size(), vs_cpu,
                    worst_at, vs_hf, n_ill, ill_worst);
        // A measure that exempted most of a prompt would hold nothing.
        EXPECT_LE(4 * n_ill, prompts_[p].size() + 3) << "prompt " << p << ": " << n_ill << " ill-conditioned positions";
        EXPECT_LE(vs_cpu, test::kFixtureRatio) << name << (stepped ? " stepped" : "") << " prompt " << p << " position "
                                               << worst_at;
      }
    }
    GenerateOptions g;
    const auto& greedy = expected_["greedy"];
    g.max_new_tokens = int64_t(greedy[0]["tokens"].size()), g.stop_at_eos = false, g.state = so;
    auto r = generate_batch(*gpu_, prompts_, g);
    ASSERT_TRUE(r.ok()) << r.status().message();
    for (size_t p = 0; p < prompts_.size(); ++p) {
      const auto want = greedy[p]["tokens"].get<std::vector<int32_t>>();
      const auto gaps = greedy[p]["gaps"].get<std::vector<double>>();
      ASSERT_EQ(r->tokens[p].size(), want.size()) << name;
      for (size_t i = 0; i < want.size() && gaps[i] >= test::kGreedyGap; ++i)  // past a near tie the paths may part
        ASSERT_EQ(r->tokens[p][i], want[i]) << name << " prompt " << p << " token " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaBackendFixture,
                         ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny", "nemotron_h_legacy_f16", "qwen3_5_vl_tied"),
                         test::model_param_name);

}  // namespace
}  // namespace replayssm
