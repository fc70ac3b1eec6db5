// The prefix cache: a request that starts like an earlier one takes the
// longest cached prefix at any token — divergence inside a page, inside a
// window, at a checkpoint, one token past it, after eviction — and gets
// what a cold run with the same chunk boundaries gets: bit for bit under
// exact, within float tolerance otherwise. Partitions never share; what
// the cache holds is released when asked, and nothing leaks.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "replayssm/engine.h"
#include "test_util.h"
#include "bench/prefix_bench.h"
#include "workloads/prefix_cache.h"
#include "workloads/session.h"

namespace replayssm {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;
  std::vector<std::vector<TokenLogprob>> top;
  int64_t cached = -1;
};

constexpr int64_t kTop = 5;

// One greedy request through an engine, with its events.
Outcome run(Engine& e, const std::vector<int32_t>& prompt, int64_t n, const std::string& key = "") {
  RequestParams p;
  p.prompt = prompt;
  p.max_new_tokens = n;
  p.stop_at_eos = false;
  p.top_logprobs = kTop;
  p.cache_key = key;
  Outcome out;
  auto id = e.submit(p, [&](const TokenEvent& ev) {
    out.cached = ev.cached_tokens;
    if (ev.token < 0) return;
    out.tokens.push_back(ev.token);
    out.logprobs.push_back(ev.logprob);
    out.top.push_back(ev.top);
  });
  EXPECT_TRUE(id.ok()) << id.status().message();
  const Status st = e.run();
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// The cold run a hit at `m` must equal: the prompt's [0, m) stepped in
// chunks of `chunk` from 0, then [m, P) in chunks of `chunk` from m (the
// engine's boundaries for a request that starts at m), then one token a
// step, greedy.
Outcome cold(Backend& b, const StateOptions& so, const std::vector<int32_t>& prompt, int64_t m, int64_t chunk,
         int64_t n) {
  Outcome out;
  auto s = Session::create(b, so);
  EXPECT_TRUE(s.ok());
  Session& ses = **s;
  const int64_t seq = ses.state().add_sequence();
  const int64_t P = static_cast<int64_t>(prompt.size());
  auto feed = [&](int64_t from, int64_t to) {
    for (int64_t at = from; at < to; at += chunk) {
      const int64_t k = std::min(chunk, to - at);
      const StepInput in{seq, std::span<const int32_t>(prompt).subspan(size_t(at), size_t(k)), true,
                         at + k == P ? StepInput::kLast : StepInput::kNone};
      EXPECT_TRUE(ses.step({&in, 1}).ok());
    }
  };
  feed(0, m);
  feed(m, P);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = 0;
    int32_t t = -1;
    EXPECT_TRUE(b.argmax({&row, 1}, &t).ok());
    double lp = 0;
    EXPECT_TRUE(b.logprobs_of({&row, 1}, {&t, 1}, &lp).ok());
    std::vector<TokenLogprob> top(kTop);
    EXPECT_TRUE(b.top_logprobs({&row, 1}, kTop, top.data()).ok());
    out.tokens.push_back(t);
    out.logprobs.push_back(lp);
    out.top.push_back(top);
    if (i + 1 == n) break;
    const StepInput in{seq, {&out.tokens.back(), 1}, true, StepInput::kLast};
    EXPECT_TRUE(ses.step({&in, 1}).ok());
  }
  EXPECT_TRUE(ses.release(seq).ok());
  return out;
}

void expect_same(const Outcome& a, const Outcome& b, bool exact, const std::string& what) {
  ASSERT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    if (exact) {
      EXPECT_EQ(a.logprobs[i], b.logprobs[i]) << what << " token " << i;
      for (size_t j = 0; j < a.top[i].size(); ++j) {
        EXPECT_EQ(a.top[i][j].token, b.top[i][j].token) << what << " token " << i;
        EXPECT_EQ(a.top[i][j].logprob, b.top[i][j].logprob) << what << " token " << i;
      }
    } else {
      EXPECT_NEAR(a.logprobs[i], b.logprobs[i], 2e-4) << what << " token " << i;
    }
  }
}

class PrefixCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = Model::load(test::data_dir(GetParam()));
    ASSERT_TRUE(m.ok());
    model_ = std::move(m).value();
    backend_ = test::cpu_backend(*model_);
    ref_ = test::cpu_backend(*model_);
  }
  EngineOptions options(bool exact, int64_t chunk) const {
    EngineOptions o;
    o.state.exact = exact;
    o.state.page_size = 4;
    o.state.window = 8;
    o.prefill_chunk = chunk;
    o.max_batch_tokens = 256;
    o.prefix_cache.enabled = true;
    o.prefix_cache.replay_limit = 12;
    return o;
  }
  std::vector<int32_t> tokens(std::mt19937& rng, int64_t n) const {
    std::uniform_int_distribution<int32_t> d(3, 80);  // within both fixtures' vocabularies
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = d(rng);
    return t;
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<cpu::CpuBackend> backend_, ref_;
};

// Divergence at every kind of place: inside a page (page_size 4), inside
// the window (8), at a checkpoint (every 12 tokens kept), one past it, at
// the end of the earlier prompt, and past the earlier completion (a chat's
// next turn).
TEST_P(PrefixCacheTest, AHitIsTheColdRunWithTheSameBoundaries) {
  for (const bool exact : {true, false}) {
    const int64_t chunk = 16;
    auto e = Engine::create(*backend_, options(exact, chunk));
    ASSERT_TRUE(e.ok()) << e.status().message();
    std::mt19937 rng(7);
    const std::vector<int32_t> base = tokens(rng, 40);
    const Outcome first = run(**e, base, 6);
    EXPECT_EQ(first.cached, 0);
    StateOptions so = options(exact, chunk).state;
    for (const int64_t m : {5, 10, 12, 13, 24, 25, 39}) {
      std::vector<int32_t> p(base.begin(), base.begin() + m);
      const std::vector<int32_t> rest = tokens(rng, 9);
      p.insert(p.end(), rest.begin(), rest.end());
      const Outcome hit = run(**e, p, 5);
      EXPECT_EQ(hit.cached, m) << "m = " << m;
      expect_same(hit, cold(*ref_, so, p, m, chunk, 5), exact, "exact " + std::to_string(exact) + " m " + std::to_string(m));
    }
    // The next turn: the first prompt, its completion and more.
    std::vector<int32_t> turn = base;
    turn.insert(turn.end(), first.tokens.begin(), first.tokens.end() - 1);  // the last was never fed
    const std::vector<int32_t> more = tokens(rng, 7);
    turn.insert(turn.end(), more.begin(), more.end());
    const Outcome next = run(**e, turn, 4);
    const int64_t m = static_cast<int64_t>(base.size() + first.tokens.size() - 1);
    EXPECT_EQ(next.cached, m);
    expect_same(next, cold(*ref_, so, turn, m, chunk, 4), exact, "next turn");
    EXPECT_GT((*e)->stats().prefix_hits, 0);
    EXPECT_EQ((*e)->stats().prefix_hit_tokens, 5 + 10 + 12 + 13 + 24 + 25 + 39 + m);
  }
}

// Random streams of requests sharing prefixes, some over a cache budget
// small enough to release entries (later hits are shorter or cold), all
// equal to their cold runs; nothing outlives the cache.
TEST_P(PrefixCacheTest, RandomStreamsUnderABudget) {
  const int64_t chunk = 8;
  for (const int64_t max_bytes : {int64_t{0}, int64_t{1} << 20}) {
    EngineOptions o = options(true, chunk);
    o.prefix_cache.max_bytes = max_bytes;
    auto e = Engine::create(*backend_, o);
    ASSERT_TRUE(e.ok());
    std::mt19937 rng(11 + static_cast<unsigned>(max_bytes));
    std::vector<std::vector<int32_t>> seen;
    for (int i = 0; i < 14; ++i) {
      std::vector<int32_t> p;
      if (!seen.empty() && rng() % 4 != 0) {
        const std::vector<int32_t>& from = seen[rng() % seen.size()];
        p.assign(from.begin(), from.begin() + 1 + static_cast<long>(rng() % from.size()));
      }
      const std::vector<int32_t> rest = tokens(rng, 1 + static_cast<int64_t>(rng() % 20));
      p.insert(p.end(), rest.begin(), rest.end());
      const Outcome hit = run(**e, p, 3);
      ASSERT_GE(hit.cached, 0);
      EXPECT_LT(hit.cached, static_cast<int64_t>(p.size()));
      expect_same(hit, cold(*ref_, o.state, p, hit.cached, chunk, 3), true,
                  "request " + std::to_string(i) + " cached " + std::to_string(hit.cached));
      seen.push_back(p);
    }
    const EngineStats& s = (*e)->stats();
    EXPECT_GT(s.prefix_hits, 0);
    if (max_bytes > 0) {
      EXPECT_GT(s.prefix_evictions, 0);
      EXPECT_LE(s.prefix_state_bytes + s.prefix_kv_bytes, max_bytes);
    }
    // Only the cache holds sequences now.
    EXPECT_EQ((*e)->state().n_sequences(), s.prefix_entries);
  }
  // Every engine gone: the backend's sessions released everything.
  auto e = Engine::create(*backend_, options(true, chunk));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->state().n_sequences(), 0);
}

