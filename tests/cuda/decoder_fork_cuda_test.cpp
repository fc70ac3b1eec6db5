// Forks on the CUDA decoder: reorder() mixed with steps, ragged steps and
// speculative verifies at random, every sequence's rows against stepping its own
// token history from scratch (a fork that left the child any of its old
// state — a conv window, a log entry, a checkpoint slot, a K/V row — or
// folded into a slot another sequence still reads shows up in the logits
// after it). Then the searches built on it: beam search's hypotheses score
// what they contain, width 1 is greedy decoding, best-of-n repeats under a
// seed and scores its samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "workloads/sampler.h"
#include "decoder_test_util.h"
#include "replayssm/model.h"
#include "runtime/cuda/generate_cuda.h"
#include "runtime/cuda/search_cuda.h"

namespace replayssm {
namespace {

using cuda::DecodeStrategy;
using test::fixture;

using test::kFixtureRatio;
using test::kTrainedRatio;

struct ForkCase {
  DecodeStrategy strategy;
  int window, spec_tokens;
  int fork_groups = -1;  // DecoderOptions::fork_groups
  int replay_step = 0;   // DecoderOptions::replay_step (replay)
};

using CudaFork = test::DeviceModelTest;

// Four sequences, a 6-token prompt each, then 48 rounds of a plain step, a
// ragged step, a verify with random acceptance (where the case speculates)
// or a reorder to random parents. Window 4 folds every few tokens, so
// folds of shared checkpoints (into fresh slots) happen throughout.
TEST_P(CudaFork, ReorderedSequencesMatchSteppingTheirHistories) {
  const int64_t B = 4, V = dm_->config().vocab_size;
  const std::vector<ForkCase> cases = {{DecodeStrategy::kReplay, 4, 0, 1},
                                       {DecodeStrategy::kReplay, 8, 4},
                                       {DecodeStrategy::kReplay, 8, 4, -1, 1},
                                       {DecodeStrategy::kStandard, 16, 4},
                                       {DecodeStrategy::kRecompute, 4, 4}};
  for (const ForkCase& fc : cases) {
    SCOPED_TRACE(std::string(cuda::decode_strategy_name(fc.strategy)) + " window " + std::to_string(fc.window) +
                 " replay_step " + std::to_string(fc.replay_step));
    std::mt19937 g(23);
    std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
    cuda::DecoderOptions o;
    o.strategy = fc.strategy, o.batch = B, o.max_context = 260, o.window = fc.window, o.kv_page = 16;
    o.spec_tokens = fc.spec_tokens, o.forks = true, o.fork_groups = fc.fork_groups;
    o.replay_step = fc.strategy == DecodeStrategy::kReplay ? fc.replay_step : -1;
    auto dec = cuda::Decoder::create(*dm_, o);
    ASSERT_TRUE(dec.ok()) << dec.status().message();
    std::vector<std::vector<int32_t>> ids(static_cast<size_t>(B));
    std::vector<std::vector<std::vector<float>>> rows(static_cast<size_t>(B));
    std::vector<int32_t> next(static_cast<size_t>(B));
    for (int t = 0; t < 6;) {
      const int T = std::min((*dec)->max_chunk(), 6 - t);
      std::vector<int32_t> tok;
      for (int64_t b = 0; b < B; ++b)
        for (int i = 0; i < T; ++i) ids[size_t(b)].push_back(id(g)), tok.push_back(ids[size_t(b)].back());
      ASSERT_TRUE((*dec)->step(tok, T, next).ok());
      t += T;
    }
    for (auto& r : rows) r.resize(6);
    int forks = 0, ragged = 0;
    for (int round = 0; round < 48; ++round) {
      const int kind = int(g() % 4);
      if (kind == 3) {  // a ragged step; lengths stay under 150 of the 260 positions
        ASSERT_TRUE(test::ragged_step_at_random(**dec, g, V, 150, ids, rows));
        ++ragged;
        continue;
      }
      if (kind == 2) {  // reorder
        std::vector<int32_t> parent(static_cast<size_t>(B));
        for (auto& p : parent) p = int32_t(g() % uint32_t(B));
        ASSERT_TRUE((*dec)->reorder(parent).ok());
        const auto old_ids = ids;
        const auto old_rows = rows;
        for (int64_t b = 0; b < B; ++b) ids[size_t(b)] = old_ids[size_t(parent[size_t(b)])],
                                         rows[size_t(b)] = old_rows[size_t(parent[size_t(b)])];
        for (int64_t b = 0; b < B; ++b) EXPECT_EQ((*dec)->length(b), int64_t(ids[size_t(b)].size()));
        ++forks;
        continue;
      }
      const bool verify = kind == 1 && fc.spec_tokens > 0;
      const int T = verify ? 2 + int(g() % uint32_t(fc.spec_tokens - 1)) : 1;
      std::vector<int32_t> tok;
      for (int64_t r = 0; r < B * T; ++r) tok.push_back(id(g));
      std::vector<float> logits(size_t(B * T * V));
      std::vector<int32_t> accepted(static_cast<size_t>(B), 1), argmax(size_t(B * T));
      if (verify) {
        ASSERT_TRUE((*dec)->verify(tok, T, argmax, logits.data()).ok());
        for (auto& a : accepted) a = int32_t(g() % uint32_t(T + 1));
        ASSERT_TRUE((*dec)->accept(accepted).ok());
      } else {
        ASSERT_TRUE((*dec)->step(tok, 1, next, logits.data()).ok());
      }
      for (int64_t b = 0; b < B; ++b)
        for (int j = 0; j < accepted[size_t(b)]; ++j) {
          const int64_t r = b * T + j;
          ids[size_t(b)].push_back(tok[size_t(r)]);
          rows[size_t(b)].emplace_back(logits.begin() + r * V, logits.begin() + (r + 1) * V);
        }
    }
    EXPECT_GT(forks, 8);
    EXPECT_GT(ragged, 5);
    // Children of one parent read its checkpoint: with fork groups forced,
    // their plain steps decode as groups (Mamba2 or GDN layers); where it
    // would not pay (4 sequences of few heads), not by default.
    if (fc.strategy == DecodeStrategy::kReplay)
      EXPECT_EQ((*dec)->checkpoint_reads_shared() > 0, fc.fork_groups == 1);
    const test::SteppedCheck r = test::check_against_stepping(*dm_, ids, rows, 6, 0.5);
    std::printf(
        "  %s %s W=%d spec %d: %d reorders, %d ragged steps, %lld checkpoint reads shared, %lld rows, worst ratio vs "
        "stepping %.3f, argmax differs at %lld "
        "(%lld of %lld with a top-2 gap >= 0.5); state peak %lld bytes, written %lld\n",
        GetParam().c_str(), test::layout_name(fc.strategy, fc.replay_step).c_str(), fc.window, fc.spec_tokens, forks,
        ragged, (long long)(*dec)->checkpoint_reads_shared(), (long long)r.rows, r.worst, (long long)r.flips,
        (long long)r.clear_flips, (long long)r.clear, (long long)(*dec)->state_bytes_peak(),
        (long long)(*dec)->state_bytes_written());
    EXPECT_LE(r.worst, trained() ? kTrainedRatio : kFixtureRatio);
    EXPECT_EQ(r.clear_flips, 0);
  }
}

// Σ log p(token) of `tokens` after `prompt`, by stepping from scratch.
double teacher_forced_logprob(const cuda::DeviceModel& dm, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& tokens) {
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), tokens.begin(), tokens.end());
  const auto rows = test::stepped(dm, ids);
  double lp = 0.0;
  for (size_t i = 0; i < tokens.size(); ++i) lp += ops::cpu::log_prob(rows[prompt.size() + i - 1], tokens[i]);
  return lp;
}

