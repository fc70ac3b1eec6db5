// Speculative decoding on the CUDA decoder: verify() of T tokens per
// sequence, accept() of a random prefix per sequence, sequences drifting
// apart in position — and every committed row's logits equal to stepping
// the committed tokens one at a time from scratch. A rollback that left a
// rejected token anywhere (a conv window, a log entry, a state slot, a K/V
// row that is read) shows up in the logits of the tokens after it. Then the
// generation loop: greedy speculation with n-gram drafts emits greedy
// decoding's tokens in both layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "decoder_test_util.h"
#include "bench/presets.h"
#include "replayssm/model.h"
#include "runtime/cuda/decoder.h"
#include "backend/cuda/device_model.h"
#include "runtime/cuda/generate_cuda.h"

namespace replayssm {
namespace {

using cuda::DecodeStrategy;
using test::fixture;

using test::stepped;
using test::worst_row_ratio;

using test::kFixtureRatio;
using test::kGreedyGap;
using test::kTrainedRatio;

struct SpecCase {
  DecodeStrategy strategy;
  int window, spec_tokens;
  int replay_step = 0;  // DecoderOptions::replay_step (replay)
  std::string name() const { return test::layout_name(strategy, replay_step); }
};

class CudaSpec : public test::DeviceModelTest {
 protected:
  float bound() const { return trained() ? kTrainedRatio : kFixtureRatio; }
};

// Three sequences, a 10-token prompt each, then 30 rounds of random plain
// steps and verifies with random acceptance (0..T), against stepping each
// sequence's committed tokens from scratch (test::check_against_stepping).
using RowsResult = test::SteppedCheck;
RowsResult accepted_rows_vs_stepping(const cuda::DeviceModel& dm, const SpecCase& sc, double clear_gap) {
  RowsResult res;
  const int64_t B = 3, V = dm.config().vocab_size;
  std::mt19937 g(11);
  std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
  cuda::DecoderOptions o;
  o.strategy = sc.strategy, o.batch = B, o.max_context = 200, o.window = sc.window, o.kv_page = 16;
  o.spec_tokens = sc.spec_tokens, o.replay_step = sc.strategy == DecodeStrategy::kReplay ? sc.replay_step : -1;
  auto dec = cuda::Decoder::create(dm, o);
  EXPECT_TRUE(dec.ok()) << dec.status().message();
  if (!dec.ok()) return res;
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(B));                // every committed token
  std::vector<std::vector<std::vector<float>>> rows(static_cast<size_t>(B));  // logits after each
  std::vector<int32_t> next(static_cast<size_t>(B));
  // The prompts, in chunks as large as the decoder takes.
  for (int t = 0; t < 10;) {
    const int T = std::min((*dec)->max_chunk(), 10 - t);
    std::vector<int32_t> tok;
    for (int64_t b = 0; b < B; ++b)
      for (int i = 0; i < T; ++i) ids[size_t(b)].push_back(id(g)), tok.push_back(ids[size_t(b)].back());
    EXPECT_TRUE((*dec)->step(tok, T, next).ok());
    t += T;
  }
  for (auto& r : rows) r.resize(10);  // prompt rows are not compared
  int verifies = 0, partial = 0;
  for (int round = 0; round < 30; ++round) {
    const bool verify = g() % 4 != 0;
    const int T = verify ? 2 + int(g() % uint32_t(sc.spec_tokens - 1)) : 1;
    std::vector<int32_t> tok;
    for (int64_t b = 0; b < B * T; ++b) tok.push_back(id(g));
    std::vector<float> logits(size_t(B * T * V));
    if (!verify) {
      EXPECT_TRUE((*dec)->step(tok, 1, next, logits.data()).ok());
      for (int64_t b = 0; b < B; ++b) {
        ids[size_t(b)].push_back(tok[size_t(b)]);
        rows[size_t(b)].emplace_back(logits.begin() + b * V, logits.begin() + (b + 1) * V);
      }
      continue;
    }
    std::vector<int32_t> argmax(size_t(B * T)), accepted(static_cast<size_t>(B));
    EXPECT_TRUE((*dec)->verify(tok, T, argmax, logits.data()).ok());
    EXPECT_FALSE((*dec)->step(std::vector<int32_t>(size_t(B), 0), next).ok()) << "a step before accept()";
    for (int64_t b = 0; b < B; ++b) {
      accepted[size_t(b)] = int32_t(g() % uint32_t(T + 1));  // 0: the sequence sits the verify out
      partial += accepted[size_t(b)] < T;
      for (int j = 0; j < accepted[size_t(b)]; ++j) {
        const int64_t r = b * T + j;
        ids[size_t(b)].push_back(tok[size_t(r)]);
        rows[size_t(b)].emplace_back(logits.begin() + r * V, logits.begin() + (r + 1) * V);
        EXPECT_EQ(argmax[size_t(r)], std::max_element(logits.begin() + r * V, logits.begin() + (r + 1) * V) -
                                         (logits.begin() + r * V));
      }
    }
    EXPECT_TRUE((*dec)->accept(accepted).ok());
    ++verifies;
  }
  EXPECT_GT(verifies, 15);
  EXPECT_GT(partial, 15);
  for (int64_t b = 0; b < B; ++b) EXPECT_EQ((*dec)->length(b), int64_t(ids[size_t(b)].size()));
  return test::check_against_stepping(dm, ids, rows, 10, clear_gap);
}

// Windows of 6 and 8 with verifies of up to 3 and 4 tokens make the replay
// logs fold their committed prefix under a verify (and move the verify's
// entries) many times; the standard layout cycles through its per-draft
// state slots; recompute (sparse interval 4) goes back to its checkpoint
// and re-runs the kept tokens after every verify not kept whole. Stepped
// replay (replay_step 1) folds its logs on the first plain step after a
// verify — Mamba2 by its replay fold, GDN by a one-token chunk scan — and
// takes the standard step on the plain steps after that.
const std::vector<SpecCase> kCases = {{DecodeStrategy::kStandard, 16, 4},
                                      {DecodeStrategy::kReplay, 8, 4},
                                      {DecodeStrategy::kReplay, 6, 3},
                                      {DecodeStrategy::kReplay, 8, 4, 1},
                                      {DecodeStrategy::kRecompute, 4, 4}};

TEST_P(CudaSpec, AcceptedRowsMatchSteppingTheCommittedTokens) {
  for (const SpecCase& sc : kCases) {
    const RowsResult r = accepted_rows_vs_stepping(*dm_, sc, 0.5);
    std::printf(
        "  %s %s W=%d spec %d: %lld rows, worst ratio vs stepping %.3f, argmax differs at %lld (%lld of %lld "
        "with a top-2 gap >= 0.5)\n",
        GetParam().c_str(), sc.name().c_str(), sc.window, sc.spec_tokens, (long long)r.rows, r.worst,
        (long long)r.flips, (long long)r.clear_flips, (long long)r.clear);
    EXPECT_LE(r.worst, bound()) << sc.name() << " window " << sc.window;
    EXPECT_EQ(r.clear_flips, 0) << sc.name() << " window " << sc.window;
  }
}

// The bench presets' shapes with random weights (cut after their first
// attention block and the block after it, to keep the test small): the
// paths a verify takes at these sizes (cuBLAS GEMMs instead of the 1–2 row
// GEMV, the attention prefill kernel, the split Mamba2 replay) against
// single steps. (At full depth a random model's top-2 logits sit within
// bf16 noise of each other — gaps of 0.01–0.2 on logits near 4.3 — so a
// verify and single steps pick different tokens now and then; the bench's
// oracle drafts lose their reference there: docs/perf/README.md.)
TEST(CudaSpecPresets, AcceptedRowsMatchSteppingAtPresetShapes) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const char* name : {"nemotron-h-8b", "qwen3.5-27b"}) {
    auto cfg = bench::preset_config(name);
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    const size_t attn = size_t(std::find(cfg->blocks.begin(), cfg->blocks.end(), BlockKind::kAttention) - cfg->blocks.begin());
    ASSERT_LT(attn, cfg->blocks.size());
    cfg->blocks.resize(attn + 2), cfg->block_layer.resize(attn + 2);
    cfg->n_layers = cfg->block_layer.back() + 1;
    auto m = Model::random_without_matrices(*cfg, bench::kPresetSeed);
    ASSERT_TRUE(m.ok()) << m.status().message();
    auto dm = cuda::DeviceModel::create(**m, bench::kPresetSeed);
    ASSERT_TRUE(dm.ok()) << dm.status().message();
    for (const SpecCase& sc : kCases) {
      const RowsResult r = accepted_rows_vs_stepping(**dm, sc, 0.5);
      std::printf(
          "  %s (%zu blocks) %s W=%d: %lld rows, worst ratio %.3f, median top-2 gap %.4f, argmax differs at "
          "%lld (%lld of %lld with a gap >= 0.5)\n",
          name, cfg->blocks.size(), sc.name().c_str(), sc.window, (long long)r.rows, r.worst, r.median_gap,
          (long long)r.flips, (long long)r.clear_flips, (long long)r.clear);
      EXPECT_LE(r.worst, kTrainedRatio) << name << " " << sc.name();  // measured ≤ 0.74
      EXPECT_EQ(r.clear_flips, 0) << name << " " << sc.name();
    }
  }
}

