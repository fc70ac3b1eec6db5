// Mixtures of experts on the CUDA backend against the CPU reference on the
// same bf16 matrices — tests/moe_test_util.h's tiny checkpoints (NemotronH
// with `E` layers, Qwen3.5-MoE with a gated shared expert and without one)
// and transformers' MoE fixtures — skipped where no GPU is visible.
//
// The device routes on router logits a rounding away from the CPU's (bf16
// activations), so where a row's choice sits within that rounding of its
// cutoff (ops::cpu::moe_route_margin on the device's own logits below
// kRouteTie) the two may choose different experts — and the sequence's
// later rows inherit the difference through its states. Such a row and the
// rest of its sequence are counted and reported, not compared; enough rows
// must remain that the comparison means something.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../backend_test_util.h"
#include "../moe_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "model/program.h"
#include "ops/cpu/moe_routing.h"
#include "workloads/generate.h"
#include "workloads/session.h"

namespace replayssm {
namespace {

// A routing margin (router-logit units) under which the device may choose
// otherwise: a few times the router logits' rounding error at these widths
// (bf16 inputs of a 20–24 wide dot product, ~3e-3).
constexpr float kRouteTie = 3e-2f;

std::string config_of(const std::string& family) {
  if (family == "nemotron_h_moe") return test::nemotron_moe_config();
  if (family == "nemotron_h_moe_gqa16") {  // Nemotron 3 Nano's 16 query heads a KV head: attention_prefill_cuda decodes
    std::string c = test::nemotron_moe_config();
    const std::string from = R"("num_attention_heads": 4, "num_key_value_heads": 2)";
    c.replace(c.find(from), from.size(), R"("num_attention_heads": 16, "num_key_value_heads": 1)");
    return c;
  }
  if (family == "qwen3_5_moe") return test::qwen_moe_config(false);
  return test::qwen_moe_config(true, 0);  // qwen3_5_moe_vl_no_shared
}

// The model on the GPU (its router logits kept) and the CPU reference on
// the same bf16 matrices, planned alike; a subclass names the checkpoint.
class MoeOnGpu : public test::GpuTestWithParam<std::string> {
 protected:
  void load(const std::string& dir) {
    auto m = Model::load(dir);
    auto r = Model::load(dir);
    ASSERT_TRUE(m.ok() && r.ok()) << (m.ok() ? r.status().message() : m.status().message());
    model_ = std::move(m).value(), ref_model_ = std::move(r).value();
    test::round_matrices_to_bf16(*ref_model_);
    cuda::CudaBackendOptions o;
    o.keep_router_logits = true;
    auto g = cuda::CudaBackend::create(*model_, o);
    ASSERT_TRUE(g.ok()) << g.status().message();
    gpu_ = std::move(g).value();
    auto c = cpu::CpuBackend::create(*ref_model_);
    ASSERT_TRUE(c.ok()) << c.status().message();
    cpu_ = std::move(c).value();
    ref_ = std::make_unique<test::PlannedAs>(*cpu_, *gpu_);
  }

  static StateOptions options(Strategy strat) {
    StateOptions so;
    so.strategy = strat, so.window = 4, so.page_size = 4;
    return so;
  }

  // A session on each backend, with n sequences added to both alike.
  void sessions(const StateOptions& so, int n, std::unique_ptr<Session>* a, std::unique_ptr<Session>* b,
                std::vector<int64_t>* seqs) {
    auto ga = Session::create(*gpu_, so);
    auto gb = Session::create(*ref_, so);
    ASSERT_TRUE(ga.ok() && gb.ok()) << (ga.ok() ? gb.status().message() : ga.status().message());
    *a = std::move(ga).value(), *b = std::move(gb).value();
    for (int i = 0; i < n; ++i) seqs->push_back((*a)->state().add_sequence()), (*b)->state().add_sequence();
  }

  // Per row of the last step: whether any MoE block's choice sat within
  // kRouteTie of its cutoff on the device.
  std::vector<bool> near_ties(int64_t rows) {
    std::vector<bool> tie(size_t(rows), false);
    const MoeConfig& e = model_->config().moe;
    int moe = 0;
    for (const Block& b : model_->program().blocks) {
      if (b.kind != BlockKind::kMoe) continue;
      std::vector<float> logits, margin(static_cast<size_t>(rows));
      const Status st = gpu_->router_logits(moe++, &logits);
      EXPECT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(int64_t(logits.size()), rows * e.n_experts);
      if (!st.ok() || int64_t(logits.size()) != rows * e.n_experts) return tie;
      ops::cpu::moe_route_margin(ops::moe_routing_params(e, b.moe.correction_bias), logits.data(), e.n_experts, rows,
                                 margin.data());
      for (int64_t r = 0; r < rows; ++r) tie[size_t(r)] = tie[size_t(r)] || margin[size_t(r)] < kRouteTie;
    }
    return tie;
  }

