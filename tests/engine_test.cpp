// Engine: continuous batching must not change any request's tokens —
// requests joining mid-run, chunked prefill mixed with decode, admission
// under a state budget, cancellation, bad requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "workloads/beam_search.h"
#include "workloads/generate.h"
#include "workloads/session.h"
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

// n completions of one request: each is what generate() samples with seed
// + i, streamed with its index, each ending once.
TEST_P(EngineTest, NCompletionsAreTheSeedsSamples) {
  auto e = Engine::create(*backend_, EngineOptions{});
  ASSERT_TRUE(e.ok());
  RequestParams p;
  p.prompt = {4, 8, 15, 16, 23};
  p.max_new_tokens = 7;
  p.stop_at_eos = false;
  p.n = 3;
  p.sampling = {0.9f, 1.0f, 40};
  std::map<int64_t, std::vector<int32_t>> by_index;
  std::map<int64_t, int> ends;
  const int64_t id = *(*e)->submit(p, [&](const TokenEvent& ev) {
    if (ev.token >= 0) by_index[ev.index].push_back(ev.token);
    if (ev.finished) {
      ends[ev.index]++;
      EXPECT_EQ(ev.reason, FinishReason::kLength);
    }
  });
  ASSERT_TRUE((*e)->run().ok());
  auto c = (*e)->completions(id);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->size(), 3u);
  std::set<std::vector<int32_t>> distinct;
  for (int64_t i = 0; i < 3; ++i) {
    RequestParams one = p;
    one.sampling.seed = 40 + static_cast<uint64_t>(i);
    EXPECT_EQ(by_index[i], reference(*ref_, one, EngineOptions{}.state)) << "completion " << i;
    EXPECT_EQ((*c)[size_t(i)].tokens, by_index[i]);
    EXPECT_EQ((*c)[size_t(i)].logprobs.size(), by_index[i].size());
    EXPECT_EQ(ends[i], 1);
    distinct.insert(by_index[i]);
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ((*e)->state().n_sequences(), 0);
}

// best_of: the n best of best_of samples by mean log-probability, reported
// at the end; a beam request: beam_search's best n.
TEST_P(EngineTest, BestOfAndBeamSearchRequests) {
  auto e = Engine::create(*backend_, EngineOptions{});
  ASSERT_TRUE(e.ok());
  RequestParams p;
  p.prompt = {9, 9, 8, 2};
  p.max_new_tokens = 6;
  p.stop_at_eos = false;
  p.n = 2;
  p.best_of = 5;
  p.sampling = {1.0f, 1.0f, 3};
  std::map<int64_t, std::vector<int32_t>> events;
  const int64_t bo = *(*e)->submit(p, [&](const TokenEvent& ev) {
    if (ev.token >= 0) events[ev.index].push_back(ev.token);
  });
  RequestParams q = p;
  q.best_of = 0;
  q.beam_width = 3;
  q.top_logprobs = 2;
  const int64_t bm = *(*e)->submit(q);
  ASSERT_TRUE((*e)->run().ok());
  // best_of: the samples are generate()'s with seeds 3..7; the best two by mean.
  std::vector<std::pair<double, std::vector<int32_t>>> samples;
  BestOfNOptions o;
  o.n = 5;
  o.max_new_tokens = 6;
  o.stop_at_eos = false;
  o.sampling = p.sampling;
  auto all = best_of_n(*ref_, p.prompt, o);
  ASSERT_TRUE(all.ok());
  for (const Hypothesis& h : *all) samples.push_back({h.score, h.tokens});
  std::stable_sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  auto got = (*e)->completions(bo);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*got)[i].tokens, samples[i].second) << "best_of rank " << i;
    EXPECT_NEAR((*got)[i].score, samples[i].first, 1e-4);  // batched with another request: GEMMs round apart
    EXPECT_EQ(events[int64_t(i)], (*got)[i].tokens);
  }
  BeamOptions b;
  b.width = 3;
  b.max_new_tokens = 6;
  b.stop_at_eos = false;
  auto want = beam_search(*ref_, q.prompt, b);
  ASSERT_TRUE(want.ok());
  auto beams = (*e)->completions(bm);
  ASSERT_TRUE(beams.ok());
  ASSERT_EQ(beams->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*beams)[i].tokens, (*want)[i].tokens) << "beam rank " << i;
    EXPECT_NEAR((*beams)[i].score, (*want)[i].score, 1e-4);  // batched with another request: GEMMs round apart
    double sum = 0.0;
    for (double lp : (*beams)[i].logprobs) sum += lp;
    EXPECT_NEAR(sum, (*want)[i].logprob, 1e-4);
    ASSERT_EQ((*beams)[i].top.size(), (*beams)[i].tokens.size());
    for (const std::vector<TokenLogprob>& t : (*beams)[i].top) {
      ASSERT_EQ(t.size(), 2u);
      EXPECT_GE(t[0].logprob, t[1].logprob);
    }
  }
  EXPECT_EQ((*e)->state().n_sequences(), 0);
}