TEST_P(CudaSpec, MisuseIsRefused) {
  cuda::DecoderOptions o;
  o.window = 8, o.spec_tokens = 5;  // replay: a verify must fit half the window
  EXPECT_FALSE(cuda::Decoder::create(*dm_, o).ok());
  o.spec_tokens = 1;
  EXPECT_FALSE(cuda::Decoder::create(*dm_, o).ok());
  o.spec_tokens = 0, o.max_context = 16;
  auto plain = cuda::Decoder::create(*dm_, o);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  std::vector<int32_t> am(2), acc{1};
  EXPECT_FALSE((*plain)->verify(std::vector<int32_t>{1, 2}, 2, am).ok()) << "no spec_tokens";
  o.spec_tokens = 4;
  auto dec = cuda::Decoder::create(*dm_, o);
  ASSERT_TRUE(dec.ok()) << dec.status().message();
  EXPECT_FALSE((*dec)->accept(acc).ok()) << "nothing to accept";
  std::vector<int32_t> am5(5);
  EXPECT_FALSE((*dec)->verify(std::vector<int32_t>(5, 1), 5, am5).ok()) << "over spec_tokens";
  ASSERT_TRUE((*dec)->verify(std::vector<int32_t>{1, 2}, 2, am).ok());
  EXPECT_FALSE((*dec)->verify(std::vector<int32_t>{1, 2}, 2, am).ok()) << "a verify awaiting accept";
  EXPECT_FALSE((*dec)->accept(std::vector<int32_t>{3}).ok()) << "more than verified";
  EXPECT_FALSE((*dec)->accept(std::vector<int32_t>{-1}).ok()) << "fewer than none";
  ASSERT_TRUE((*dec)->accept(acc).ok());
  EXPECT_EQ((*dec)->length(), 1);
  // The context bounds a verify's reach: 16 positions, 13 used.
  std::vector<int32_t> next(1);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE((*dec)->step(std::vector<int32_t>{1}, next).ok());
  std::vector<int32_t> am4(4);
  EXPECT_EQ((*dec)->verify(std::vector<int32_t>(4, 1), 4, am4).code(), StatusCode::kOutOfBudget);
  EXPECT_FALSE((*dec)->verify(std::vector<int32_t>(3, 1), 3, am4).ok()) << "argmax room for 4 rows, 3 verified";
}