  std::unique_ptr<Model> model_, ref_model_;
  std::unique_ptr<cuda::CudaBackend> gpu_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  std::unique_ptr<test::PlannedAs> ref_;
};

// The tests' own tiny checkpoints (tests/moe_test_util.h).
class CudaMoeTest : public MoeOnGpu {
 protected:
  void SetUp() override {
    MoeOnGpu::SetUp();
    if (IsSkipped()) return;
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("rssm_cuda_moe_" + GetParam() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    test::write_moe_checkpoint(dir.string(), config_of(GetParam()), /*per_expert=*/GetParam() != "qwen3_5_moe",
                               /*bf16=*/false);
    load(dir.string());
    std::filesystem::remove_all(dir);
  }
};

// 48 sequences: a 3-token prompt each in one step (many rows an expert: the
// grouped linear's prefill shape), then one token each a step (a few rows
// an expert), under each strategy. Every kept row of a sequence with no
// near-tie so far is compared.
TEST_P(CudaMoeTest, PrefillAndDecodeMatchTheCpu) {
  const int64_t V = model_->config().vocab_size;
  constexpr int kSeqs = 48, kPrompt = 3, kDecode = 6;
  for (Strategy strat : {Strategy::kReplay, Strategy::kSnapshot, Strategy::kRecompute}) {
    const StateOptions so = options(strat);
    std::unique_ptr<Session> a, b;
    std::vector<int64_t> seqs;
    ASSERT_NO_FATAL_FAILURE(sessions(so, kSeqs, &a, &b, &seqs));
    std::mt19937 g(11);
    std::vector<std::vector<int32_t>> toks(kSeqs);
    for (auto& t : toks)
      for (int i = 0; i < kPrompt + kDecode; ++i) t.push_back(int32_t(g() % uint32_t(V)));
    std::vector<bool> tainted(kSeqs, false);
    int compared = 0, decode_compared = 0, skipped = 0, ties = 0;
    float worst = 0.0f;
    for (int step = 0; step <= kDecode; ++step) {
      std::vector<StepInput> in;
      std::vector<int> seq_of_row;
      for (int i = 0; i < kSeqs; ++i) {
        const size_t at = step == 0 ? 0 : size_t(kPrompt + step - 1), n = step == 0 ? kPrompt : 1;
        in.push_back({seqs[size_t(i)], std::span<const int32_t>(toks[size_t(i)]).subspan(at, n), true, StepInput::kAll});
        for (size_t j = 0; j < n; ++j) seq_of_row.push_back(i);
      }
      std::vector<float> la, lb;
      const Status sa = a->step(in, &la), sb = b->step(in, &lb);
      ASSERT_TRUE(sa.ok() && sb.ok()) << sa.message() << " / " << sb.message();
      ASSERT_EQ(la.size(), lb.size());
      ASSERT_EQ(int64_t(la.size()), int64_t(seq_of_row.size()) * V);
      const std::vector<bool> tie = near_ties(int64_t(seq_of_row.size()));
      for (size_t r = 0; r < seq_of_row.size(); ++r) {
        const int s = seq_of_row[r];
        if (tie[r] && !tainted[size_t(s)]) ++ties, tainted[size_t(s)] = true;
        if (tainted[size_t(s)]) {
          ++skipped;
          continue;
        }
        const std::vector<float> x(la.begin() + int64_t(r) * V, la.begin() + int64_t(r + 1) * V);
        const std::vector<float> y(lb.begin() + int64_t(r) * V, lb.begin() + int64_t(r + 1) * V);
        worst = std::max(worst, test::worst_row_ratio(x, y));
        ++compared, decode_compared += step > 0;
      }
    }
    std::printf("  %s %s: %d rows compared (%d decoding), worst |d|/(%.0e(1+|ref|)) %.3f; %d near-ties left %d rows out\n",
                GetParam().c_str(), strategy_name(strat), compared, decode_compared, test::kLogitTol, worst, ties, skipped);
    EXPECT_LE(worst, test::kFixtureRatio) << strategy_name(strat);
    // The comparison must cover prefill and decode rows, whatever the ties
    // leave out (a row is near one in roughly a third of the rows here).
    EXPECT_GE(compared - decode_compared, kSeqs / 2) << strategy_name(strat);
    EXPECT_GE(decode_compared, 8) << strategy_name(strat);
  }
}

// transformers' MoE fixtures (tests/data, tools/make_moe_fixtures.py): each
// prompt one token a step, every position before the prompt's first
// near-tie within kFixtureRatio of the CPU on the same bf16 matrices (whose
// own parity with transformers moe_parity_test holds), and the greedy
// tokens transformers' up to the first top-2 gap under kGreedyGap or the
// first near-tie.
class CudaMoeFixture : public MoeOnGpu {
 protected:
  void SetUp() override {
    MoeOnGpu::SetUp();
    if (IsSkipped()) return;
    load(test::fixture(GetParam()));
  }
};

TEST_P(CudaMoeFixture, MatchesTheCpuAndTransformersAwayFromNearTies) {
  std::ifstream in(test::fixture(GetParam()) + "/expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : expected["prompts"]) prompts.push_back(p.get<std::vector<int32_t>>());
  const int64_t V = model_->config().vocab_size;
  const auto& greedy = expected["greedy"];
  for (Strategy strat : {Strategy::kReplay, Strategy::kSnapshot, Strategy::kRecompute}) {
    const StateOptions so = options(strat);
    std::unique_ptr<Session> a, b;
    std::vector<int64_t> seqs;
    ASSERT_NO_FATAL_FAILURE(sessions(so, int(prompts.size()), &a, &b, &seqs));
    std::vector<int64_t> first_tie(prompts.size(), -1);
    int compared = 0;
    float worst = 0.0f;
    size_t longest = 0;
    for (const auto& p : prompts) longest = std::max(longest, p.size());
    for (size_t t = 0; t < longest; ++t) {
      std::vector<StepInput> step;
      std::vector<size_t> who;
      for (size_t i = 0; i < prompts.size(); ++i)
        if (t < prompts[i].size()) step.push_back({seqs[i], std::span<const int32_t>(prompts[i]).subspan(t, 1)}), who.push_back(i);
      std::vector<float> la, lb;
      const Status sa = a->step(step, &la), sb = b->step(step, &lb);
      ASSERT_TRUE(sa.ok() && sb.ok()) << sa.message() << " / " << sb.message();
      const std::vector<bool> tie = near_ties(int64_t(who.size()));
      for (size_t k = 0; k < who.size(); ++k) {
        const size_t i = who[k];
        if (tie[k] && first_tie[i] < 0) first_tie[i] = int64_t(t);
        if (first_tie[i] >= 0) continue;
        const std::vector<float> x(la.begin() + int64_t(k) * V, la.begin() + int64_t(k + 1) * V);
        const std::vector<float> y(lb.begin() + int64_t(k) * V, lb.begin() + int64_t(k + 1) * V);
        worst = std::max(worst, test::worst_row_ratio(x, y));
        ++compared;
      }
    }
    std::printf("  %s %s: %d positions compared, worst ratio vs CPU %.3f; first near-ties at", GetParam().c_str(),
                strategy_name(strat), compared, worst);
    for (int64_t f : first_tie) std::printf(" %lld", (long long)f);
    std::printf(" (-1: none)\n");
    EXPECT_LE(worst, test::kFixtureRatio) << strategy_name(strat);
    EXPECT_GE(compared, int(prompts.size())) << strategy_name(strat);
    a.reset(), b.reset();  // generate_batch claims the backend with its own session
    // Greedy tokens: a near-tie anywhere in a prompt ends the comparison of
    // its continuation there (its decode steps' own ties are not tracked).
    GenerateOptions g;
    g.max_new_tokens = int64_t(greedy[0]["tokens"].size()), g.stop_at_eos = false, g.state = so;
    auto r = generate_batch(*gpu_, prompts, g);
    ASSERT_TRUE(r.ok()) << r.status().message();
    int held = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      if (first_tie[p] >= 0) continue;
      const auto want = greedy[p]["tokens"].get<std::vector<int32_t>>();
      const auto gaps = greedy[p]["gaps"].get<std::vector<double>>();
      ASSERT_EQ(r->tokens[p].size(), want.size());
      // Only the first greedy token follows from positions checked above.
      if (gaps[0] >= test::kGreedyGap) EXPECT_EQ(r->tokens[p][0], want[0]) << strategy_name(strat) << " prompt " << p, ++held;
    }
    std::printf("  %s %s: first greedy token held for %d prompts\n", GetParam().c_str(), strategy_name(strat), held);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaMoeFixture,
                         ::testing::Values("nemotron_h_moe", "nemotron_h_moe_legacy_bf16", "qwen3_5_moe",
                                           "qwen3_5_moe_vl_no_shared"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

INSTANTIATE_TEST_SUITE_P(Families, CudaMoeTest,
                         ::testing::Values("nemotron_h_moe", "nemotron_h_moe_gqa16", "qwen3_5_moe",
                                           "qwen3_5_moe_vl_no_shared"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace replayssm
