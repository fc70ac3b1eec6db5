// Parity with transformers on the mixture-of-experts fixtures
// (tools/make_moe_fixtures.py): prefill and token-by-token decode logits,
// greedy tokens, a batched step mixing every prompt, and transformers'
// greedy tokens from generate and n-gram speculation under every strategy.
// The fixtures are tie-free at every routing cutoff (their expected.json's
// router_margin), so the CPU must choose transformers' experts everywhere
// and the dense fixtures' bounds (parity_test.cpp) hold unchanged.
//
// The fixtures are made on the GPU machine; where a fixture's files are
// absent its tests skip, naming the files and the command that makes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "backend/cpu/dense_cache.h"
#include "io/safetensors.h"
#include "replayssm/model.h"
#include "oracle_bounds.h"
#include "test_util.h"
#include "workloads/generate.h"

namespace replayssm {
namespace {

constexpr double kTieMargin = 1e-5;  // tools/make_moe_fixtures.py TIE_MARGIN

// What tools/make_moe_fixtures.py writes for each fixture.
const char* const kFiles[] = {"config.json", "model.safetensors", "expected.json"};

std::vector<std::string> moe_fixtures() {
  return {"nemotron_h_moe", "nemotron_h_moe_legacy_bf16", "qwen3_5_moe", "qwen3_5_moe_vl_no_shared"};
}

// The files of `name` that are missing, space-separated; empty when complete.
std::string missing_files(const std::string& name) {
  std::string missing;
  for (const char* f : kFiles)
    if (!std::filesystem::is_regular_file(test::data_dir(name) + "/" + f))
      missing += (missing.empty() ? "" : " ") + test::data_dir(name) + "/" + f;
  return missing;
}


class MoeParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // The fixtures are committed: a missing file is a failure, not a skip.
    const std::string missing = missing_files(GetParam());
    ASSERT_TRUE(missing.empty()) << "MoE fixture '" << GetParam() << "' is missing " << missing
                                 << " (made on a machine with torch and transformers 5.17: "
                                    "python3 tools/make_moe_fixtures.py tests/data)";
    auto m = Model::load(test::data_dir(GetParam()));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
    expected_ = test::read_json(test::data_dir(GetParam()) + "/expected.json");
    ASSERT_EQ(expected_["prompts"].size(), 4u);
  }
  std::vector<int32_t> prompt(size_t i) const { return expected_["prompts"][i].get<std::vector<int32_t>>(); }
  int64_t V() const { return model_->config().vocab_size; }

  std::unique_ptr<Model> model_;
  nlohmann::json expected_;
};

// The fixture is what the script says it is: MoE blocks, its experts stored
// in the form it names, and every routing decision clear of its cutoff.
TEST_P(MoeParity, FixtureIsTieFreeAndInItsExpertForm) {
  EXPECT_GT(model_->config().count(BlockKind::kMoe), 0);
  ASSERT_TRUE(expected_.contains("router_margin") && expected_.contains("expert_form"));
  EXPECT_GT(expected_["router_margin"].get<double>(), kTieMargin);
  auto ck = Checkpoint::open_dir(test::data_dir(GetParam()));
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  const std::string form = expected_["expert_form"].get<std::string>();
  ASSERT_TRUE(form == "fused" || form == "per_expert") << form;
  for (const TensorSpec& t : expected_tensors(model_->config())) {
    if (t.expert_parts.empty()) continue;
    EXPECT_EQ(ck->find(t.name) != nullptr, form == "fused") << t.name;
    EXPECT_EQ(ck->find(t.expert_prefix + "0" + t.expert_parts[0]) != nullptr, form == "per_expert") << t.name;
  }
}