// Greedy speculation with n-gram drafts emits greedy decoding's tokens: two
// prompts of different lengths that repeat a phrase (so lookups hit), both
// layouts. Verify rows are computed in chunks and single steps are not, so
// the two may part only at a near tie of greedy decoding's logits.
TEST_P(CudaSpec, GreedyNgramSpeculationEmitsGreedyDecodingsTokens) {
  const int64_t V = dm_->config().vocab_size;
  std::mt19937 g(5);
  std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
  std::vector<std::vector<int32_t>> prompts(2);
  for (size_t p = 0; p < 2; ++p) {
    std::vector<int32_t> phrase;
    for (int i = 0; i < 6 + int(p) * 3; ++i) phrase.push_back(id(g));
    for (int r = 0; r < 4; ++r) prompts[p].insert(prompts[p].end(), phrase.begin(), phrase.end());
  }
  for (DecodeStrategy s : {DecodeStrategy::kStandard, DecodeStrategy::kReplay, DecodeStrategy::kRecompute}) {
    cuda::CudaGenerateOptions o;
    o.max_new_tokens = 40, o.stop_at_eos = false, o.strategy = s, o.window = 16;
    auto ar = cuda::generate_batch_cuda(*dm_, prompts, o);
    ASSERT_TRUE(ar.ok()) << ar.status().message();
    o.spec.kind = SpecOptions::kNgram, o.spec.tokens = 4;
    auto sp = cuda::generate_batch_cuda(*dm_, prompts, o);
    ASSERT_TRUE(sp.ok()) << sp.status().message();
    for (size_t p = 0; p < 2; ++p) {
      const auto &a = ar->tokens[p], &b = sp->tokens[p];
      ASSERT_EQ(a.size(), 40u);
      ASSERT_EQ(b.size(), 40u);
      const size_t same = size_t(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
      if (same < a.size()) {  // only at a near tie
        std::vector<int32_t> ctx = prompts[p];
        ctx.insert(ctx.end(), a.begin(), a.begin() + int64_t(same));
        std::vector<float> top = stepped(*dm_, ctx).back();
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        EXPECT_LT(top[0] - top[1], kGreedyGap) << "prompt " << p << " parts at token " << same;
      }
      std::printf("  %s %s prompt %zu: %zu of 40 tokens equal\n", GetParam().c_str(), cuda::decode_strategy_name(s), p,
                  same);
    }
    std::printf("    %lld verifies, %lld drafted, %lld accepted, %lld with a rollback\n",
                (long long)sp->spec.verify_steps, (long long)sp->spec.drafted, (long long)sp->spec.accepted,
                (long long)sp->spec.rejections);
    EXPECT_GT(sp->spec.verify_steps, 0);
    EXPECT_GT(sp->spec.accepted, 0);
    EXPECT_GT(sp->spec.rejections, 0);
    // Sampled speculation is reproducible under a seed.
    o.sampling.temperature = 0.8f, o.sampling.seed = 3;
    auto s1 = cuda::generate_batch_cuda(*dm_, prompts, o);
    auto s2 = cuda::generate_batch_cuda(*dm_, prompts, o);
    ASSERT_TRUE(s1.ok() && s2.ok());
    EXPECT_EQ(s1->tokens, s2->tokens);
  }
}

// Prompts of very different lengths in one batch: the short ones decode
// in ragged steps while the long one's chunks go in (max_chunk 16 at
// batch 3), and every prompt's greedy tokens are its own — against
// stepping the prompt and its tokens from scratch, a parting only at a
// near tie — in every layout.
TEST_P(CudaSpec, UnequalPromptsGenerateTheirOwnGreedyTokens) {
  const int64_t V = dm_->config().vocab_size;
  std::mt19937 g(17);
  std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
  std::vector<std::vector<int32_t>> prompts;
  for (int n : {5, 70, 23}) {
    prompts.emplace_back();
    for (int i = 0; i < n; ++i) prompts.back().push_back(id(g));
  }
  for (DecodeStrategy s : {DecodeStrategy::kStandard, DecodeStrategy::kReplay, DecodeStrategy::kRecompute}) {
    SCOPED_TRACE(cuda::decode_strategy_name(s));
    cuda::CudaGenerateOptions o;
    o.max_new_tokens = 12, o.stop_at_eos = false, o.strategy = s, o.window = 8;
    cuda::DecoderOptions d;
    d.strategy = s, d.batch = 3, d.window = 8, d.max_context = cuda::decoder_context(70, o), d.max_chunk = 16;
    auto dec = cuda::Decoder::create(*dm_, d);
    ASSERT_TRUE(dec.ok()) << dec.status().message();
    auto got = cuda::generate_batch_cuda(**dec, prompts, o);
    ASSERT_TRUE(got.ok()) << got.status().message();
    int parted = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      const std::vector<int32_t>& out = got->tokens[p];
      ASSERT_EQ(out.size(), 12u) << "prompt " << p;
      std::vector<int32_t> path = prompts[p];
      path.insert(path.end(), out.begin(), out.end() - 1);
      const auto rows = stepped(*dm_, path);
      for (size_t j = 0; j < out.size(); ++j) {
        const std::vector<float>& row = rows[prompts[p].size() - 1 + j];
        if (int32_t(std::max_element(row.begin(), row.end()) - row.begin()) == out[j]) continue;
        std::vector<float> top(row);
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        EXPECT_LT(top[0] - top[1], kGreedyGap) << "prompt " << p << " token " << j;
        ++parted;
        break;  // the rest follow its own choice
      }
    }
    std::printf("  %s %s: unequal prompts, %d parted at a near tie\n", GetParam().c_str(), cuda::decode_strategy_name(s),
                parted);
  }
}

