// Continuous batching on the GPU (runtime/cuda/engine_cuda.h): requests
// of different lengths join between steps into fewer slots than requests,
// prefill in chunks beside others' decoding (ragged steps: short chunks in
// a tight step's rows, and whole prompts at once), leave, and their slots are
// cleared for the next — every greedy token against stepping the request's
// own tokens from scratch (a parting only at a near tie of the top two
// logits, as chunked and single-token rows round differently), in every
// layout. Then sampling repeats under a seed, cancels end requests with an
// event, and what cannot fit a slot is refused at submit.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "decoder_test_util.h"
#include "runtime/cuda/engine_cuda.h"

namespace replayssm {
namespace {

using cuda::DecodeStrategy;

using test::kGreedyGap;

using CudaEngine = test::DeviceModelTest;

TEST_P(CudaEngine, JoiningRequestsDecodeWhatSteppingTheirTokensGives) {
  const int64_t V = dm_->config().vocab_size;
  // Short chunks in a tight step (prompts wait for rows behind the
  // decoding requests' tokens; at 3 rows the decoder holds no more rows
  // than slots), and whole prompts in one step.
  struct Rows {
    int chunk;
    int64_t step;
  };
  for (auto [chunk, step_rows] : {Rows{4, 6}, Rows{3, 3}, Rows{64, 64}})
  for (DecodeStrategy s : {DecodeStrategy::kReplay, DecodeStrategy::kStandard, DecodeStrategy::kRecompute}) {
    SCOPED_TRACE(std::string(cuda::decode_strategy_name(s)) + ", chunks of " + std::to_string(chunk));
    cuda::EngineCudaOptions o;
    o.strategy = s, o.window = 8, o.slots = 3, o.max_context = 64, o.prefill_chunk = chunk;
    o.max_batch_tokens = step_rows;
    auto eng = cuda::EngineCuda::create(*dm_, o);
    ASSERT_TRUE(eng.ok()) << eng.status().message();
    std::mt19937 g(13);
    std::uniform_int_distribution<int32_t> id(0, int32_t(V - 1));
    std::vector<RequestParams> reqs;
    std::vector<int64_t> ids;
    std::vector<std::vector<int32_t>> streamed;
    std::vector<int> finished;
    auto submit = [&](int prompt, int new_tokens) {
      RequestParams p;
      for (int i = 0; i < prompt; ++i) p.prompt.push_back(id(g));
      p.max_new_tokens = new_tokens, p.stop_at_eos = false;
      reqs.push_back(p);
      const size_t k = streamed.size();
      streamed.emplace_back(), finished.push_back(0);
      auto r = (*eng)->submit(p, [&, k](const TokenEvent& e) {
        if (e.token >= 0) streamed[k].push_back(e.token);
        finished[k] += e.finished;
        EXPECT_TRUE(e.error.ok()) << e.error.message();
      });
      ASSERT_TRUE(r.ok()) << r.status().message();
      ids.push_back(*r);
    };
    submit(9, 12), submit(3, 20), submit(14, 6);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*eng)->step().ok());
    submit(6, 9), submit(1, 15);  // join while the others run; the slots are full
    for (int i = 0; i < 7; ++i) ASSERT_TRUE((*eng)->step().ok());
    submit(11, 8), submit(5, 5);
    ASSERT_TRUE((*eng)->run().ok());
    EXPECT_TRUE((*eng)->idle());
    const EngineStats& st = (*eng)->stats();
    EXPECT_EQ(st.max_running, 3);
    EXPECT_GE(st.max_waiting, 2);
    EXPECT_LE(st.max_batch_rows, step_rows);
    int64_t prompt_tokens = 0, parted = 0;
    for (size_t k = 0; k < reqs.size(); ++k) {
      auto out = (*eng)->output(ids[k]);
      ASSERT_TRUE(out.ok());
      ASSERT_EQ(out->size(), size_t(reqs[k].max_new_tokens)) << "request " << k;
      EXPECT_EQ(streamed[k], *out) << "request " << k;
      EXPECT_EQ(finished[k], 1) << "request " << k;
      prompt_tokens += int64_t(reqs[k].prompt.size());
      // Greedy tokens against stepping the request's own tokens.
      std::vector<int32_t> path = reqs[k].prompt;
      path.insert(path.end(), out->begin(), out->end() - 1);
      const auto rows = test::stepped(*dm_, path);
      for (size_t j = 0; j < out->size(); ++j) {
        const std::vector<float>& row = rows[reqs[k].prompt.size() - 1 + j];
        const int32_t want = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
        if (want == (*out)[j]) continue;
        std::vector<float> top(row);
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        EXPECT_LT(top[0] - top[1], kGreedyGap) << "request " << k << " token " << j;
        ++parted;
        break;  // the rest follow its own choice, which stepping its path checks no further
      }
    }
    EXPECT_EQ(st.prefill_tokens, prompt_tokens);
    std::printf("  %s %s, chunks of %d: %lld steps (%lld with prompt chunks), %lld prefill and %lld decode tokens, "
                "%lld requests parted at a near tie\n",
                GetParam().c_str(), cuda::decode_strategy_name(s), chunk, (long long)st.steps, (long long)st.prefill_steps,
                (long long)st.prefill_tokens, (long long)st.decode_tokens, (long long)parted);
  }
}

