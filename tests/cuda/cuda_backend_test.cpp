// The CUDA backend (src/backend/cuda) end to end, skipped where no GPU is
// visible. The reference is the CPU backend on the same bf16 matrices (a
// copy of the model rounded as DeviceModel rounds it), planned as the CUDA
// backend is (its units, so both managers emit the same plans): what
// remains is activation rounding, held to these bounds
// (cuda_test_util.h: kFixtureRatio on the tiny fixtures, which amplify
// bf16 noise, kTrainedRatio on the trained models, whose argmax must agree
// wherever the CPU's top-2 gap is clear).
//
//   - prompts in chunks and decoding, through the replay kernels and (with
//     the decode path off) the chunk scans alone;
//   - one step mixing a decoding token, a verify's drafts and a prompt chunk;
//   - forks sharing pages (copy-on-write copies of pages and logs) and a
//     snapshot fork's checkpoint copy, read back with read_state: the
//     parent's state unchanged bit for bit, the child's equal to it;
//   - restore(p) by checkpoint and log replay;
//   - exact plans bit for bit what stepping gives (replay-exact against the
//     snapshot strategy, whose plans step every token);
//   - the reads (argmax, top log-probabilities, draws, log-probabilities of
//     given tokens) on random rows against ops/cpu/sampling.h's rule;
//   - the units the manager counts, and the refusal of a page size the
//     kernels cannot read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../backend_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "gpu_and_reference.h"
#include "ops/cpu/sampling.h"
#include "replayssm/make_backend.h"
#include "workloads/session.h"

namespace replayssm {
namespace {

StateOptions opts(Strategy s, int64_t w, bool exact, int64_t page, int64_t retention = 0) {
  StateOptions o;
  o.strategy = s, o.window = w, o.exact = exact, o.page_size = page, o.log_retention = retention;
  return o;
}

// The model on the GPU, and its CPU reference on the same bf16 matrices.
class CudaBackendTest : public test::GpuAndReferenceTest {
 protected:
  bool trained() const { return GetParam().rfind("models/", 0) == 0; }
  float bound() const { return trained() ? test::kTrainedRatio : test::kFixtureRatio; }
  int32_t token(std::mt19937& g) const { return int32_t(g() % uint32_t(model_->config().vocab_size)); }

  // One step on both sessions; every kept row compared (worst ratio kept,
  // argmax where the CPU's gap is clear).
  void step_both(Session& a, Session& b, std::span<const StepInput> in, const std::string& what) {
    std::vector<float> la, lb;
    const Status sa = a.step(in, &la), sb = b.step(in, &lb);
    ASSERT_TRUE(sa.ok() && sb.ok()) << what << ": " << sa.message() << " / " << sb.message();
    const size_t V = size_t(model_->config().vocab_size);
    ASSERT_EQ(la.size(), lb.size()) << what;
    for (size_t r = 0; r * V < la.size(); ++r) {
      const std::vector<float> x(la.begin() + int64_t(r * V), la.begin() + int64_t((r + 1) * V));
      const std::vector<float> y(lb.begin() + int64_t(r * V), lb.begin() + int64_t((r + 1) * V));
      worst_ = std::max(worst_, test::worst_row_ratio(x, y));
      std::vector<float> top(y);
      std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
      if (trained() && top[0] - top[1] >= 0.5f) {
        ++clear_;
        EXPECT_EQ(std::max_element(x.begin(), x.end()) - x.begin(), std::max_element(y.begin(), y.end()) - y.begin())
            << what << " row " << r;
      }
    }
    ++steps_;
  }
  void expect_close(const std::string& what) {
    std::printf("  %s %s: %d steps, worst |d|/(%.0e(1+|ref|)) %.3f, %d clear argmaxes\n", GetParam().c_str(),
                what.c_str(), steps_, test::kLogitTol, worst_, clear_);
    EXPECT_LE(worst_, bound()) << what;
    worst_ = 0.0f, steps_ = 0, clear_ = 0;
  }