// Sampled decoding draws on the device with each prompt's Sampler's
// uniforms: the tokens a host Sampler (seed + i) draws from the same
// decoder's logits, fed the same way (equal prompts' chunks, then a token
// per step), in every layout.
TEST_P(CudaSpec, DeviceSamplingDrawsTheHostSamplersTokens) {
  const int64_t V = dm_->config().vocab_size;
  std::mt19937 g(9);
  std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
  std::vector<std::vector<int32_t>> prompts(3, std::vector<int32_t>(11));
  for (auto& p : prompts)
    for (auto& t : p) t = id(g);
  for (DecodeStrategy s : {DecodeStrategy::kStandard, DecodeStrategy::kReplay, DecodeStrategy::kRecompute}) {
    cuda::CudaGenerateOptions o;
    o.max_new_tokens = 24, o.stop_at_eos = false, o.strategy = s, o.window = 8;
    o.sampling.temperature = 0.9f, o.sampling.top_p = 0.95f, o.sampling.seed = 11;
    auto got = cuda::generate_batch_cuda(*dm_, prompts, o);
    ASSERT_TRUE(got.ok()) << got.status().message();
    cuda::DecoderOptions d;
    d.strategy = s, d.batch = 3, d.window = 8, d.max_context = cuda::decoder_context(11, o);
    auto dec = cuda::Decoder::create(*dm_, d);
    ASSERT_TRUE(dec.ok()) << dec.status().message();
    std::vector<Sampler> samplers;
    for (uint64_t i = 0; i < 3; ++i) samplers.emplace_back(SamplingParams{0.9f, 0.95f, 11 + i});
    std::vector<float> logits(size_t(3 * V));
    std::vector<int32_t> tok, next(3);
    for (size_t t = 0; t < 11;) {
      const size_t T = std::min(size_t((*dec)->max_chunk()), 11 - t);
      tok.clear();
      for (const auto& p : prompts) tok.insert(tok.end(), p.begin() + long(t), p.begin() + long(t + T));
      ASSERT_TRUE((*dec)->step(tok, int(T), next, logits.data()).ok());
      t += T;
    }
    std::vector<std::vector<int32_t>> want(3);
    for (int k = 0; k < 24; ++k) {
      tok.assign(3, 0);
      for (size_t b = 0; b < 3; ++b)
        want[b].push_back(tok[b] = samplers[b].sample({logits.data() + b * size_t(V), size_t(V)}));
      if (k + 1 < 24) ASSERT_TRUE((*dec)->step(tok, next, logits.data()).ok());
    }
    EXPECT_EQ(got->tokens, want) << cuda::decode_strategy_name(s);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaSpec,
                         ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny", "models/nemotron_h_small",
                                           "models/qwen3_5_small"),
                         test::model_param_name);

}  // namespace
}  // namespace replayssm
