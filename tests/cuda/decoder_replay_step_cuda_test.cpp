// The replay layout's stepped one-token steps (DecoderOptions::replay_step):
// a plain step's SSM layers read the checkpoint, step it and write it back,
// folding every token, so the logs stay empty — by default where that
// measured the faster decode step (Mamba2 layers at a band of batches).
// Checked here: which batches choose it (the rule, wired through, and the
// option over it), that every stepped step folds and writes what the
// standard layout writes, that a verify's entries fold on the next plain
// step (Mamba2 by its replay fold, GDN by a one-token chunk scan), and
// every committed row's logits against stepping from scratch. The decoder,
// spec and fork tests run the stepped layout through their own harnesses.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "bench/presets.h"
#include "cuda_test_util.h"
#include "decoder_test_util.h"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/mamba2_decode.h"
#include "replayssm/model.h"
#include "runtime/cuda/decoder.h"
#include "backend/cuda/device_model.h"

namespace replayssm {
namespace {

using cuda::DecodeStrategy;
using test::kTrainedRatio;

namespace oc = ops::cuda;

int device_sms() {
  int dev = 0, sms = 0;
  EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  return sms;
}

// The rule, against the SM count of whatever device runs the test.
TEST(CudaReplayStepRule, BatchesWhereTheStandardStepIsFaster) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int sms = device_sms();
  ASSERT_GT(sms, 8);
  oc::Mamba2DecodeArgs m;
  m.H = 1, m.P = 64, m.N = 128;
  auto mamba = [&](int batch) { return m.batch = batch, oc::mamba2_replay_steps_faster(m); };
  EXPECT_FALSE(mamba(1));
  EXPECT_FALSE(mamba(sms)) << "up to a block an SM: the output-only kernels";
  EXPECT_TRUE(mamba(sms + 1));
  EXPECT_TRUE(mamba(2 * sms));
  EXPECT_FALSE(mamba(2 * sms + 1)) << "past twice the SMs: replay's halved bytes";
  EXPECT_FALSE(mamba(64 * sms));
  if (sms == 132) {  // the H200 at Nemotron-H-8B shapes: batch 2 alone
    m.H = 128;
    EXPECT_FALSE(mamba(1));
    EXPECT_TRUE(mamba(2));
    EXPECT_FALSE(mamba(3));
  }
}

// A preset's shapes, cut to its blocks up to the first attention block and
// the one after (what the decoder's choice reads: the SSM layers' heads).
std::unique_ptr<cuda::DeviceModel> preset(const char* name) {
  auto cfg = bench::preset_config(name);
  EXPECT_TRUE(cfg.ok()) << cfg.status().message();
  if (!cfg.ok()) return nullptr;
  const size_t attn =
      size_t(std::find(cfg->blocks.begin(), cfg->blocks.end(), BlockKind::kAttention) - cfg->blocks.begin());
  cfg->blocks.resize(attn + 2), cfg->block_layer.resize(attn + 2);
  cfg->n_layers = cfg->block_layer.back() + 1;
  auto m = Model::random_without_matrices(*cfg, bench::kPresetSeed);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return nullptr;
  auto dm = cuda::DeviceModel::create(**m, bench::kPresetSeed);
  EXPECT_TRUE(dm.ok()) << dm.status().message();
  return dm.ok() ? std::move(dm).value() : nullptr;
}

TEST(CudaReplayStepRule, TheDecoderFollowsTheRuleAndItsOption) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const char* name : {"nemotron-h-8b", "qwen3.5-27b"}) {
    SCOPED_TRACE(name);
    const std::unique_ptr<cuda::DeviceModel> dm = preset(name);
    ASSERT_NE(dm, nullptr);
    const ModelConfig& c = dm->config();
    const bool mamba = name[0] == 'n';
    for (int64_t batch : {1, 2, 3, 8, 64}) {
      cuda::DecoderOptions o;
      o.batch = batch, o.max_context = 32;
      oc::Mamba2DecodeArgs ma;
      ma.batch = int(batch), ma.H = int(c.mamba.n_heads), ma.P = int(c.mamba.head_dim), ma.N = int(c.mamba.state_size);
      const bool want = mamba && oc::mamba2_replay_steps_faster(ma);  // GDN layers: only when asked
      for (int step : {-1, 0, 1})
        for (int groups : {-1, 1}) {
          o.replay_step = step, o.fork_groups = groups, o.forks = groups == 1;
          auto dec = cuda::Decoder::create(*dm, o);
          ASSERT_TRUE(dec.ok()) << dec.status().message();
          const bool on = step == 1 || (step == -1 && groups != 1 && want);
          EXPECT_EQ(mamba ? (*dec)->replay_steps_mamba2() : (*dec)->replay_steps_gdn(), on)
              << "batch " << batch << " replay_step " << step << " fork_groups " << groups;
          EXPECT_FALSE(mamba ? (*dec)->replay_steps_gdn() : (*dec)->replay_steps_mamba2()) << "a kind the model lacks";
        }
      o.replay_step = -1, o.fork_groups = -1, o.forks = false;
      for (cuda::DecodeStrategy s : {DecodeStrategy::kStandard, DecodeStrategy::kRecompute}) {
        o.strategy = s;
        auto dec = cuda::Decoder::create(*dm, o);
        ASSERT_TRUE(dec.ok()) << dec.status().message();
        EXPECT_FALSE((*dec)->replay_steps_mamba2() || (*dec)->replay_steps_gdn()) << "not replay";
      }
      o.strategy = DecodeStrategy::kReplay, o.exact = true;
      auto ex = cuda::Decoder::create(*dm, o);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      EXPECT_FALSE((*ex)->replay_steps_mamba2() || (*ex)->replay_steps_gdn()) << "exact keeps the logs' kernels";
    }
  }
}