  float worst_ = 0.0f;
  int steps_ = 0, clear_ = 0;
};

// A prompt in chunks (the scans: 17 and 23 tokens), then one token a step
// (the replay kernels, folding every 4), under replay and snapshot.
TEST_P(CudaBackendTest, PrefillAndDecodeMatchTheCpu) {
  for (const StateOptions& so : {opts(Strategy::kReplay, 4, false, 4), opts(Strategy::kReplay, 16, true, 1),
                                 opts(Strategy::kSnapshot, 8, false, 4), opts(Strategy::kRecompute, 8, false, 2)}) {
    auto a = Session::create(*gpu_, so);
    auto b = Session::create(*ref_, so);
    ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status().message() : a.status().message());
    const int64_t s = (*a)->state().add_sequence();
    (*b)->state().add_sequence();
    std::mt19937 g(3);
    std::vector<int32_t> toks;
    for (int i = 0; i < 40; ++i) toks.push_back(token(g));
    for (auto [at, n] : {std::pair<size_t, size_t>{0, 17}, {17, 23}}) {
      const StepInput in{s, std::span<const int32_t>(toks).subspan(at, n), true, StepInput::kAll};
      step_both(**a, **b, {&in, 1}, "prompt chunk at " + std::to_string(at));
    }
    for (int i = 0; i < 12; ++i) {
      const int32_t t = token(g);
      const StepInput in{s, {&t, 1}};
      step_both(**a, **b, {&in, 1}, "decode " + std::to_string(i));
    }
    expect_close(std::string(strategy_name(so.strategy)) + (so.exact ? " exact" : ""));
  }
}

// The same through the chunk scans alone (no slice takes the decode
// kernels): every state of the plan from the scans and their log-only folds.
TEST_P(CudaBackendTest, ScansAloneMatchTheCpu) {
  cuda::CudaBackendOptions o;
  o.limits.decode_tokens = 0;
  auto scans = cuda::CudaBackend::create(*model_, o);
  ASSERT_TRUE(scans.ok()) << scans.status().message();
  test::PlannedAs ref(*cpu_, **scans);
  const StateOptions so = opts(Strategy::kReplay, 4, false, 2, -1);
  auto a = Session::create(**scans, so);
  auto b = Session::create(ref, so);
  ASSERT_TRUE(a.ok() && b.ok());
  const int64_t s = (*a)->state().add_sequence();
  (*b)->state().add_sequence();
  std::mt19937 g(4);
  for (int i = 0; i < 14; ++i) {
    std::vector<int32_t> t(static_cast<size_t>(1 + i % 5));
    for (int32_t& x : t) x = token(g);
    const StepInput in{s, t, true, StepInput::kAll};
    step_both(**a, **b, {&in, 1}, "step " + std::to_string(i));
  }
  expect_close("scans alone");
}

// A decoding token, a verify's uncommitted drafts and a prompt chunk in one
// step (the decode kernels at T = 1 and T = 4, the scans), then each again.
TEST_P(CudaBackendTest, MixedBatchMatchesTheCpu) {
  const StateOptions so = opts(Strategy::kReplay, 6, false, 4);
  auto a = Session::create(*gpu_, so);
  auto b = Session::create(*ref_, so);
  ASSERT_TRUE(a.ok() && b.ok());
  std::mt19937 g(5);
  std::vector<int64_t> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back((*a)->state().add_sequence()), (*b)->state().add_sequence();
  std::vector<std::vector<int32_t>> prompts(3);
  for (size_t i = 0; i < 3; ++i)
    for (int j = 0; j < 9 + 4 * int(i); ++j) prompts[i].push_back(token(g));
  std::vector<StepInput> in;
  for (size_t i = 0; i < 2; ++i) in.push_back({seqs[i], prompts[i]});
  step_both(**a, **b, in, "prompts");
  for (int round = 0; round < 6; ++round) {
    std::vector<int32_t> one = {token(g)}, drafts = {token(g), token(g), token(g), token(g)}, chunk;
    for (int j = 0; j < 11; ++j) chunk.push_back(token(g));
    in = {{seqs[0], one}, {seqs[1], drafts, false, StepInput::kAll}, {seqs[2], chunk, true, StepInput::kAll}};
    step_both(**a, **b, in, "mixed round " + std::to_string(round));
    // The drafts' first two accepted, the rest rolled back.
    const int64_t keep = (*a)->state().committed(seqs[1]) + 2;
    ASSERT_TRUE((*a)->state().truncate(seqs[1], keep).ok() && (*b)->state().truncate(seqs[1], keep).ok());
    ASSERT_TRUE((*a)->state().commit(seqs[1], 2).ok() && (*b)->state().commit(seqs[1], 2).ok());
  }
  expect_close("mixed batches");
}

// Forks: children share the parent's pages and checkpoint, their first
// steps copy the shared partial page with its log; the parent's state
// reads back unchanged, bit for bit, and a snapshot fork's copied
// checkpoint reads back as its parent's.
TEST_P(CudaBackendTest, ForksSharePagesAndCopiesRoundTrip) {
  for (const StateOptions& so : {opts(Strategy::kReplay, 16, false, 4), opts(Strategy::kSnapshot, 8, false, 4)}) {
    auto a = Session::create(*gpu_, so);
    auto b = Session::create(*ref_, so);
    ASSERT_TRUE(a.ok() && b.ok());
    const int64_t p = (*a)->state().add_sequence();
    (*b)->state().add_sequence();
    std::mt19937 g(6);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 10; ++i) prompt.push_back(token(g));
    const StepInput in{p, prompt};
    step_both(**a, **b, {&in, 1}, "prompt");
    auto read_all = [&](int64_t seq) {
      std::vector<std::vector<float>> out;
      auto rp = (*a)->state().read_plan(seq);
      EXPECT_TRUE(rp.ok()) << rp.status().message();
      if (!rp.ok()) return out;
      for (size_t l = 0; l < gpu_->cache_spec().layers.size(); ++l) {
        if (gpu_->cache_spec().layers[l].kind == CacheLayerSpec::kAttention) continue;
        std::vector<float> w, st;
        const Status r = gpu_->read_state(*rp, int(l), &w, &st);
        EXPECT_TRUE(r.ok()) << "layer " << l << ": " << r.message();
        out.push_back(w), out.push_back(st);
      }
      return out;
    };
    const auto parent_before = read_all(p);
    std::vector<int64_t> kids;
    for (int k = 0; k < 3; ++k) {
      auto x = (*a)->state().fork(p);
      auto y = (*b)->state().fork(p);
      ASSERT_TRUE(x.ok() && y.ok());
      ASSERT_EQ(*x, *y);
      kids.push_back(*x);
    }
    ASSERT_TRUE((*a)->flush().ok() && (*b)->flush().ok());  // a snapshot fork's checkpoint copies
    EXPECT_EQ(read_all(kids[0]), parent_before) << strategy_name(so.strategy) << ": a fork reads as its parent";
    std::vector<std::vector<int32_t>> t(3);
    std::vector<StepInput> steps;
    for (int k = 0; k < 3; ++k) {
      t[size_t(k)] = {token(g), token(g)};
      steps.push_back({kids[size_t(k)], t[size_t(k)]});
    }
    // The parent's windows are copied rows, bit for bit; its state may have
    // moved onto a checkpoint its family wrote at the branch (folded by
    // another kernel, within fp32 rounding).
    auto same = [&](const std::vector<std::vector<float>>& x, const std::string& what) {
      ASSERT_EQ(x.size(), parent_before.size()) << what;
      for (size_t i = 0; i < x.size(); ++i)
        for (size_t j = 0; j < x[i].size(); ++j)
          if (i % 2 == 0) {
            ASSERT_EQ(x[i][j], parent_before[i][j]) << what << ": window " << i / 2 << " element " << j;
          } else {
            ASSERT_TRUE(test::close(x[i][j], parent_before[i][j], test::kStateTol))
                << what << ": state " << i / 2 << " element " << j;
          }
    };
    for (int r = 0; r < 4; ++r) step_both(**a, **b, steps, "children's step " + std::to_string(r));
    same(read_all(p), std::string(strategy_name(so.strategy)) + ": the parent's state after its children's steps");
    // A fork inside a page: its first step copies that page and its log.
    auto mid = (*a)->state().fork(p, 6);
    auto mid_b = (*b)->state().fork(p, 6);
    ASSERT_TRUE(mid.ok() && mid_b.ok());
    const StepInput m{*mid, t[0]};
    step_both(**a, **b, {&m, 1}, "a fork at 6");
    same(read_all(p), std::string(strategy_name(so.strategy)) + ": the parent's state after a fork inside a page");
    expect_close(std::string("forks, ") + strategy_name(so.strategy));
  }
}