TEST_P(CudaEngine, SamplingRepeatsCancelsEndAndMisfitsAreRefused) {
  const int64_t V = dm_->config().vocab_size;
  cuda::EngineCudaOptions o;
  o.slots = 2, o.max_context = 40, o.prefill_chunk = 4;
  std::vector<std::vector<int32_t>> outs;
  for (int run = 0; run < 2; ++run) {
    auto eng = cuda::EngineCuda::create(*dm_, o);
    ASSERT_TRUE(eng.ok()) << eng.status().message();
    for (uint64_t seed : {5u, 6u, 7u}) {
      RequestParams p;
      p.prompt = {1, 2, 3, int32_t(seed % uint64_t(V))};
      p.max_new_tokens = 10, p.sampling = {0.9f, 0.95f, seed}, p.stop_at_eos = false;
      ASSERT_TRUE((*eng)->submit(p).ok());
    }
    ASSERT_TRUE((*eng)->run().ok());
    for (int64_t r = 0; r < 3; ++r) outs.push_back(*(*eng)->output(r));
  }
  for (int r = 0; r < 3; ++r) EXPECT_EQ(outs[size_t(r)], outs[size_t(r + 3)]) << "request " << r;
  EXPECT_NE(outs[0], outs[1]) << "different seeds";

  auto eng = cuda::EngineCuda::create(*dm_, o);
  ASSERT_TRUE(eng.ok());
  int ended = 0;
  auto count_end = [&](const TokenEvent& e) { ended += e.finished; };
  RequestParams p;
  p.prompt = {4, 5, 6}, p.max_new_tokens = 20, p.stop_at_eos = false;
  const int64_t a = *(*eng)->submit(p, count_end), b = *(*eng)->submit(p, count_end), c = *(*eng)->submit(p, count_end);
  ASSERT_TRUE((*eng)->step().ok());
  ASSERT_TRUE((*eng)->step().ok());
  EXPECT_TRUE((*eng)->cancel(a).ok());  // running
  EXPECT_TRUE((*eng)->cancel(c).ok());  // waiting
  EXPECT_FALSE((*eng)->cancel(c).ok());  // already ended
  EXPECT_EQ(ended, 2);
  ASSERT_TRUE((*eng)->run().ok());
  EXPECT_EQ(ended, 3);
  EXPECT_EQ((*eng)->output(b)->size(), 20u);
  EXPECT_LT((*eng)->output(a)->size(), 20u);

  RequestParams bad;
  EXPECT_FALSE((*eng)->submit(bad).ok());  // empty prompt
  bad.prompt = {int32_t(V)};
  EXPECT_FALSE((*eng)->submit(bad).ok());  // id out of range
  bad.prompt = std::vector<int32_t>(30, 1), bad.max_new_tokens = 11;
  auto over = (*eng)->submit(bad);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kOutOfBudget);
  EXPECT_NE(over.status().message().find("max_context 40"), std::string::npos) << over.status().message();
  bad.max_new_tokens = 4, bad.state_budget = 16;
  EXPECT_FALSE((*eng)->submit(bad).ok());  // a budget under a slot's state
  for (auto bad_rows : {+[](cuda::EngineCudaOptions& e) { e.prefill_chunk = 0; },
                        +[](cuda::EngineCudaOptions& e) { e.prefill_chunk = cuda::kMaxChunk + 1; },
                        +[](cuda::EngineCudaOptions& e) { e.max_batch_tokens = e.slots - 1; }}) {  // a slot without a row
    cuda::EngineCudaOptions b = o;
    bad_rows(b);
    EXPECT_FALSE(cuda::EngineCuda::create(*dm_, b).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEngine,
                         ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny", "models/nemotron_h_small",
                                           "models/qwen3_5_small"),
                         test::model_param_name);

}  // namespace
}  // namespace replayssm