TEST(CudaReplayStepRule, BadOptionsAreRefused) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto m = Model::load(test::fixture("qwen3_5_tiny"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto dm = cuda::DeviceModel::create(**m);
  ASSERT_TRUE(dm.ok()) << dm.status().message();
  auto refused = [&](const cuda::DecoderOptions& o, const std::string& says) {
    auto d = cuda::Decoder::create(**dm, o);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find(says), std::string::npos) << d.status().message();
  };
  cuda::DecoderOptions o;
  o.max_context = 16;
  for (int bad : {-2, 2}) {
    o.replay_step = bad;
    refused(o, "replay_step " + std::to_string(bad));
  }
  o.replay_step = 1;
  o.exact = true;
  refused(o, "exact");
  o.exact = false, o.rewind = true;
  refused(o, "rewind");
  o.rewind = false, o.strategy = DecodeStrategy::kStandard;
  refused(o, "not replay");
  o.strategy = DecodeStrategy::kReplay;
  EXPECT_TRUE(cuda::Decoder::create(**dm, o).ok());
}

using CudaReplayStep = test::DeviceModelTest;

// Two sequences: a 12-token prompt in one chunk, then 40 rounds — every
// fifth a verify of 3 tokens accepting 1 and 2, or 0 and 2 (entries left
// in one or both logs for the next plain step to fold), the rest plain
// steps. Until the first verify the stepped layout's logits are the
// standard layout's bit for bit (the same chunk scan, then the same step
// kernels); every plain step of it folds (folds() + 1) and writes what the
// standard layout's step writes (each sequence's states and windows); the
// output-only kernels fold only where a log fills. Every committed row
// against stepping.
TEST_P(CudaReplayStep, EveryPlainStepFoldsAndMatchesStepping) {
  const int64_t B = 2, V = dm_->config().vocab_size;
  auto make = [&](DecodeStrategy s, int step) {
    cuda::DecoderOptions o;
    o.strategy = s, o.batch = B, o.max_context = 120, o.window = 8, o.kv_page = 16, o.spec_tokens = 3;
    o.replay_step = s == DecodeStrategy::kReplay ? step : -1;
    auto d = cuda::Decoder::create(*dm_, o);
    EXPECT_TRUE(d.ok()) << d.status().message();
    return d.ok() ? std::move(d).value() : nullptr;
  };
  auto stepped = make(DecodeStrategy::kReplay, 1), kernels = make(DecodeStrategy::kReplay, 0),
       standard = make(DecodeStrategy::kStandard, -1);
  ASSERT_TRUE(stepped && kernels && standard);
  cuda::Decoder* decs[] = {stepped.get(), kernels.get(), standard.get()};
  std::mt19937 g(5);
  std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(B));
  std::vector<std::vector<std::vector<float>>> rows(static_cast<size_t>(B));  // the stepped layout's
  std::vector<int32_t> next(static_cast<size_t>(B)), prompt;
  for (int64_t b = 0; b < B; ++b)
    for (int i = 0; i < 12; ++i) ids[size_t(b)].push_back(id(g)), prompt.push_back(ids[size_t(b)].back());
  for (cuda::Decoder* d : decs) ASSERT_TRUE(d->step(prompt, 12, next).ok());
  for (auto& r : rows) r.resize(12);
  int plain = 0, verifies = 0;
  for (int round = 0; round < 40; ++round) {
    const bool verify = round % 5 == 3;
    const int T = verify ? 3 : 1;
    std::vector<int32_t> tok;
    for (int64_t i = 0; i < B * T; ++i) tok.push_back(id(g));
    std::vector<float> logits(size_t(B * T * V)), standard_logits(size_t(B * V));
    if (!verify) {
      int64_t folds[3], written[3];
      for (int k = 0; k < 3; ++k) folds[k] = decs[k]->folds(), written[k] = decs[k]->state_bytes_written();
      for (int k = 0; k < 3; ++k)
        ASSERT_TRUE(decs[k]
                        ->step(tok, 1, next,
                               k == 0   ? logits.data()
                               : k == 2 ? standard_logits.data()
                                        : nullptr)
                        .ok());
      if (verifies == 0) EXPECT_EQ(logits, standard_logits) << "round " << round << ": not the standard step's bits";
      EXPECT_EQ(stepped->folds(), folds[0] + 1) << "round " << round;
      EXPECT_EQ(stepped->state_bytes_written() - written[0], standard->state_bytes_written() - written[2])
          << "round " << round;
      for (int64_t b = 0; b < B; ++b) {
        ids[size_t(b)].push_back(tok[size_t(b)]);
        rows[size_t(b)].emplace_back(logits.begin() + b * V, logits.begin() + (b + 1) * V);
      }
      ++plain;
      continue;
    }
    std::vector<int32_t> argmax(size_t(B * T)), accepted{verifies % 2, 2};  // entries left in one or both logs
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(decs[k]->verify(tok, T, argmax, k == 0 ? logits.data() : nullptr).ok());
    for (int64_t b = 0; b < B; ++b)
      for (int j = 0; j < accepted[size_t(b)]; ++j) {
        const int64_t r = b * T + j;
        ids[size_t(b)].push_back(tok[size_t(r)]);
        rows[size_t(b)].emplace_back(logits.begin() + r * V, logits.begin() + (r + 1) * V);
      }
    for (cuda::Decoder* d : decs) ASSERT_TRUE(d->accept(accepted).ok());
    ++verifies;
  }
  EXPECT_EQ(plain, 32);
  EXPECT_EQ(verifies, 8);
  // The prompt's chunk scan and every plain step; no verify folds (each
  // starts from an empty log, and 3 entries leave a window of 8 room).
  EXPECT_EQ(stepped->folds(), 1 + plain);
  EXPECT_LT(kernels->folds(), stepped->folds()) << "the output-only kernels fold where a log fills";
  const test::SteppedCheck r = test::check_against_stepping(*dm_, ids, rows, 12, 0.5);
  std::printf(
      "  %s: %lld rows, worst ratio vs stepping %.3f, argmax differs at %lld (%lld with a gap >= 0.5); folds "
      "%lld stepped, %lld output-only; state written %lld / %lld / %lld bytes (stepped, output-only, "
      "standard)\n",
      GetParam().c_str(), (long long)r.rows, r.worst, (long long)r.flips, (long long)r.clear_flips,
      (long long)stepped->folds(), (long long)kernels->folds(), (long long)stepped->state_bytes_written(),
      (long long)kernels->state_bytes_written(), (long long)standard->state_bytes_written());
  EXPECT_LE(r.worst, kTrainedRatio);
  EXPECT_EQ(r.clear_flips, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaReplayStep, ::testing::Values("models/nemotron_h_small", "models/qwen3_5_small"),
                         test::model_param_name);

}  // namespace
}  // namespace replayssm