// restore(p) back into the log: the state at p rebuilt from a checkpoint
// and the log (every log kept), then decoding on from there.
TEST_P(CudaBackendTest, RestoreReplaysTheLog) {
  const StateOptions so = opts(Strategy::kReplay, 4, false, 2, -1);
  auto a = Session::create(*gpu_, so);
  auto b = Session::create(*ref_, so);
  ASSERT_TRUE(a.ok() && b.ok());
  const int64_t s = (*a)->state().add_sequence();
  (*b)->state().add_sequence();
  std::mt19937 g(7);
  for (int i = 0; i < 20; ++i) {
    const int32_t t = token(g);
    const StepInput in{s, {&t, 1}};
    step_both(**a, **b, {&in, 1}, "decode " + std::to_string(i));
  }
  for (int64_t p : {17, 13, 11, 6}) {  // each after 3 tokens past the last
    auto x = (*a)->restore(s, p);
    auto y = (*b)->restore(s, p);
    ASSERT_TRUE(x.ok() && y.ok()) << "restore(" << p << "): " << (x.ok() ? y.status().message() : x.status().message());
    EXPECT_EQ(int(x->path), int(y->path));
    for (int i = 0; i < 3; ++i) {
      const int32_t t = token(g);
      const StepInput in{s, {&t, 1}};
      step_both(**a, **b, {&in, 1}, "after restore(" + std::to_string(p) + ")");
    }
  }
  EXPECT_GT((*a)->state().stats().restores_log_replay, 0);
  expect_close("restore");
}