// Keys partition the cache: the same prompt under another key is cold.
TEST_P(PrefixCacheTest, KeysNeverShare) {
  auto e = Engine::create(*backend_, options(false, 16));
  ASSERT_TRUE(e.ok());
  std::mt19937 rng(3);
  const std::vector<int32_t> p = tokens(rng, 20);
  EXPECT_EQ(run(**e, p, 2, "tenant-a").cached, 0);
  EXPECT_EQ(run(**e, p, 2, "tenant-b").cached, 0);
  EXPECT_EQ(run(**e, p, 2, "tenant-a").cached, 19);  // all but the last prompt token
  EXPECT_EQ(run(**e, p, 2, "tenant-b").cached, 19);
  EXPECT_EQ(run(**e, p, 2, "").cached, 0);
}

// The radix tree alone: longest match at any token, an entry released when
// a longer one extends it, a prefix of an entry not stored twice, release
// on request, and a cache that gives back every byte.
TEST_P(PrefixCacheTest, TreeEntriesAndRelease) {
  StateOptions so;
  so.page_size = 4;
  auto s = Session::create(*backend_, so);
  ASSERT_TRUE(s.ok());
  Session& ses = **s;
  PrefixCacheOptions po;
  po.enabled = true;
  po.replay_limit = 8;
  auto prefill = [&](const std::vector<int32_t>& t) {
    const int64_t seq = ses.state().add_sequence();
    const StepInput in{seq, t, true, StepInput::kNone};
    EXPECT_TRUE(ses.step({&in, 1}).ok());
    return seq;
  };
  {
    PrefixCache cache(ses, po);
    const std::vector<int32_t> a = {5, 6, 7, 8, 9, 10, 11, 12}, b = {5, 6, 7, 30, 31};
    int64_t sa = prefill(a), sb = prefill(b);
    ASSERT_TRUE(cache.insert("k", sa, 8).ok());
    ASSERT_TRUE(cache.insert("k", sb, 5).ok());
    EXPECT_EQ(cache.entries(), 2);
    ASSERT_TRUE(ses.release(sa).ok());
    ASSERT_TRUE(ses.release(sb).ok());
    EXPECT_EQ(cache.lookup("k", std::vector<int32_t>{5, 6, 7, 8, 9, 99}).length, 5);
    EXPECT_EQ(cache.lookup("k", std::vector<int32_t>{5, 6, 7, 30, 31, 32, 33}).length, 5);
    EXPECT_EQ(cache.lookup("k", std::vector<int32_t>{5, 6, 7, 1}).length, 3);  // the branch point
    EXPECT_EQ(cache.lookup("k", std::vector<int32_t>{5, 6, 7}).length, 2);     // not the last token
    EXPECT_EQ(cache.lookup("k", std::vector<int32_t>{4, 6}).seq, -1);
    EXPECT_EQ(cache.lookup("other", std::vector<int32_t>{5, 6, 7, 8}).seq, -1);
    // A prefix of an entry is not stored again; an extension replaces it.
    const int64_t sc = prefill({5, 6, 7, 8});
    ASSERT_TRUE(cache.insert("k", sc, 4).ok());
    EXPECT_EQ(cache.entries(), 2);
    const int64_t sd = prefill({5, 6, 7, 30, 31, 40, 41});
    ASSERT_TRUE(cache.insert("k", sd, 7).ok());
    EXPECT_EQ(cache.entries(), 2);
    ASSERT_TRUE(ses.release(sc).ok());
    ASSERT_TRUE(ses.release(sd).ok());
    EXPECT_EQ(cache.lookup("k", std::vector<int32_t>{5, 6, 7, 30, 31, 40, 41, 42}).length, 7);
    EXPECT_EQ(ses.state().n_sequences(), 2);
    EXPECT_GT(cache.bytes().kv, 0);
    auto freed = cache.free_bytes(1);
    ASSERT_TRUE(freed.ok());
    EXPECT_GT(*freed, 0);
    EXPECT_EQ(cache.entries(), 1);
    EXPECT_EQ(ses.state().n_sequences(), 1);
    // The tree stays whole for the entry left.
    const auto h = cache.lookup("k", std::vector<int32_t>{5, 6, 7, 30, 31, 40, 41, 42});
    const auto g = cache.lookup("k", std::vector<int32_t>{5, 6, 7, 8, 9, 10, 11, 12, 13});
    EXPECT_TRUE(h.length == 7 || g.length == 8) << h.length << " " << g.length;
  }
  EXPECT_EQ(ses.state().n_sequences(), 0);
  EXPECT_EQ(ses.state().n_pages(), 0);
  EXPECT_EQ(ses.state().n_checkpoints(), 0);
  EXPECT_EQ(ses.state().stats().state_bytes, 0);
  EXPECT_EQ(ses.state().stats().kv_bytes, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PrefixCacheTest, ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny"));

}  // namespace
}  // namespace replayssm

