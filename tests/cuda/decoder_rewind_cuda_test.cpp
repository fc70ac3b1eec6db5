// Going back on the CUDA decoder (options.rewind): rewind() to random
// positions between each sequence's checkpoint and its end, mixed at random
// with steps of one token or a chunk, ragged steps (each sequence its own
// count, none to dozens, through the chunk scans), speculative verifies
// with random acceptance and reorders, every sequence's rows against
// stepping its own token history from scratch — exact replay too. A
// rewound conv window that missed a row or kept a dropped one, a
// checkpoint window not rolled at a fold, a pre-conv row not moved with its
// entry or not copied by a fork: each shows up in the logits after it.
// Then the refusals: positions before the checkpoint or past the end, the
// standard layout, a verify awaiting accept().
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "decoder_test_util.h"
#include "replayssm/model.h"

namespace replayssm {
namespace {

using cuda::DecodeStrategy;

using test::kFixtureRatio;
using test::kTrainedRatio;

struct RewindCase {
  DecodeStrategy strategy;
  int window, spec_tokens;
  bool forks;
  bool exact = false;
};

using CudaRewind = test::DeviceModelTest;

TEST_P(CudaRewind, RewoundSequencesMatchSteppingTheirHistories) {
  const int64_t B = 3, V = dm_->config().vocab_size;
  // Recompute goes back to its sparse checkpoint (every W tokens; none
  // after a fork: from the empty state) and re-runs the tokens since.
  for (const RewindCase& rc : {RewindCase{DecodeStrategy::kReplay, 4, 0, true}, RewindCase{DecodeStrategy::kReplay, 8, 4, true},
                               RewindCase{DecodeStrategy::kReplay, 16, 0, false},
                               RewindCase{DecodeStrategy::kReplay, 8, 4, true, true},
                               RewindCase{DecodeStrategy::kRecompute, 4, 4, true},
                               RewindCase{DecodeStrategy::kRecompute, 16, 0, false}}) {
    SCOPED_TRACE(std::string(cuda::decode_strategy_name(rc.strategy)) + (rc.exact ? " exact" : "") + " window " +
                 std::to_string(rc.window) + " spec " + std::to_string(rc.spec_tokens));
    std::mt19937 g(31);
    std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
    cuda::DecoderOptions o;
    o.strategy = rc.strategy, o.batch = B, o.max_context = 400, o.window = rc.window, o.kv_page = 16;
    o.spec_tokens = rc.spec_tokens, o.forks = rc.forks, o.rewind = rc.strategy == DecodeStrategy::kReplay;
    o.exact = rc.exact;
    auto dec = cuda::Decoder::create(*dm_, o);
    ASSERT_TRUE(dec.ok()) << dec.status().message();
    std::vector<std::vector<int32_t>> ids(static_cast<size_t>(B));
    std::vector<std::vector<std::vector<float>>> rows(static_cast<size_t>(B));
    std::vector<int32_t> next(static_cast<size_t>(B));
    const int prompt = 5;
    for (int64_t b = 0; b < B; ++b)
      for (int i = 0; i < prompt; ++i) ids[size_t(b)].push_back(id(g));
    for (int t = 0; t < prompt; ++t) {
      std::vector<int32_t> one;
      for (int64_t b = 0; b < B; ++b) one.push_back(ids[size_t(b)][size_t(t)]);
      ASSERT_TRUE((*dec)->step(one, next).ok());
    }
    for (auto& r : rows) r.resize(prompt);
    int rewinds = 0, moved = 0, deepest = 0, ragged = 0;
    for (int round = 0; round < 80; ++round) {
      const int kind = int(g() % 5);
      if (kind == 0) {  // rewind each sequence to a random position from its checkpoint on
        std::vector<int64_t> len(static_cast<size_t>(B));
        for (int64_t b = 0; b < B; ++b) {
          // At most max(8, W − 1) back, so rows keep accumulating (recompute's
          // floor after a fork is position 0).
          const int64_t hi = (*dec)->length(b);
          const int64_t lo = std::max<int64_t>({(*dec)->rewind_floor(b), prompt, hi - std::max(8, rc.window - 1)});
          len[size_t(b)] = lo >= hi ? hi : lo + int64_t(g() % uint32_t(hi - lo + 1));
          moved += len[size_t(b)] != hi, deepest = std::max(deepest, int(hi - len[size_t(b)]));
        }
        ASSERT_TRUE((*dec)->rewind(len).ok());
        for (int64_t b = 0; b < B; ++b) {
          ids[size_t(b)].resize(size_t(len[size_t(b)])), rows[size_t(b)].resize(size_t(len[size_t(b)]));
          EXPECT_EQ((*dec)->length(b), len[size_t(b)]);
        }
        ++rewinds;
        continue;
      }
      if (kind == 3 && rc.forks) {  // reorder
        std::vector<int32_t> parent(static_cast<size_t>(B));
        for (auto& p : parent) p = int32_t(g() % uint32_t(B));
        ASSERT_TRUE((*dec)->reorder(parent).ok());
        const auto old_ids = ids;
        const auto old_rows = rows;
        for (int64_t b = 0; b < B; ++b)
          ids[size_t(b)] = old_ids[size_t(parent[size_t(b)])], rows[size_t(b)] = old_rows[size_t(parent[size_t(b)])];
        continue;
      }
      if (kind == 4) {  // a ragged step; lengths stay under 250 of the 400 positions
        ASSERT_TRUE(test::ragged_step_at_random(**dec, g, V, 250, ids, rows));
        ++ragged;
        continue;
      }
      const bool verify = kind == 2 && rc.spec_tokens > 0;
      // A step of one token, or of a chunk as long as the logs allow.
      const int T = verify ? 2 + int(g() % uint32_t(rc.spec_tokens - 1))
                           : kind == 2 ? 1 + int(g() % uint32_t(std::min((*dec)->max_chunk(), 4))) : 1;
      std::vector<int32_t> tok;
      for (int64_t r = 0; r < B * T; ++r) tok.push_back(id(g));
      std::vector<float> logits(size_t(B * T * V));
      std::vector<int32_t> accepted(static_cast<size_t>(B), T), argmax(size_t(B * T));
      if (verify) {
        ASSERT_TRUE((*dec)->verify(tok, T, argmax, logits.data()).ok());
        for (auto& a : accepted) a = int32_t(g() % uint32_t(T + 1));
        ASSERT_TRUE((*dec)->accept(accepted).ok());
      } else if (T == 1) {
        ASSERT_TRUE((*dec)->step(tok, 1, next, logits.data()).ok());
      } else {  // a chunk returns each sequence's last row only; the rows before it are not checked
        ASSERT_TRUE((*dec)->step(tok, T, next, logits.data()).ok());
      }
      for (int64_t b = 0; b < B; ++b)
        for (int j = 0; j < accepted[size_t(b)]; ++j) {
          const int64_t r = verify ? b * T + j : b;
          ids[size_t(b)].push_back(tok[size_t(b * T + j)]);
          rows[size_t(b)].emplace_back(logits.begin() + r * V, logits.begin() + (r + 1) * V);
          if (!verify && j + 1 < T) rows[size_t(b)].back().clear();  // not returned: not checked
        }
    }
    EXPECT_GE(rewinds, 8);
    EXPECT_GT(moved, 8);
    EXPECT_GE(ragged, 8);
    // Every recorded row against stepping; the chunk rows not returned are skipped.
    const test::SteppedCheck r = test::check_against_stepping(*dm_, ids, rows, size_t(prompt), 0.5);
    std::printf("  %s %s%s W=%d spec %d: %d rewinds (%d sequences moved, deepest %d), %d ragged steps, %lld rows, "
                "worst ratio vs stepping %.3f, argmax differs at %lld (%lld of %lld with a top-2 gap >= 0.5); state "
                "peak %lld bytes\n",
                GetParam().c_str(), cuda::decode_strategy_name(rc.strategy), rc.exact ? " exact" : "", rc.window,
                rc.spec_tokens, rewinds, moved, deepest, ragged, (long long)r.rows, r.worst,
                (long long)r.flips, (long long)r.clear_flips, (long long)r.clear,
                (long long)(*dec)->state_bytes_peak());
    EXPECT_GT(r.rows, 30);
    EXPECT_LE(r.worst, trained() ? kTrainedRatio : kFixtureRatio);
    EXPECT_EQ(r.clear_flips, 0);
  }
}

TEST_P(CudaRewind, RefusesWhatItCannotReach) {
  const int64_t V = dm_->config().vocab_size;
  cuda::DecoderOptions o;
  o.strategy = DecodeStrategy::kStandard, o.max_context = 64, o.kv_page = 16, o.rewind = true;
  EXPECT_FALSE(cuda::Decoder::create(*dm_, o).ok());  // the standard layout keeps no log
  o.strategy = DecodeStrategy::kReplay, o.window = 4, o.spec_tokens = 2;
  auto dec = cuda::Decoder::create(*dm_, o);
  ASSERT_TRUE(dec.ok()) << dec.status().message();
  std::vector<int32_t> next(1), argmax(2);
  for (int t = 0; t < 7; ++t) ASSERT_TRUE((*dec)->step(std::vector<int32_t>{int32_t((t * 31 + 5) % V)}, next).ok());
  const int64_t floor = (*dec)->rewind_floor(0), len = (*dec)->length(0);
  EXPECT_GT(floor, 0);  // window 4 folded within 7 tokens
  EXPECT_LE(floor, len);
  EXPECT_FALSE((*dec)->rewind(std::vector<int64_t>{floor - 1}).ok());  // before the checkpoint
  EXPECT_FALSE((*dec)->rewind(std::vector<int64_t>{len + 1}).ok());    // past the end
  EXPECT_FALSE((*dec)->rewind(std::vector<int64_t>{floor, floor}).ok());  // one length per sequence
  EXPECT_EQ((*dec)->length(0), len);  // a refusal changes nothing
  ASSERT_TRUE((*dec)->verify(std::vector<int32_t>{1, 2}, 2, argmax).ok());
  EXPECT_EQ((*dec)->rewind_floor(0), len);
  EXPECT_FALSE((*dec)->rewind(std::vector<int64_t>{len}).ok());  // a verify awaits accept()
  ASSERT_TRUE((*dec)->accept(std::vector<int32_t>{1}).ok());
  const int64_t floor2 = (*dec)->rewind_floor(0);  // the verify may have folded: a later checkpoint
  EXPECT_TRUE((*dec)->rewind(std::vector<int64_t>{floor2}).ok());
  EXPECT_EQ((*dec)->length(0), floor2);
  o.rewind = false;
  auto plain = cuda::Decoder::create(*dm_, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->rewind(std::vector<int64_t>{0}).ok());
}

INSTANTIATE_TEST_SUITE_P(Models, CudaRewind,
                         ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny", "models/nemotron_h_small",
                                           "models/qwen3_5_small"),
                         test::model_param_name);

}  // namespace
}  // namespace replayssm