// Exact plans: the state rebuilt from a checkpoint and its log has the bits
// stepping gives. Replay-exact (the log replayed by the sequential
// recurrence, a checkpoint every 4 tokens) against snapshot (every plan
// steps one state per token): the same step shapes, bit for bit.
TEST_P(CudaBackendTest, ExactModeIsBitIdenticalToStepping) {
  std::vector<std::vector<float>> rows[2];
  const StateOptions strategies[2] = {opts(Strategy::kReplay, 4, true, 4), opts(Strategy::kSnapshot, 4, false, 4)};
  for (int k = 0; k < 2; ++k) {
    auto a = Session::create(*gpu_, strategies[k]);
    ASSERT_TRUE(a.ok());
    const int64_t s = (*a)->state().add_sequence();
    std::mt19937 g(8);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 6; ++i) prompt.push_back(token(g));
    std::vector<float> l;
    const StepInput in{s, prompt, true, StepInput::kAll};
    ASSERT_TRUE((*a)->step({&in, 1}, &l).ok());
    rows[k].push_back(l);
    for (int i = 0; i < 14; ++i) {
      const int32_t t = token(g);
      const StepInput one{s, {&t, 1}};
      ASSERT_TRUE((*a)->step({&one, 1}, &l).ok());
      rows[k].push_back(l);
    }
  }
  ASSERT_EQ(rows[0].size(), rows[1].size());
  for (size_t i = 0; i < rows[0].size(); ++i) EXPECT_EQ(rows[0][i], rows[1][i]) << "step " << i;
}