TEST_P(MoeParity, PrefillLogitsMatchTransformers) {
  for (size_t p = 0; p < expected_["prompts"].size(); ++p) {
    const std::vector<int32_t> ids = prompt(p);
    const int64_t n = static_cast<int64_t>(ids.size());
    DenseCache cache(cache_spec(model_->config()));
    SeqSlice s{cache.add_sequence(), 0, n, 0};
    std::vector<int64_t> rows(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rows[size_t(i)] = i;
    std::vector<float> logits(static_cast<size_t>(n * V()));
    ASSERT_TRUE(model_->forward({&s, 1}, ids, cache, rows, logits.data()).ok());
    EXPECT_LE(test::worst_oracle_ratio(logits, expected_["prefill_logits"][p]), 1.0) << "prompt length " << n;
  }
}

TEST_P(MoeParity, DecodeLogitsMatchTransformers) {
  for (size_t p = 0; p < expected_["prompts"].size(); ++p) {
    const std::vector<int32_t> ids = prompt(p);
    const int64_t n = static_cast<int64_t>(ids.size());
    DenseCache cache(cache_spec(model_->config()));
    const int64_t seq = cache.add_sequence();
    std::vector<float> logits(static_cast<size_t>(n * V()));
    for (int64_t t = 0; t < n; ++t) {
      SeqSlice s{seq, t, 1, 0};
      const int64_t row = 0;
      ASSERT_TRUE(model_->forward({&s, 1}, {&ids[size_t(t)], 1}, cache, {&row, 1}, logits.data() + t * V()).ok());
    }
    EXPECT_LE(test::worst_oracle_ratio(logits, expected_["decode_logits"][p]), 1.0) << "prompt length " << n;
  }
}

// Every prompt in one prefill step: the rows of one step are routed alike
// whatever shares it.
TEST_P(MoeParity, BatchedPrefillMatchesTransformers) {
  DenseCache cache(cache_spec(model_->config()));
  std::vector<SeqSlice> step;
  std::vector<int32_t> tokens;
  std::vector<int64_t> rows;
  for (size_t p = 0; p < expected_["prompts"].size(); ++p) {
    const std::vector<int32_t> ids = prompt(p);
    step.push_back({cache.add_sequence(), 0, static_cast<int64_t>(ids.size()), static_cast<int64_t>(tokens.size())});
    for (size_t i = 0; i < ids.size(); ++i) rows.push_back(static_cast<int64_t>(tokens.size() + i));
    tokens.insert(tokens.end(), ids.begin(), ids.end());
  }
  std::vector<float> logits(rows.size() * static_cast<size_t>(V()));
  ASSERT_TRUE(model_->forward(step, tokens, cache, rows, logits.data()).ok());
  for (size_t p = 0; p < step.size(); ++p) {
    std::vector<float> mine(logits.begin() + step[p].row * V(), logits.begin() + (step[p].row + step[p].n) * V());
    EXPECT_LE(test::worst_oracle_ratio(mine, expected_["prefill_logits"][p]), 1.0) << "prompt " << p;
  }
}

// transformers' greedy tokens, where its top-2 gaps are clear, from plain
// decoding and from n-gram speculation under every strategy.
TEST_P(MoeParity, GreedyTokensMatchTransformersUnderEveryStrategy) {
  auto backend = test::cpu_backend(*model_);
  auto make = [&](Strategy s, int64_t w, bool exact, int64_t k, int64_t page) {
    StateOptions o;
    o.strategy = s, o.window = w, o.exact = exact, o.checkpoint_interval = k, o.page_size = page;
    return o;
  };
  const std::vector<std::pair<std::string, StateOptions>> strategies = {
      {"replay_exact", make(Strategy::kReplay, 4, true, 0, 4)},
      {"replay_fast_k8", make(Strategy::kReplay, 8, false, 8, 3)},
      {"snapshot", make(Strategy::kSnapshot, 8, false, 0, 4)},
      {"recompute", make(Strategy::kRecompute, 8, false, 8, 4)}};
  int compared = 0;
  for (const auto& [name, so] : strategies) {
    for (size_t p = 0; p < expected_["prompts"].size(); ++p) {
      const auto& want = expected_["greedy"][p]["tokens"];
      const auto& gaps = expected_["greedy"][p]["gaps"];
      for (bool spec : {false, true}) {
        GenerateOptions g;
        g.max_new_tokens = static_cast<int64_t>(want.size());
        g.stop_at_eos = false;
        g.state = so;
        if (spec) {
          g.spec.kind = SpecOptions::kNgram;
          g.spec.tokens = 3;
        }
        auto r = generate(*backend, prompt(p), g);
        ASSERT_TRUE(r.ok()) << name << ": " << r.status().message();
        ASSERT_EQ(r->tokens.size(), want.size());
        // Once a step's top-2 gap is within rounding, later tokens may diverge.
        for (size_t i = 0; i < want.size() && gaps[i].get<double>() > test::kOracleMinGap; ++i, ++compared)
          ASSERT_EQ(r->tokens[i], want[i].get<int32_t>())
              << name << (spec ? " with n-gram speculation" : "") << ", prompt " << p << " step " << i;
      }
    }
  }
  EXPECT_GE(compared, 4 * 2 * 24) << "too few greedy steps had a clear top-1 to compare";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeParity, ::testing::ValuesIn(moe_fixtures()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace replayssm
