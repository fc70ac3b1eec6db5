// Exact replay on the CUDA decoder (DecoderOptions::exact): the Mamba2 and
// Gated DeltaNet logs replayed by the sequential recurrence, so a replay
// decoder's logits have the standard layout's bits — through prompt chunks
// (log steps and chunk scans), single steps, folds, verifies with random
// acceptance and the fold a verify makes. At batch 64 replay without
// `exact` takes the dual form (which rounds otherwise); at batch 1 the GDN
// models run the column-sliced kernels instead of the streaming ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <span>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "decoder_test_util.h"
#include "replayssm/model.h"
#include "runtime/cuda/decoder.h"
#include "backend/cuda/device_model.h"

namespace replayssm {
namespace {

using cuda::DecodeStrategy;

struct ExactCase {
  std::string model;
  int64_t batch;
};
void PrintTo(const ExactCase& c, std::ostream* os) { *os << c.model << " at batch " << c.batch; }

class CudaExact : public ::testing::TestWithParam<ExactCase> {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
    auto m = Model::load(test::fixture(GetParam().model));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
    auto dm = cuda::DeviceModel::create(*model_);
    ASSERT_TRUE(dm.ok()) << dm.status().message();
    dm_ = std::move(dm).value();
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<cuda::DeviceModel> dm_;
};

// Drives the standard layout, exact replay and (for contrast) plain replay
// through the same random steps and verifies; exact replay's every logit
// has the standard layout's bits, plain replay's do not all.
TEST_P(CudaExact, ReplayHasTheStandardLayoutsBits) {
  const int64_t B = GetParam().batch, V = dm_->config().vocab_size;
  std::mt19937 g(5);
  std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
  std::vector<std::unique_ptr<cuda::Decoder>> decs;  // standard, exact replay, replay
  for (int k = 0; k < 3; ++k) {
    cuda::DecoderOptions o;
    o.strategy = k == 0 ? DecodeStrategy::kStandard : DecodeStrategy::kReplay;
    // Batch 1: a longer window and more rounds, so that plain replay's
    // rounding shows through a single sequence's logits.
    o.exact = k == 1, o.batch = B, o.max_context = B == 1 ? 1200 : 400, o.window = B == 1 ? 16 : 8, o.kv_page = 16;
    o.spec_tokens = 4;
    o.max_chunk = 16, o.all_logits = true;
    auto d = cuda::Decoder::create(*dm_, o);
    ASSERT_TRUE(d.ok()) << d.status().message();
    decs.push_back(std::move(d).value());
  }
  std::vector<std::vector<float>> logits(3, std::vector<float>(size_t(B * 16 * V)));
  std::vector<int32_t> next(size_t(B * 16));
  int64_t rows = 0, scans = 0, verifies = 0, plain_differs = 0;
  const int kChunks[] = {1, 1, 2, 5, 8, 13, 16};
  const int rounds = B == 1 ? 64 : 24;
  for (int round = 0; round < rounds; ++round) {
    const bool verify = round >= 4 && g() % 3 == 0;
    const int T = verify ? 2 + int(g() % 3) : kChunks[g() % std::size(kChunks)];
    std::vector<int32_t> tok(size_t(B * T));
    for (int32_t& t : tok) t = id(g);
    const int64_t before = decs[1]->folds();
    for (int k = 0; k < 3; ++k) {
      const Status st = verify ? decs[size_t(k)]->verify(tok, T, std::span<int32_t>(next.data(), size_t(B * T)),
                                                         logits[size_t(k)].data())
                               : decs[size_t(k)]->step(tok, T, std::span<int32_t>(next.data(), size_t(B)),
                                                       logits[size_t(k)].data());
      ASSERT_TRUE(st.ok()) << st.message();
    }
    const auto n = int64_t(B * T * V);
    ASSERT_TRUE(std::equal(logits[0].begin(), logits[0].begin() + n, logits[1].begin()))
        << "round " << round << (verify ? ": a verify of " : ": a step of ") << T;
    plain_differs += !std::equal(logits[0].begin(), logits[0].begin() + n, logits[2].begin());
    rows += B * T;
    scans += !verify && T > 1 && decs[1]->folds() > before;
    if (verify) {
      std::vector<int32_t> accepted(static_cast<size_t>(B));
      for (int32_t& a : accepted) a = int32_t(g() % uint32_t(T + 1));
      for (auto& d : decs) ASSERT_TRUE(d->accept(accepted).ok());
      ++verifies;
    }
  }
  std::printf("  %s: %lld rows of logits bit-identical, %lld verifies, %lld chunk steps that folded, %lld folds; "
              "plain replay differs in %lld of %d rounds\n",
              GetParam().model.c_str(), (long long)rows, (long long)verifies, (long long)scans, (long long)decs[1]->folds(),
              (long long)plain_differs, rounds);
  EXPECT_GT(plain_differs, 0) << "the dual form ran nowhere: nothing here tells exact replay from plain";
  EXPECT_GT(verifies, 2);
  EXPECT_GT(decs[1]->folds(), 3);
  // At batch 64 logs also fill between chunks and fold (at batch 1, where
  // GDN's chunks all scan, tests/cuda/gdn_exact_cuda_test.cpp folds the
  // column-sliced kernel's logs).
  if (B > 1) EXPECT_GT(decs[1]->folds(), scans) << "no log filled and folded: only chunk scans folded";
}

// Batch 64: Mamba2's batch·H over the SMs, past its wide kernels (which
// have stepping's bits even without `exact`); the tiny Qwen at 128, its
// GDN blocks past one wave of the register-resident warps (which the fast
// replay takes where they are one wave, with stepping's bits too: at 64
// plain replay differed nowhere). Batch 1 for the GDN models.
INSTANTIATE_TEST_SUITE_P(Models, CudaExact,
                         ::testing::Values(ExactCase{"nemotron_h_tiny", 64}, ExactCase{"models/nemotron_h_small", 64},
                                           ExactCase{"qwen3_5_tiny", 128}, ExactCase{"models/qwen3_5_small", 64},
                                           ExactCase{"qwen3_5_tiny", 1}, ExactCase{"models/qwen3_5_small", 1}),
                         [](const ::testing::TestParamInfo<ExactCase>& i) {
                           std::string n = i.param.model + "_batch" + std::to_string(i.param.batch);
                           std::replace(n.begin(), n.end(), '/', '_');
                           return n;
                         });

TEST(CudaExactArgs, RefusedOutsideReplay) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const char* name : {"nemotron_h_tiny", "qwen3_5_tiny"}) {
    auto m = Model::load(test::fixture(name));
    ASSERT_TRUE(m.ok()) << m.status().message();
    auto dm = cuda::DeviceModel::create(**m);
    ASSERT_TRUE(dm.ok()) << dm.status().message();
    cuda::DecoderOptions o;
    o.exact = true, o.strategy = DecodeStrategy::kStandard;
    auto d = cuda::Decoder::create(**dm, o);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("exact needs the replay layout"), std::string::npos) << d.status().message();
    o.strategy = DecodeStrategy::kReplay;
    d = cuda::Decoder::create(**dm, o);
    EXPECT_TRUE(d.ok()) << d.status().message();
  }
}

}  // namespace
}  // namespace replayssm
