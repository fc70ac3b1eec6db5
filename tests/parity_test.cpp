// Parity with transformers: every fixture model (tools/make_fixtures.py),
// every prompt, through the prefill path, the token-by-token decode path,
// greedy generation, and batched steps mixing sequences.
#include <gtest/gtest.h>

#include <cmath>

#include "workloads/generate.h"
#include "replayssm/model.h"
#include "backend/cpu/dense_cache.h"
#include "oracle_bounds.h"
#include "test_util.h"

namespace replayssm {
namespace {

using test::data_dir;
using test::read_json;

class Parity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = Model::load(data_dir(GetParam()));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
    expected_ = read_json(data_dir(GetParam()) + "/expected.json");
    ASSERT_EQ(expected_["prompts"].size(), 4u);
  }
  std::vector<int32_t> prompt(size_t i) const {
    return expected_["prompts"][i].get<std::vector<int32_t>>();
  }
  int64_t V() const { return model_->config().vocab_size; }

  std::unique_ptr<Model> model_;
  nlohmann::json expected_;
};

TEST_P(Parity, PrefillLogitsMatchTransformers) {
  for (size_t p = 0; p < expected_["prompts"].size(); ++p) {
    const std::vector<int32_t> ids = prompt(p);
    const int64_t n = static_cast<int64_t>(ids.size());
    DenseCache cache(cache_spec(model_->config()));
    SeqSlice s{cache.add_sequence(), 0, n, 0};
    std::vector<int64_t> rows(n);
    for (int64_t i = 0; i < n; ++i) rows[i] = i;
    std::vector<float> logits(n * V());
    ASSERT_TRUE(model_->forward({&s, 1}, ids, cache, rows, logits.data()).ok());
    EXPECT_LE(test::worst_oracle_ratio(logits, expected_["prefill_logits"][p]), 1.0) << "prompt length " << n;
  }
}

TEST_P(Parity, DecodeLogitsMatchTransformers) {
  for (size_t p = 0; p < expected_["prompts"].size(); ++p) {
    const std::vector<int32_t> ids = prompt(p);
    const int64_t n = static_cast<int64_t>(ids.size());
    DenseCache cache(cache_spec(model_->config()));
    const int64_t seq = cache.add_sequence();
    std::vector<float> logits(n * V());
    for (int64_t t = 0; t < n; ++t) {
      SeqSlice s{seq, t, 1, 0};
      const int64_t row = 0;
      ASSERT_TRUE(model_->forward({&s, 1}, {&ids[t], 1}, cache, {&row, 1}, logits.data() + t * V()).ok());
    }
    EXPECT_EQ(cache.length(seq), n);
    EXPECT_LE(test::worst_oracle_ratio(logits, expected_["decode_logits"][p]), 1.0) << "prompt length " << n;
  }
}

TEST_P(Parity, GreedyTokensMatchTransformers) {
  int compared = 0;
  for (size_t p = 0; p < expected_["prompts"].size(); ++p) {
    GenerateOptions opt;
    opt.max_new_tokens = 12;
    opt.stop_at_eos = false;
    auto backend = test::cpu_backend(*model_);
    auto r = generate(*backend, prompt(p), opt);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto& want = expected_["greedy"][p]["tokens"];
    const auto& gaps = expected_["greedy"][p]["gaps"];
    ASSERT_EQ(r->tokens.size(), want.size());
    // Once a step's top-2 gap is within rounding, later tokens may diverge.
    for (size_t i = 0; i < want.size() && gaps[i].get<double>() > test::kOracleMinGap; ++i, ++compared)
      ASSERT_EQ(r->tokens[i], want[i].get<int32_t>()) << "prompt " << p << " step " << i;
  }
  EXPECT_GE(compared, 24) << "too few greedy steps had a clear top-1 to compare";
}

// All prompts in one prefill step (varlen rows), then one decode step for
// every sequence at once: batching must not change any sequence's result.
TEST_P(Parity, BatchedStepsMatchSingleSequence) {
  const size_t n_seq = expected_["prompts"].size();
  DenseCache cache(cache_spec(model_->config()));
  std::vector<SeqSlice> step;
  std::vector<int32_t> tokens;
  std::vector<int64_t> rows;
  for (size_t p = 0; p < n_seq; ++p) {
    const std::vector<int32_t> ids = prompt(p);
    step.push_back({cache.add_sequence(), 0, static_cast<int64_t>(ids.size()),
                    static_cast<int64_t>(tokens.size())});
    for (size_t i = 0; i < ids.size(); ++i) rows.push_back(static_cast<int64_t>(tokens.size() + i));
    tokens.insert(tokens.end(), ids.begin(), ids.end());
  }
  std::vector<float> logits(rows.size() * V());
  ASSERT_TRUE(model_->forward(step, tokens, cache, rows, logits.data()).ok());
  for (size_t p = 0; p < n_seq; ++p) {
    std::vector<float> mine(logits.begin() + step[p].row * V(),
                            logits.begin() + (step[p].row + step[p].n) * V());
    EXPECT_LE(test::worst_oracle_ratio(mine, expected_["prefill_logits"][p]), 1.0) << "prompt " << p;
  }
  // Decode: feed each sequence its first greedy token; the next greedy token
  // must follow where transformers' choice was clear.
  std::vector<SeqSlice> dstep;
  std::vector<int32_t> dtok;
  std::vector<int64_t> drows;
  for (size_t p = 0; p < n_seq; ++p) {
    dstep.push_back({step[p].seq, step[p].n, 1, static_cast<int64_t>(p)});
    dtok.push_back(expected_["greedy"][p]["tokens"][0].get<int32_t>());
    drows.push_back(static_cast<int64_t>(p));
  }
  std::vector<float> dlog(n_seq * V());
  ASSERT_TRUE(model_->forward(dstep, dtok, cache, drows, dlog.data()).ok());
  for (size_t p = 0; p < n_seq; ++p) {
    const auto& g = expected_["greedy"][p];
    if (g["gaps"][0].get<double>() <= test::kOracleMinGap || g["gaps"][1].get<double>() <= test::kOracleMinGap) continue;
    const float* row = dlog.data() + p * V();
    EXPECT_EQ(std::max_element(row, row + V()) - row, g["tokens"][1].get<int32_t>()) << "prompt " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity, ::testing::ValuesIn(test::fixture_models()));

}  // namespace
}  // namespace replayssm
