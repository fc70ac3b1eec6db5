// Engine: continuous batching must not change any request's tokens —
// requests joining mid-run, chunked prefill mixed with decode, admission
// under a state budget, cancellation, bad requests.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "workloads/generate.h"
#include "replayssm/engine.h"
#include "test_util.h"

namespace replayssm {
namespace {

// generate() on its own backend (the engine holds the other).
std::vector<int32_t> reference(Backend& b, const RequestParams& p, const StateOptions& so) {
  GenerateOptions g;
  g.max_new_tokens = p.max_new_tokens;
  g.sampling = p.sampling;
  g.stop_at_eos = p.stop_at_eos;
  g.state = so;
  auto r = generate(b, p.prompt, g);
  EXPECT_TRUE(r.ok());
  return r->tokens;
}

class EngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = Model::load(test::data_dir(GetParam()));
    ASSERT_TRUE(m.ok());
    model_ = std::move(m).value();
    backend_ = test::cpu_backend(*model_);
    ref_ = test::cpu_backend(*model_);
  }
  std::vector<RequestParams> requests(int n) {
    std::vector<RequestParams> out;
    for (int i = 0; i < n; ++i) {
      RequestParams p;
      for (int j = 0; j < 1 + (i * 7) % 23; ++j) p.prompt.push_back((i * 31 + j * 5) % 80);
      p.max_new_tokens = 3 + i % 9;
      p.stop_at_eos = i % 2 == 0;
      if (i % 3 == 1) {
        p.sampling.temperature = 0.9f;
        p.sampling.seed = 100 + i;
      }
      out.push_back(p);
    }
    return out;
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<cpu::CpuBackend> backend_, ref_;
};

TEST_P(EngineTest, ContinuousBatchingKeepsEveryRequestsTokens) {
  EngineOptions eo;
  eo.state.exact = true;
  eo.state.window = 4;
  eo.state.page_size = 4;
  eo.max_batch_tokens = 9;
  eo.prefill_chunk = 4;
  eo.max_running = 5;
  auto e = Engine::create(*backend_, eo);
  ASSERT_TRUE(e.ok());
  const std::vector<RequestParams> reqs = requests(12);
  std::map<int64_t, std::vector<int32_t>> streamed;
  std::map<int64_t, int> finished;
  auto cb = [&](const TokenEvent& ev) {
    EXPECT_TRUE(ev.error.ok()) << ev.error.message();
    if (ev.token >= 0) streamed[ev.request].push_back(ev.token);
    if (ev.finished) finished[ev.request]++;
  };
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(*(*e)->submit(reqs[i], cb));
  for (int s = 0; s < 5; ++s) ASSERT_TRUE((*e)->step().ok());
  for (int i = 6; i < 12; ++i) ids.push_back(*(*e)->submit(reqs[i], cb));  // join mid-run
  ASSERT_TRUE((*e)->run().ok());
  EXPECT_TRUE((*e)->idle());
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(streamed[ids[i]], reference(*ref_, reqs[i], eo.state)) << "request " << i;
    EXPECT_EQ(*(*e)->output(ids[i]), streamed[ids[i]]);
    EXPECT_EQ(finished[ids[i]], 1);
  }
  const EngineStats& st = (*e)->stats();
  EXPECT_LE(st.max_batch_rows, eo.max_batch_tokens);
  EXPECT_LE(st.max_running, eo.max_running);
  EXPECT_GT(st.max_batch_rows, 1);  // prefill and decode really were mixed
  EXPECT_GT(st.prefill_steps, 0);
  EXPECT_LT(st.prefill_steps, st.steps);  // the last steps only decode
  EXPECT_GT(st.prefill_step_s, 0.0);
  EXPECT_GT(st.decode_step_s, 0.0);
  EXPECT_EQ((*e)->state().n_sequences(), 0);
  EXPECT_EQ((*e)->state().n_pages(), 0);
  EXPECT_EQ((*e)->state().n_checkpoints(), 0);
}