namespace replayssm::bench {
namespace {

// The prefix workload at small scale: every rule runs every scenario with
// all its requests; hits at any token reuse at least what the other rules
// do, nearly the ideal, and none reuses nothing.
TEST(PrefixBench, RulesRankAsTheirHitPositionsAllow) {
  auto m = Model::load(test::data_dir("nemotron_h_tiny"));
  ASSERT_TRUE(m.ok());
  auto backend = test::cpu_backend(**m);
  PrefixBenchOptions o;
  o.scale = 0.04;
  o.reply = 6;
  o.in_flight = 4;
  o.probes = 2;
  o.state.page_size = 4;
  auto rows = run_prefix_bench(*backend, o);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 12u);
  std::map<std::string, std::map<std::string, PrefixBenchRow>> by;
  for (const PrefixBenchRow& r : *rows) by[r.scenario][r.mode] = r;
  for (auto& [scenario, rule] : by) {
    EXPECT_EQ(rule["none"].reused_tokens, 0) << scenario;
    EXPECT_GE(rule["any"].reused_tokens, rule["node"].reused_tokens) << scenario;
    EXPECT_GE(rule["any"].reused_tokens, rule["block"].reused_tokens) << scenario;
    EXPECT_GT(rule["any"].hits, 0) << scenario;
    EXPECT_GE(rule["any"].ideal_ratio, 0.95) << scenario;
    EXPECT_LE(rule["any"].reused_tokens, rule["any"].ideal_tokens) << scenario;
    EXPECT_EQ(rule["any"].requests, rule["none"].requests) << scenario;
    EXPECT_GT(rule["any"].ttft_p50, 0.0) << scenario;
  }
  // Few-shot prefixes end inside the examples: per-node hits stop at the
  // branch points, block-aligned ones find no 512-token block at all.
  EXPECT_GT(by["fewshot"]["any"].reused_tokens, by["fewshot"]["node"].reused_tokens);
  EXPECT_EQ(by["fewshot"]["block"].reused_tokens, 0);
  EXPECT_NE(prefix_bench_table(*rows).find("fewshot  any"), std::string::npos);
  o.modes = {"nearest"};
  EXPECT_FALSE(run_prefix_bench(*backend, o).ok());
}

}  // namespace
}  // namespace replayssm::bench