// Units: what one checkpoint part, one log entry, one token's K/V rows take
// in this layout; the memory the pools hold covers what the manager counts.
TEST_P(CudaBackendTest, UnitsAndMemoryFollowTheLayout) {
  const StateOptions so = opts(Strategy::kReplay, 4, false, 4);
  const StateUnits u = gpu_->units(so);
  const CacheSpec& spec = gpu_->cache_spec();
  size_t i = 0;
  int64_t kv = 0;
  for (const CacheLayerSpec& l : spec.layers) {
    if (l.kind == CacheLayerSpec::kAttention) {
      kv += 4 * l.n_kv_heads * l.head_dim;
      continue;
    }
    const int64_t C = l.conv_channels, H = l.n_heads, R = l.state_rows, Cc = l.state_cols;
    EXPECT_EQ(u.checkpoint_part[i], 4 * H * R * Cc + 2 * (l.conv_width - 1) * C);
    const int64_t entry = l.kind == CacheLayerSpec::kMamba2 ? 2 * H * R + (C - H * R) + 4 * H + 2 * C
                                                            : (C - H * Cc) + 4 * H * Cc + 4 * H + 2 * C;
    EXPECT_EQ(u.log_entry[i], entry);
    ++i;
  }
  EXPECT_EQ(u.kv_row, kv);
  auto a = Session::create(*gpu_, so);
  ASSERT_TRUE(a.ok());
  const int64_t s = (*a)->state().add_sequence();
  std::vector<int32_t> prompt(30, 3);
  const StepInput in{s, prompt};
  ASSERT_TRUE((*a)->step({&in, 1}).ok());
  const BackendMemory m = gpu_->memory();
  EXPECT_GE(m.state_bytes, (*a)->state().stats().state_bytes);
  EXPECT_GE(m.kv_bytes, (*a)->state().stats().kv_bytes);
  EXPECT_GT(m.weights_bytes, 0);
  StateOptions three = so;
  three.page_size = 3;
  const Status st = gpu_->check_options(three);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--page-size"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Models, CudaBackendTest,
                         ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny", "nemotron_h_legacy_f16", "qwen3_5_vl_tied",
                                           "models/nemotron_h_small", "models/qwen3_5_small"),
                         test::model_param_name);