// Stop sequences end a completion (kept in its tokens); top log-probabilities
// come best first with the chosen token's own; n-gram speculation leaves
// greedy tokens as they were.
TEST_P(EngineTest, StopSequencesTopLogprobsAndSpeculation) {
  auto e = Engine::create(*backend_, EngineOptions{});
  ASSERT_TRUE(e.ok());
  RequestParams p;
  p.prompt = {5, 9, 13, 5, 9, 13, 5, 9};
  p.max_new_tokens = 20;
  p.stop_at_eos = false;
  const std::vector<int32_t> plain = reference(*ref_, p, EngineOptions{}.state);
  ASSERT_EQ(plain.size(), 20u);
  RequestParams stop = p;
  const int32_t V = static_cast<int32_t>(model_->config().vocab_size);
  // The second never matches (a token the greedy run does not emit).
  int32_t unused = V - 1;
  while (std::find(plain.begin(), plain.end(), unused) != plain.end()) --unused;
  stop.stop = {{plain[5], plain[6]}, {unused, unused}};
  stop.top_logprobs = 3;
  RequestParams spec = p;
  spec.spec = RequestParams::kNgram;
  spec.spec_tokens = 3;
  std::vector<TokenEvent> stop_events;
  const int64_t a = *(*e)->submit(stop, [&](const TokenEvent& ev) { stop_events.push_back(ev); });
  const int64_t b = *(*e)->submit(spec);
  ASSERT_TRUE((*e)->run().ok());
  // The first occurrence of the pair ends it (it may come before 5).
  size_t end = 0;
  while (end + 1 < plain.size() && !(plain[end] == plain[5] && plain[end + 1] == plain[6])) ++end;
  const std::vector<int32_t> want(plain.begin(), plain.begin() + static_cast<long>(end + 2));
  EXPECT_EQ(*(*e)->output(a), want);
  ASSERT_FALSE(stop_events.empty());
  EXPECT_TRUE(stop_events.back().finished);
  EXPECT_EQ(stop_events.back().reason, FinishReason::kStop);
  for (const TokenEvent& ev : stop_events) {
    ASSERT_EQ(ev.top.size(), 3u);
    EXPECT_EQ(ev.top[0].token, ev.token);  // greedy: the most likely
    EXPECT_DOUBLE_EQ(ev.top[0].logprob, ev.logprob);
    EXPECT_GE(ev.top[0].logprob, ev.top[1].logprob);
    EXPECT_GE(ev.top[1].logprob, ev.top[2].logprob);
  }
  EXPECT_EQ(*(*e)->output(b), plain);
  EXPECT_GT((*e)->stats().spec_drafted, 0);
}