std::vector<int32_t> test_prompt(int64_t V) {
  std::vector<int32_t> p;
  for (int i = 0; i < 12; ++i) p.push_back(int32_t((i * 7919 + 13) % V));
  return p;
}

TEST_P(CudaFork, BeamHypothesesScoreWhatTheyContainAndWidthOneIsGreedy) {
  const int64_t V = dm_->config().vocab_size;
  const std::vector<int32_t> prompt = test_prompt(V);
  for (const ForkCase& fc : {ForkCase{DecodeStrategy::kReplay, 4, 0}, ForkCase{DecodeStrategy::kReplay, 16, 0},
                             ForkCase{DecodeStrategy::kStandard, 16, 0}, ForkCase{DecodeStrategy::kRecompute, 4, 0}}) {
    SCOPED_TRACE(std::string(cuda::decode_strategy_name(fc.strategy)) + " window " + std::to_string(fc.window));
    cuda::CudaSearchOptions c{fc.strategy, fc.window, true};
    BeamOptions o;
    o.width = 4, o.max_new_tokens = 20, o.stop_at_eos = false;
    SearchStats stats;
    auto hyps = cuda::beam_search_cuda(*dm_, prompt, o, c, &stats);
    ASSERT_TRUE(hyps.ok()) << hyps.status().message();
    ASSERT_EQ(hyps->size(), 4u);
    std::set<std::vector<int32_t>> distinct;
    double worst = 0.0;
    for (size_t i = 0; i < hyps->size(); ++i) {
      const Hypothesis& h = (*hyps)[i];
      EXPECT_EQ(h.tokens.size(), 20u);
      distinct.insert(h.tokens);
      if (i > 0) EXPECT_GE((*hyps)[i - 1].score, h.score);
      worst = std::max(worst, std::abs(h.logprob - teacher_forced_logprob(*dm_, prompt, h.tokens)));
    }
    EXPECT_EQ(distinct.size(), 4u);
    std::printf("  %s %s W=%d beam 4 x 20: best score %.4f, worst |logprob - teacher-forced| %.4f, state peak %lld "
                "bytes, written %lld\n",
                GetParam().c_str(), cuda::decode_strategy_name(fc.strategy), fc.window, (*hyps)[0].score, worst,
                (long long)stats.state.state_bytes_peak, (long long)stats.state.state_writes_bytes);
    // Each token's log-probability within bf16 noise of stepping's.
    EXPECT_LT(worst, (trained() ? 0.02 : 0.1) * 20);
    // Width 1 is greedy decoding on the same kernels.
    o.width = 1;
    auto one = cuda::beam_search_cuda(*dm_, prompt, o, c);
    ASSERT_TRUE(one.ok()) << one.status().message();
    cuda::CudaGenerateOptions go;
    go.max_new_tokens = 20, go.stop_at_eos = false, go.strategy = fc.strategy, go.window = fc.window;
    auto greedy = cuda::generate_batch_cuda(*dm_, std::vector<std::vector<int32_t>>{prompt}, go);
    ASSERT_TRUE(greedy.ok()) << greedy.status().message();
    EXPECT_EQ((*one)[0].tokens, greedy->tokens[0]);
  }
}