TEST_P(EngineTest, AdmissionWaitsForTheBudget) {
  EngineOptions eo;
  eo.state.exact = true;
  eo.state.window = 4;
  eo.state.page_size = 4;
  eo.prefill_chunk = 4;
  // Room for one request and the start of another.
  {
    auto probe = Engine::create(*backend_, eo);
    ASSERT_TRUE(probe.ok());
    eo.state.state_budget = (*probe)->state().checkpoint_bytes() + 8 * (*probe)->state().page_log_bytes();
  }
  auto e = Engine::create(*backend_, eo);
  ASSERT_TRUE(e.ok());
  const std::vector<RequestParams> reqs = requests(6);
  std::vector<int64_t> ids;
  std::map<int64_t, std::vector<int32_t>> streamed;
  for (const RequestParams& p : reqs)
    ids.push_back(*(*e)->submit(p, [&](const TokenEvent& ev) {
      ASSERT_TRUE(ev.error.ok()) << ev.error.message();
      if (ev.token >= 0) streamed[ev.request].push_back(ev.token);
    }));
  ASSERT_TRUE((*e)->run().ok());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(streamed[ids[i]], reference(*ref_, reqs[i], eo.state));
  EXPECT_LT((*e)->stats().max_running, 6);  // some waited
  EXPECT_LE((*e)->state().stats().state_bytes_peak, eo.state.state_budget);
}

TEST_P(EngineTest, CancelAndBadRequests) {
  auto e = Engine::create(*backend_, EngineOptions{});
  ASSERT_TRUE(e.ok());
  RequestParams p;
  EXPECT_FALSE((*e)->submit(p).ok());  // empty prompt
  p.prompt = {1, 2, 100000};
  EXPECT_FALSE((*e)->submit(p).ok());
  p.prompt = {1, 2, 3};
  p.max_new_tokens = 50;
  p.stop_at_eos = false;
  int ends = 0;
  const int64_t id = *(*e)->submit(p, [&](const TokenEvent& ev) { ends += ev.finished; });
  ASSERT_TRUE((*e)->step().ok());
  ASSERT_TRUE((*e)->step().ok());
  ASSERT_TRUE((*e)->cancel(id).ok());
  EXPECT_FALSE((*e)->cancel(id).ok());
  EXPECT_EQ(ends, 1);
  EXPECT_TRUE((*e)->idle());
  EXPECT_EQ((*e)->output(id)->size(), 2u);
  EXPECT_EQ((*e)->state().n_sequences(), 0);
  EngineOptions bad;
  bad.prefill_chunk = 0;
  EXPECT_FALSE(Engine::create(*backend_, bad).ok());
}

// A callback may cancel another running request mid-step: that request's
// finished event is its last, and its output stops there.
TEST_P(EngineTest, CancelFromACallbackEndsTheOtherRequest) {
  auto e = Engine::create(*backend_, EngineOptions{});
  ASSERT_TRUE(e.ok());
  RequestParams p;
  p.prompt = {1, 2, 3};
  p.max_new_tokens = 20;
  p.stop_at_eos = false;
  std::vector<TokenEvent> b_events;
  Engine::RequestId b = -1;
  int a_tokens = 0;
  const Engine::RequestId a = *(*e)->submit(p, [&](const TokenEvent&) {
    if (++a_tokens == 3) {
      EXPECT_TRUE((*e)->cancel(b).ok());
    }
  });
  b = *(*e)->submit(p, [&](const TokenEvent& ev) { b_events.push_back(ev); });
  ASSERT_TRUE((*e)->run().ok());
  ASSERT_FALSE(b_events.empty());
  EXPECT_TRUE(b_events.back().finished);
  for (size_t i = 0; i + 1 < b_events.size(); ++i) EXPECT_FALSE(b_events[i].finished) << i;
  const size_t b_out = (*e)->output(b)->size();
  EXPECT_EQ(b_out + 1, b_events.size());  // every token event, then the cancel's
  EXPECT_EQ((*e)->output(a)->size(), 20u);
  RequestParams bad = p;
  bad.sampling.temperature = std::nanf("");
  EXPECT_FALSE((*e)->submit(bad).ok());
  bad = p;
  bad.state_budget = -100;
  EXPECT_FALSE((*e)->submit(bad).ok());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineTest, ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny"));

}  // namespace
}  // namespace replayssm