// The reads on random rows against the host's rule (ops/cpu/sampling.h).
TEST(CudaBackendReads, ReadsFollowTheCpuRule) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto m = Model::load(test::fixture("qwen3_5_tiny"));
  ASSERT_TRUE(m.ok());
  auto made = cuda::CudaBackend::create(**m);
  ASSERT_TRUE(made.ok()) << made.status().message();
  cuda::CudaBackend* b = made->get();
  const int64_t V = 2053, rows = 9;  // a vocabulary of its own: the reads take any row width
  cuda::DeviceLogits dl(V);
  std::mt19937 g(11);
  std::normal_distribution<float> n(0.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(rows * V));
  for (float& v : x) v = n(g);
  for (int64_t i = 0; i < 40; ++i) x[size_t(4 * V + (i * 37) % V)] = 9.5f;  // ties at the top of row 4
  for (int64_t i = 0; i < V; ++i) x[size_t(7 * V + i)] = float(i % 3);      // a row of three values
  ASSERT_TRUE(dl.load(x, rows, b->stream()).ok());
  auto row = [&](int64_t r) { return std::span<const float>(x).subspan(size_t(r * V), size_t(V)); };
  std::vector<int64_t> all(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) all[size_t(r)] = r;
  std::vector<int32_t> am(static_cast<size_t>(rows));
  ASSERT_TRUE(dl.argmax(all, am.data(), b->stream()).ok());
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(am[size_t(r)], ops::cpu::argmax(row(r))) << "row " << r;
  for (int64_t k : {int64_t(1), int64_t(7), int64_t(1100)}) {  // 1100: past the kernel's k, the host's rule
    std::vector<TokenLogprob> got(static_cast<size_t>(rows * k));
    ASSERT_TRUE(dl.top_logprobs(all, k, got.data(), b->stream()).ok());
    for (int64_t r = 0; r < rows; ++r) {
      const auto want = ops::cpu::top_logprobs(row(r), k);
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(got[size_t(r * k + j)].token, want[size_t(j)].token) << "row " << r << " k " << k << " rank " << j;
        EXPECT_NEAR(got[size_t(r * k + j)].logprob, want[size_t(j)].logprob, 1e-9);
      }
    }
  }
  // logprobs_of: the CPU's log_prob, and on the device top_logprobs' very number.
  std::vector<int32_t> tok(static_cast<size_t>(rows));
  std::vector<double> lp(static_cast<size_t>(rows));
  std::vector<TokenLogprob> top(static_cast<size_t>(rows));
  ASSERT_TRUE(dl.top_logprobs(all, 1, top.data(), b->stream()).ok());
  for (int64_t r = 0; r < rows; ++r) tok[size_t(r)] = top[size_t(r)].token;
  ASSERT_TRUE(dl.logprobs_of(all, tok, lp.data(), b->stream()).ok());
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(lp[size_t(r)], top[size_t(r)].logprob) << "row " << r;
    EXPECT_NEAR(lp[size_t(r)], ops::cpu::log_prob(row(r), tok[size_t(r)]), 1e-9);
  }
  // Draws: the CPU's token at the same uniform, over temperatures and top-p
  // (a request's own in each), and log_prob's log-probability.
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<SampleRequest> req;
  for (int i = 0; i < 300; ++i) {
    SampleRequest q;
    q.row = int64_t(g() % uint32_t(rows));
    q.params.temperature = std::vector<float>{0.0f, 0.4f, 1.0f, 1.7f}[size_t(i % 4)];
    q.params.top_p = std::vector<float>{1.0f, 0.9f, 0.5f}[size_t((i / 4) % 3)];
    q.r = u(g);
    req.push_back(q);
  }
  std::vector<int32_t> ids(req.size());
  std::vector<double> lps(req.size());
  ASSERT_TRUE(dl.sample(req, ids.data(), lps.data(), b->stream()).ok());
  int same = 0;
  for (size_t i = 0; i < req.size(); ++i) {
    const int32_t want = ops::cpu::sample_at(row(req[i].row), req[i].params, req[i].r);
    same += ids[i] == want;
    EXPECT_EQ(ids[i], want) << "request " << i;
    EXPECT_NEAR(lps[i], ops::cpu::log_prob(row(req[i].row), ids[i]), 1e-9);
  }
  EXPECT_EQ(same, int(req.size()));
  // Refusals, by name.
  const int64_t bad[1] = {rows};
  EXPECT_FALSE(dl.argmax(bad, am.data(), b->stream()).ok());
  EXPECT_FALSE(dl.top_logprobs(all, V + 1, top.data(), b->stream()).ok());
  SampleRequest q;
  q.r = 1.0;
  EXPECT_FALSE(dl.sample({&q, 1}, ids.data(), lps.data(), b->stream()).ok());
}

// make_backend names cuda exactly where it can run.
TEST(CudaBackendFactory, MakeBackendNamesCudaWhereAGpuIs) {
  const std::vector<std::string> names = backend_names();
  const bool listed = std::find(names.begin(), names.end(), "cuda") != names.end();
  EXPECT_EQ(listed, test::have_gpu());
  auto m = Model::load(test::fixture("nemotron_h_tiny"));
  ASSERT_TRUE(m.ok());
  auto b = make_backend("cuda", **m);
  EXPECT_EQ(b.ok(), test::have_gpu()) << (b.ok() ? "" : b.status().message());
  if (b.ok()) {
    EXPECT_STREQ((*b)->name(), "cuda");
  }
}

}  // namespace
}  // namespace replayssm