// A budget two requests cannot share once their completions fork apart
// (admission counts one checkpoint a request): the later one is parked,
// its state left to eviction, and resumed by restore; none fails and none's
// tokens change.
TEST_P(EngineTest, PreemptionParksAndResumes) {
  EngineOptions eo;
  eo.state.exact = true;
  eo.state.window = 4;
  eo.state.page_size = 4;
  {
    auto probe = Engine::create(*backend_, eo);
    ASSERT_TRUE(probe.ok());
    // One request of three completions fits; two do not.
    eo.state.state_budget = 4 * (*probe)->state().checkpoint_bytes() + 8 * (*probe)->state().page_log_bytes();
  }
  auto e = Engine::create(*backend_, eo);
  ASSERT_TRUE(e.ok());
  std::vector<RequestParams> reqs;
  std::vector<int64_t> ids;
  std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>> streamed;
  for (int i = 0; i < 3; ++i) {
    RequestParams p;
    p.prompt = {static_cast<int32_t>(3 + i), 7, 11, static_cast<int32_t>(13 + i)};
    p.max_new_tokens = 16;
    p.stop_at_eos = false;
    p.n = 3;
    p.sampling = {0.9f, 1.0f, static_cast<uint64_t>(50 + 10 * i)};
    reqs.push_back(p);
    ids.push_back(*(*e)->submit(p, [&](const TokenEvent& ev) {
      EXPECT_TRUE(ev.error.ok()) << ev.error.message();
      if (ev.token >= 0) streamed[{ev.request, ev.index}].push_back(ev.token);
    }));
  }
  ASSERT_TRUE((*e)->run().ok());
  for (size_t i = 0; i < reqs.size(); ++i)
    for (int64_t k = 0; k < 3; ++k) {
      RequestParams one = reqs[i];
      one.sampling.seed += static_cast<uint64_t>(k);
      EXPECT_EQ((streamed[{ids[i], k}]), reference(*ref_, one, eo.state)) << "request " << i << " completion " << k;
    }
  EXPECT_GT((*e)->stats().preemptions, 0);
  EXPECT_LE((*e)->state().stats().state_bytes_peak, eo.state.state_budget);
  EXPECT_EQ((*e)->state().n_sequences(), 0);
}

// cancel_async from another thread ends the request at the next step.
TEST_P(EngineTest, CancelFromAnotherThread) {
  auto e = Engine::create(*backend_, EngineOptions{});
  ASSERT_TRUE(e.ok());
  RequestParams p;
  p.prompt = {1, 2, 3};
  p.max_new_tokens = 1000;
  p.stop_at_eos = false;
  std::atomic<int> tokens{0};
  FinishReason reason = FinishReason::kNone;
  const int64_t id = *(*e)->submit(p, [&](const TokenEvent& ev) {
    tokens += ev.token >= 0;
    if (ev.finished) reason = ev.reason;
  });
  std::thread other([&] {
    while (tokens.load() < 5) std::this_thread::yield();
    (*e)->cancel_async(id);
  });
  ASSERT_TRUE((*e)->run().ok());
  other.join();
  EXPECT_EQ(reason, FinishReason::kCancelled);
  EXPECT_LT((*e)->output(id)->size(), 1000u);
  EXPECT_EQ((*e)->state().n_sequences(), 0);
}

TEST_P(EngineTest, BadRequestsAreRefusedByField) {
  auto e = Engine::create(*backend_, EngineOptions{});
  ASSERT_TRUE(e.ok());
  RequestParams ok;
  ok.prompt = {1, 2};
  auto refused = [&](RequestParams p, const std::string& field) {
    auto r = (*e)->submit(std::move(p));
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  };
  RequestParams p = ok;
  p.n = 0;
  refused(p, "n must be");
  p = ok;
  p.n = 3, p.best_of = 2;
  refused(p, "best_of");
  p = ok;
  p.beam_width = 2, p.n = 3;
  refused(p, "beam width");
  p = ok;
  p.beam_width = 2, p.spec = RequestParams::kNgram;
  refused(p, "speculation");
  p = ok;
  p.top_logprobs = 21;
  refused(p, "top_logprobs");
  p = ok;
  p.spec = RequestParams::kDraft;
  refused(p, "draft model");
  p = ok;
  p.stop = {{}};
  refused(p, "stop sequence");
  p = ok;
  p.stop = {{1, 1 << 30}};
  refused(p, "stop token id");
  p = ok;
  p.spec = RequestParams::kNgram, p.spec_tokens = 0;
  refused(p, "spec_tokens");
}