TEST_P(CudaFork, BestOfNRepeatsUnderASeedAndScoresItsSamples) {
  const int64_t V = dm_->config().vocab_size;
  const std::vector<int32_t> prompt = test_prompt(V);
  for (DecodeStrategy s : {DecodeStrategy::kReplay, DecodeStrategy::kStandard, DecodeStrategy::kRecompute}) {
    cuda::CudaSearchOptions c{s, 4, true};
    BestOfNOptions o;
    o.n = 5, o.max_new_tokens = 16, o.stop_at_eos = false, o.sampling.temperature = 1.0f, o.sampling.seed = 9;
    auto a = cuda::best_of_n_cuda(*dm_, prompt, o, c);
    auto b = cuda::best_of_n_cuda(*dm_, prompt, o, c);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), 5u);
    std::set<std::vector<int32_t>> distinct;
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens);
      distinct.insert((*a)[i].tokens);
      EXPECT_NEAR((*a)[i].logprob, teacher_forced_logprob(*dm_, prompt, (*a)[i].tokens), trained() ? 0.3 : 1.6);
      EXPECT_NEAR((*a)[i].score, (*a)[i].logprob / 16.0, 1e-9);
    }
    EXPECT_GT(distinct.size(), 1u) << "independent seeds";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaFork,
                         ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny", "models/nemotron_h_small",
                                           "models/qwen3_5_small"),
                         test::model_param_name);

TEST(CudaForkArgs, ReorderIsRefusedWithoutForksOrWithBadParents) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto m = Model::load(fixture("nemotron_h_tiny"));
  ASSERT_TRUE(m.ok());
  auto dm = cuda::DeviceModel::create(**m);
  ASSERT_TRUE(dm.ok());
  cuda::DecoderOptions o;
  o.batch = 2, o.max_context = 8;
  auto plain = cuda::Decoder::create(**dm, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->reorder(std::vector<int32_t>{0, 0}).ok()) << "no forks";
  o.forks = true;
  auto dec = cuda::Decoder::create(**dm, o);
  ASSERT_TRUE(dec.ok());
  EXPECT_FALSE((*dec)->reorder(std::vector<int32_t>{0}).ok()) << "one parent for two sequences";
  EXPECT_FALSE((*dec)->reorder(std::vector<int32_t>{0, 2}).ok()) << "parent out of range";
  EXPECT_FALSE((*dec)->reorder(std::vector<int32_t>{-1, 0}).ok()) << "negative parent";
  EXPECT_TRUE((*dec)->reorder(std::vector<int32_t>{1, 1}).ok());
  EXPECT_FALSE(cuda::beam_search_cuda(**dec, std::vector<int32_t>{1, 2}, BeamOptions{3}).ok()) << "batch 2, width 3";
}

}  // namespace
}  // namespace replayssm
