// Tiny mixture-of-experts models of both families (NemotronH with `E`
// layers; Qwen3.5-MoE as a causal LM, as the text model of its
// vision-language form, and without a shared expert), written in the test
// (moe_test_util.h). Their checkpoints load to the same model whether the
// experts are stored fused or one per expert, in fp32 or bf16; a missing
// expert tensor is named in both forms; and every strategy decodes them to
// the tokens and logits of a full prefill, alone, with n-gram speculation
// and batched in the engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/dense_cache.h"
#include "moe_test_util.h"
#include "replayssm/engine.h"
#include "replayssm/model.h"
#include "test_util.h"
#include "workloads/generate.h"
#include "workloads/session.h"

namespace replayssm {
namespace {

using test::TempDir;

using Family = test::MoeFamily;

std::vector<Family> families() { return test::moe_families(/*with_vl=*/true); }

std::unique_ptr<Model> load(const TempDir& dir) {
  auto m = Model::load(dir.path());
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Logits of every position of `tokens`, in one prefill step.
std::vector<float> prefill_logits(const Model& m, const std::vector<int32_t>& tokens) {
  DenseCache cache(cache_spec(m.config()));
  const int64_t n = static_cast<int64_t>(tokens.size());
  SeqSlice s{cache.add_sequence(), 0, n, 0};
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[size_t(i)] = i;
  std::vector<float> logits(static_cast<size_t>(n * m.config().vocab_size));
  EXPECT_TRUE(m.forward({&s, 1}, tokens, cache, rows, logits.data()).ok());
  return logits;
}

const std::vector<int32_t> kPrompt = {3, 17, 4, 40, 22, 9, 31, 5, 12};

TEST(MoeModel, ExpertFormsAndDtypesLoadToTheSameModel) {
  for (const Family& f : families()) {
    for (bool bf16 : {false, true}) {
      TempDir fused, split;
      test::write_moe_checkpoint(fused.path(), f.config, /*per_expert=*/false, bf16);
      test::write_moe_checkpoint(split.path(), f.config, /*per_expert=*/true, bf16);
      auto a = load(fused), b = load(split);
      ASSERT_TRUE(a && b) << f.name;
      EXPECT_GT(a->config().count(BlockKind::kMoe), 0) << f.name;
      const std::vector<float> la = prefill_logits(*a, kPrompt), lb = prefill_logits(*b, kPrompt);
      ASSERT_EQ(la, lb) << f.name << (bf16 ? " bf16" : " fp32");
      for (float v : la) ASSERT_TRUE(std::isfinite(v)) << f.name;
    }
  }
}

TEST(MoeModel, AMissingExpertTensorIsNamed) {
  // Fused form without its down stack: both forms' names in the message.
  TempDir fused;
  test::write_moe_checkpoint(fused.path(), test::nemotron_moe_config(), false, false,
                             {"backbone.layers.1.mixer.experts.down_proj"});
  auto m = Model::load(fused.path());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'backbone.layers.1.mixer.experts.down_proj'"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("'backbone.layers.1.mixer.experts.0.down_proj.weight'"), std::string::npos)
      << m.status().message();
  // Per-expert form missing one expert's part: that tensor is named.
  TempDir split;
  test::write_moe_checkpoint(split.path(), test::qwen_moe_config(false), true, false,
                             {"model.layers.2.mlp.experts.5.up_proj.weight"});
  m = Model::load(split.path());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("model.layers.2.mlp.experts.5.up_proj.weight"), std::string::npos)
      << m.status().message();
}

// The strategies of the conformance suite (conformance_test.cpp), with a
// page size the backend takes.
std::vector<std::pair<std::string, StateOptions>> strategies(const Backend& b) {
  auto make = [&](Strategy s, int64_t w, bool exact, int64_t k, int64_t page) {
    StateOptions o;
    o.strategy = s, o.window = w, o.exact = exact, o.checkpoint_interval = k, o.page_size = page;
    if (!b.check_options(o).ok()) o.page_size = 2;
    return o;
  };
  return {{"replay_exact", make(Strategy::kReplay, 4, true, 0, 4)},
          {"replay_fast_k8", make(Strategy::kReplay, 8, false, 8, 3)},
          {"snapshot", make(Strategy::kSnapshot, 8, false, 0, 4)},
          {"recompute", make(Strategy::kRecompute, 8, false, 8, 4)}};
}

constexpr double kTol = 1e-4;     // |Δ| ≤ kTol·(1 + |ref|), the parity tests' bound
constexpr double kMinGap = 2e-3;  // greedy steps closer than this depend on rounding
constexpr int kNew = 12;

TEST(MoeModel, EveryStrategyDecodesAsAFullPrefill) {
  for (const Family& f : families()) {
    TempDir dir;
    test::write_moe_checkpoint(dir.path(), f.config, false, false);
    auto model = load(dir);
    ASSERT_TRUE(model) << f.name;
    const int64_t V = model->config().vocab_size;

    // The reference: greedy by a full prefill of the whole sequence each step.
    std::vector<int32_t> seq = kPrompt, want;
    std::vector<double> gaps;
    std::vector<std::vector<float>> want_rows;
    for (int i = 0; i < kNew; ++i) {
      const std::vector<float> all = prefill_logits(*model, seq);
      std::vector<float> row(all.end() - V, all.end());
      std::vector<float> sorted = row;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      want.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
      gaps.push_back(sorted[0] - sorted[1]);
      want_rows.push_back(std::move(row));
      seq.push_back(want.back());
    }
    int clear = 0;
    while (clear < kNew && gaps[size_t(clear)] > kMinGap) ++clear;
    ASSERT_GE(clear, 6) << f.name << ": too few clear greedy steps to compare";

    auto backend = test::cpu_backend(*model);
    std::vector<int32_t> first;
    for (const auto& [name, so] : strategies(*backend)) {
      const std::string what = f.name + " " + name;
      GenerateOptions g;
      g.max_new_tokens = kNew;
      g.stop_at_eos = false;
      g.state = so;
      auto got = generate(*backend, kPrompt, g);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().message();
      for (int i = 0; i < clear; ++i) EXPECT_EQ(got->tokens[size_t(i)], want[size_t(i)]) << what << " step " << i;
      if (first.empty()) first = got->tokens;
      EXPECT_EQ(got->tokens, first) << what << ": strategies disagree";

      // Speculation: drafts rolled back and re-verified give the same tokens.
      GenerateOptions sp = g;
      sp.spec.kind = SpecOptions::kNgram;
      sp.spec.tokens = 3;
      auto spec = generate(*backend, kPrompt, sp);
      ASSERT_TRUE(spec.ok()) << what << ": " << spec.status().message();
      EXPECT_EQ(spec->tokens, got->tokens) << what << " with n-gram speculation";

      // Teacher-forced steps: every step's logits within the parity bound.
      auto s = Session::create(*backend, so);
      ASSERT_TRUE(s.ok()) << what << ": " << s.status().message();
      const int64_t id = (*s)->state().add_sequence();
      std::vector<float> row;
      StepInput in{id, kPrompt};
      for (int i = 0; i < kNew; ++i) {
        ASSERT_TRUE((*s)->step({&in, 1}, &row).ok()) << what;
        double worst = 0.0;
        for (int64_t v = 0; v < V; ++v) {
          const double r = want_rows[size_t(i)][size_t(v)];
          worst = std::max(worst, std::abs(row[size_t(v)] - r) / (kTol * (1.0 + std::abs(r))));
        }
        EXPECT_LE(worst, 1.0) << what << " step " << i;
        in = StepInput{id, {&want[size_t(i)], 1}};
      }
    }

    // Batched in the engine: each request's tokens are the ones it gets alone.
    EngineOptions eo;
    eo.state = strategies(*backend)[0].second;
    eo.max_batch_tokens = 16;
    eo.prefill_chunk = 5;
    const std::vector<std::vector<int32_t>> prompts = {kPrompt, {8, 8, 1, 30}, {2, 19, 44, 7, 7, 13, 1}};
    std::vector<std::vector<int32_t>> outputs;
    {
      auto e = Engine::create(*backend, eo);
      ASSERT_TRUE(e.ok()) << e.status().message();
      std::vector<int64_t> ids;
      for (const auto& p : prompts) {
        RequestParams rp;
        rp.prompt = p;
        rp.max_new_tokens = 6;
        rp.stop_at_eos = false;
        ids.push_back(*(*e)->submit(rp));
      }
      ASSERT_TRUE((*e)->run().ok()) << f.name;
      for (int64_t id : ids) outputs.push_back(*(*e)->output(id));
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerateOptions g;
      g.max_new_tokens = 6;
      g.stop_at_eos = false;
      g.state = eo.state;
      auto alone = generate(*backend, prompts[i], g);
      ASSERT_TRUE(alone.ok());
      EXPECT_EQ(outputs[i], alone->tokens) << f.name << " request " << i;
    }
  }
}

}  // namespace
}  // namespace replayssm