// The CPU reference is batch-invariant: a request's log-probabilities in a
// busy batch are bit for bit those it gets alone (fast replay, chunked
// prompts beside other requests' decoding).
TEST_P(EngineTest, BatchedRequestsAreBitIdenticalToAlone) {
  EngineOptions eo;
  eo.max_batch_tokens = 64;
  eo.prefill_chunk = 64;
  const std::vector<RequestParams> reqs = requests(10);
  auto run = [&](const std::vector<RequestParams>& rs) {
    auto e = Engine::create(*backend_, eo);
    EXPECT_TRUE(e.ok());
    std::vector<int64_t> ids;
    for (RequestParams p : rs) {
      p.max_new_tokens = 12;
      p.stop_at_eos = false;
      ids.push_back(*(*e)->submit(p));
    }
    EXPECT_TRUE((*e)->run().ok());
    std::vector<Completion> out;
    for (int64_t id : ids) out.push_back((*(*e)->completions(id))[0]);
    return out;
  };
  const std::vector<Completion> together = run(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::vector<Completion> alone = run({reqs[i]});
    EXPECT_EQ(together[i].tokens, alone[0].tokens) << "request " << i;
    ASSERT_EQ(together[i].logprobs.size(), alone[0].logprobs.size());
    EXPECT_EQ(std::memcmp(together[i].logprobs.data(), alone[0].logprobs.data(),
                          sizeof(double) * alone[0].logprobs.size()),
              0)
        << "request " << i;
  }
}

// prompt_logprobs: one event before the first token, each prompt token's
// log-probability given those before it (the first NaN), with its top
// alternatives — what a prefill of the prompt with every row's logits gives.
TEST_P(EngineTest, PromptLogprobsComeBeforeTheFirstToken) {
  EngineOptions eo;
  eo.prefill_chunk = 3;  // the prompt over several steps
  auto e = Engine::create(*backend_, eo);
  ASSERT_TRUE(e.ok());
  RequestParams p;
  p.prompt = {4, 8, 15, 16, 23, 42, 7};
  p.max_new_tokens = 2;
  p.prompt_logprobs = 2;
  std::vector<TokenEvent> events;
  const int64_t id = *(*e)->submit(p, [&](const TokenEvent& ev) { events.push_back(ev); });
  ASSERT_TRUE((*e)->run().ok());
  ASSERT_GE(events.size(), 2u);
  const TokenEvent& pe = events[0];
  EXPECT_EQ(pe.index, -1);
  ASSERT_EQ(pe.prompt_logprobs.size(), p.prompt.size());
  EXPECT_TRUE(std::isnan(pe.prompt_logprobs[0]));
  // The reference: one prefill, every row's logits.
  auto s = Session::create(*ref_, eo.state);
  ASSERT_TRUE(s.ok());
  const StepInput in{(*s)->state().add_sequence(), p.prompt, true, StepInput::kAll};
  std::vector<float> rows;
  ASSERT_TRUE((*s)->step({&in, 1}, &rows).ok());
  const int64_t V = model_->config().vocab_size;
  for (size_t i = 1; i < p.prompt.size(); ++i) {
    const std::span<const float> row(rows.data() + (i - 1) * V, size_t(V));
    EXPECT_NEAR(pe.prompt_logprobs[i], ops::cpu::log_prob(row, p.prompt[i]), 1e-5) << "prompt token " << i;
    ASSERT_EQ(pe.prompt_top[i].size(), 2u);
    EXPECT_EQ(pe.prompt_top[i][0].token, ops::cpu::top_logprobs(row, 1)[0].token);
  }
  for (size_t i = 1; i < events.size(); ++i) EXPECT_EQ(events[i].index, 0);
  EXPECT_EQ((*e)->output(id)->size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineTest, ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny"));

}  // namespace
}  // namespace replayssm
