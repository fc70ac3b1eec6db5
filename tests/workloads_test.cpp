// Branching workloads over the state manager and the CPU backend: speculative decoding reproduces greedy
// decoding under every strategy; rejection sampling preserves the target's
// distribution; beam search equals a brute-force beam search and beam 1 is
// greedy; best-of-n is reproducible.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <random>

#include "workloads/beam_search.h"
#include "workloads/generate.h"
#include "workloads/speculative.h"
#include "backend/cpu/dense_cache.h"
#include "test_util.h"

namespace replayssm {
namespace {

std::unique_ptr<Model> load(const std::string& name) {
  auto m = Model::load(test::data_dir(name));
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

std::vector<StateOptions> strategies() {
  std::vector<StateOptions> out;
  for (Strategy s : {Strategy::kReplay, Strategy::kSnapshot, Strategy::kRecompute}) {
    StateOptions o;
    o.strategy = s;
    o.window = 5;
    o.page_size = 4;
    out.push_back(o);
  }
  out[0].exact = true;
  StateOptions fast = out[0];
  fast.exact = false;
  out.push_back(fast);
  return out;
}

struct Pair {
  std::string target, draft;
};

class Speculative : public ::testing::TestWithParam<Pair> {};

// Greedy speculation emits exactly greedy decoding's tokens, whatever the
// drafts and whatever the storage strategy; drafting from the target itself
// accepts everything, a different model mostly nothing — both paths run.
TEST_P(Speculative, GreedyEqualsGreedyDecoding) {
  auto target = load(GetParam().target), other = load(GetParam().draft);
  // The target, itself as a draft (a second backend over it: one session
  // each) and another model, each on the CPU backend.
  auto tb = test::cpu_backend(*target), self = test::cpu_backend(*target), ob = test::cpu_backend(*other);
  // A repetitive prompt so that n-gram lookup finds drafts.
  const std::vector<int32_t> prompt = {5, 9, 13, 5, 9, 13, 5, 9, 13, 5, 9};
  for (const StateOptions& so : strategies()) {
    GenerateOptions plain;
    plain.max_new_tokens = 24;
    plain.stop_at_eos = false;
    plain.state = so;
    auto ref = generate(*tb, prompt, plain);
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    struct Case {
      const char* name;
      SpecOptions spec;
    };
    std::vector<Case> cases = {{"ngram", {SpecOptions::kNgram, 4}},
                               {"self-draft", {SpecOptions::kDraft, 3, 3, self.get()}},
                               {"other-draft", {SpecOptions::kDraft, 4, 3, ob.get()}}};
    for (const Case& c : cases) {
      GenerateOptions o = plain;
      o.spec = c.spec;
      auto r = generate(*tb, prompt, o);
      ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().message();
      EXPECT_EQ(r->tokens, ref->tokens) << c.name << " under " << strategy_name(so.strategy);
      EXPECT_GT(r->spec.drafted, 0) << c.name;
      EXPECT_EQ(static_cast<int64_t>(r->tokens.size()), 24);
      if (std::string(c.name) == "self-draft" && so.exact) {
        EXPECT_DOUBLE_EQ(r->spec.acceptance_rate(), 1.0);
        EXPECT_GT(r->spec.mean_accepted(), 2.0);
      }
    }
  }
}

TEST_P(Speculative, SampledSpeculationIsReproducible) {
  auto target = load(GetParam().target), other = load(GetParam().draft);
  auto tb = test::cpu_backend(*target), ob = test::cpu_backend(*other);
  GenerateOptions o;
  o.max_new_tokens = 16;
  o.stop_at_eos = false;
  o.sampling = {0.8f, 0.95f, 7};
  o.spec = {SpecOptions::kDraft, 3, 3, ob.get()};
  auto a = generate(*tb, std::vector<int32_t>{1, 2, 3}, o), b = generate(*tb, std::vector<int32_t>{1, 2, 3}, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST_P(Speculative, DraftVocabularyMustMatch) {
  auto target = load(GetParam().target);
  auto foreign = load(GetParam().target.rfind("nemotron", 0) == 0 ? "qwen3_5_tiny" : "nemotron_h_tiny");
  auto tb = test::cpu_backend(*target), fb = test::cpu_backend(*foreign);
  GenerateOptions o;
  o.spec = {SpecOptions::kDraft, 2, 3, fb.get()};
  auto r = generate(*tb, std::vector<int32_t>{1, 2}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("vocabulary"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Speculative,
                         ::testing::Values(Pair{"nemotron_h_tiny", "nemotron_h_bf16_sharded"},
                                           Pair{"qwen3_5_tiny", "qwen3_5_vl_tied"}));

// Rejection sampling on a 5-token vocabulary with fixed target and draft
// distributions: the first two emitted tokens must follow the target's
// distribution exactly (chi-square over 200,000 trials).
TEST(SpeculativeSampling, PreservesTheTargetDistribution) {
  const int64_t V = 5;
  // Logits whose softmax at temperature 1 is p1 (first token) and p2.
  const std::vector<float> l1 = {1.0f, 0.2f, -0.5f, 0.7f, -1.0f}, l2 = {-0.3f, 0.9f, 0.1f, -1.2f, 0.4f};
  std::vector<float> rows;
  for (int i = 0; i < 3; ++i) rows.insert(rows.end(), (i == 0 ? l1 : l2).begin(), (i == 0 ? l1 : l2).end());
  const SamplingParams sp{1.0f, 1.0f, 0};
  const std::vector<double> p1 = ops::cpu::sampling_probs(l1, sp), p2 = ops::cpu::sampling_probs(l2, sp);
  const std::vector<double> q1 = {0.1, 0.5, 0.1, 0.2, 0.1}, q2 = {0.3, 0.1, 0.4, 0.1, 0.1};
  Sampler s({1.0f, 1.0f, 12345});
  std::mt19937_64 g(99);
  const int trials = 200000;
  std::vector<double> c1(V, 0), c2(V * V, 0);
  int64_t accepted = 0;
  for (int t = 0; t < trials; ++t) {
    Draft d;
    std::discrete_distribution<int> dq1(q1.begin(), q1.end()), dq2(q2.begin(), q2.end());
    d.tokens = {dq1(g), dq2(g)};
    d.probs = {q1, q2};
    const AcceptResult r = accept_drafts(rows, V, d, s);
    accepted += r.accepted;
    const int32_t first = r.accepted >= 1 ? d.tokens[0] : r.next;
    const int32_t second = r.accepted >= 2 ? d.tokens[1] : (r.accepted == 1 ? r.next : -1);
    c1[first]++;
    if (second >= 0) c2[first * V + second]++;
  }
  double chi1 = 0;
  for (int v = 0; v < V; ++v) chi1 += std::pow(c1[v] - trials * p1[v], 2) / (trials * p1[v]);
  EXPECT_LT(chi1, 18.5) << "chi-square, 4 dof (p = 0.001)";
  // Second token given the first was accepted as a draft: distributed as p2
  // (the rows do not depend on the first token here).
  double n2 = 0;
  std::vector<double> m2(V, 0);
  for (int a = 0; a < V; ++a)
    for (int b = 0; b < V; ++b) {
      m2[b] += c2[a * V + b];
      n2 += c2[a * V + b];
    }
  double chi2 = 0;
  for (int v = 0; v < V; ++v) chi2 += std::pow(m2[v] - n2 * p2[v], 2) / (n2 * p2[v]);
  EXPECT_LT(chi2, 18.5);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 2 * trials);
}

// sample_at (the device sampler's specification) is Sampler::sample with
// the sampler's uniform made explicit: the same tokens from the same seed.
TEST(SpeculativeSampling, SampleAtIsTheSamplersDraw) {
  std::mt19937 g(3);
  std::uniform_real_distribution<float> logit(-3.0f, 3.0f);
  for (const SamplingParams p : {SamplingParams{0.8f, 0.9f, 7}, SamplingParams{1.0f, 1.0f, 8},
                                 SamplingParams{0.0f, 1.0f, 9}}) {
    Sampler s(p);
    std::mt19937_64 twin(p.seed);
    for (int k = 0; k < 200; ++k) {
      std::vector<float> row(50);
      for (float& x : row) x = std::round(logit(g) * 2.0f) / 2.0f;  // ties in the nucleus' edge too
      const double u = p.temperature > 0.0f ? std::uniform_real_distribution<double>(0.0, 1.0)(twin) : 0.0;
      ASSERT_EQ(s.sample(row), ops::cpu::sample_at(row, p, u)) << "draw " << k;
    }
  }
}

TEST(SpeculativeSampling, NgramLookupFindsTheLatestMatch) {
  NgramDraft d(3);
  const std::vector<int32_t> ctx = {1, 2, 3, 4, 9, 2, 3, 5, 6, 7, 2, 3};
  auto r = d.propose(ctx, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{5, 6, 7}));  // "2 3" last seen before "5 6 7"
  EXPECT_TRUE(d.propose(std::vector<int32_t>{1, 2, 3}, 4)->tokens.empty());
}

// ---------------------------------------------------------------------------

// Brute force: every hypothesis scored by running its whole token path from
// scratch through the dense cache; the same selection rule.
std::vector<Hypothesis> brute_force_beam(const Model& m, const std::vector<int32_t>& prompt, int64_t w,
                                         int64_t steps, double alpha) {
  const int64_t V = m.config().vocab_size;
  auto next_logprobs = [&](const std::vector<int32_t>& toks) {
    DenseCache c(cache_spec(m.config()));
    SeqSlice s{c.add_sequence(), 0, static_cast<int64_t>(toks.size()), 0};
    const int64_t last = s.n - 1;
    std::vector<float> l(V);
    EXPECT_TRUE(m.forward({&s, 1}, toks, c, {&last, 1}, l.data()).ok());
    std::vector<double> lp(V);
    for (int64_t v = 0; v < V; ++v) lp[v] = ops::cpu::log_prob(l, static_cast<int32_t>(v));
    return lp;
  };
  struct B {
    std::vector<int32_t> t;
    double lp;
  };
  std::vector<B> beams{{{}, 0.0}};
  for (int64_t step = 0; step < steps; ++step) {
    struct C {
      size_t b;
      int32_t tok;
      double lp;
    };
    std::vector<C> cands;
    for (size_t b = 0; b < beams.size(); ++b) {
      std::vector<int32_t> path = prompt;
      path.insert(path.end(), beams[b].t.begin(), beams[b].t.end());
      const std::vector<double> lp = next_logprobs(path);
      for (int64_t v = 0; v < V; ++v) cands.push_back({b, static_cast<int32_t>(v), beams[b].lp + lp[v]});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const C& a, const C& c) {
      if (a.lp != c.lp) return a.lp > c.lp;
      return a.b != c.b ? a.b < c.b : a.tok < c.tok;
    });
    std::vector<B> nb;
    for (size_t i = 0; i < static_cast<size_t>(w); ++i) {
      B x = beams[cands[i].b];
      x.t.push_back(cands[i].tok);
      x.lp = cands[i].lp;
      nb.push_back(x);
    }
    beams = nb;
  }
  std::vector<Hypothesis> out;
  for (const B& b : beams) out.push_back({b.t, b.lp, b.lp / std::pow(static_cast<double>(b.t.size()), alpha)});
  std::stable_sort(out.begin(), out.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return out;
}

class Beam : public ::testing::TestWithParam<std::string> {};

TEST_P(Beam, WidthOneIsGreedy) {
  auto m = load(GetParam());
  auto be = test::cpu_backend(*m);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  for (const StateOptions& so : strategies()) {
    GenerateOptions g;
    g.max_new_tokens = 10;
    g.stop_at_eos = false;
    g.state = so;
    auto greedy = generate(*be, prompt, g);
    BeamOptions b;
    b.width = 1;
    b.max_new_tokens = 10;
    b.stop_at_eos = false;
    b.state = so;
    auto beam = beam_search(*be, prompt, b);
    ASSERT_TRUE(greedy.ok() && beam.ok());
    ASSERT_EQ(beam->size(), 1u);
    EXPECT_EQ((*beam)[0].tokens, greedy->tokens) << strategy_name(so.strategy);
  }
}

TEST_P(Beam, EqualsBruteForceUnderEveryStrategy) {
  auto m = load(GetParam());
  const std::vector<int32_t> prompt = {2, 7, 1, 8};
  const int64_t w = 3, steps = 5;
  const std::vector<Hypothesis> want = brute_force_beam(*m, prompt, w, steps, 1.0);
  auto be = test::cpu_backend(*m);
  for (const StateOptions& so : strategies()) {
    BeamOptions b;
    b.width = w;
    b.max_new_tokens = steps;
    b.stop_at_eos = false;
    b.state = so;
    SearchStats stats;
    auto got = beam_search(*be, prompt, b, &stats);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), static_cast<size_t>(w));
    for (int64_t i = 0; i < w; ++i) {
      EXPECT_EQ((*got)[i].tokens, want[i].tokens) << strategy_name(so.strategy) << " rank " << i;
      EXPECT_NEAR((*got)[i].logprob, want[i].logprob, 1e-3);
      if (i > 0) EXPECT_GE((*got)[i - 1].score, (*got)[i].score);
      for (int64_t j = 0; j < i; ++j) EXPECT_NE((*got)[i].tokens, (*got)[j].tokens);
    }
  }
}

TEST_P(Beam, BestOfNIsReproducibleAndSharesThePrompt) {
  auto m = load(GetParam());
  const std::vector<int32_t> prompt = {9, 9, 8, 2};
  BestOfNOptions o;
  o.n = 4;
  o.max_new_tokens = 8;
  o.stop_at_eos = false;
  o.sampling = {1.0f, 1.0f, 21};
  o.state.exact = true;
  auto be = test::cpu_backend(*m);
  auto a = best_of_n(*be, prompt, o), b = best_of_n(*be, prompt, o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 4u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens);
    EXPECT_DOUBLE_EQ((*a)[i].logprob, (*b)[i].logprob);
    EXPECT_NEAR((*a)[i].score, (*a)[i].logprob / 8.0, 1e-12);
    distinct.insert((*a)[i].tokens);
    // Sample i is what generate() samples with seed + i.
    GenerateOptions g;
    g.max_new_tokens = 8;
    g.stop_at_eos = false;
    g.sampling = {1.0f, 1.0f, 21 + i};
    g.state.exact = true;
    auto single = generate(*be, prompt, g);
    ASSERT_TRUE(single.ok());
    EXPECT_EQ(single->tokens, (*a)[i].tokens) << "sample " << i;
  }
  EXPECT_GT(distinct.size(), 1u);
}

// A beam search without EOS over the store with these settings.
BeamOptions beam_options(int64_t width, int64_t new_tokens, Strategy s, bool exact, int64_t window, int64_t page) {
  BeamOptions b;
  b.width = width, b.max_new_tokens = new_tokens, b.stop_at_eos = false;
  b.state.strategy = s, b.state.exact = exact, b.state.window = window, b.state.page_size = page;
  return b;
}
// Its hypotheses, or none (with a failure recorded).
std::vector<Hypothesis> beams_or_none(const Model& m, const std::vector<int32_t>& prompt, const BeamOptions& b) {
  auto be = test::cpu_backend(m);
  auto r = beam_search(*be, prompt, b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<Hypothesis>{};
}

// Long searches exercise the family planner (checkpoints at the beam
// tree's nodes, reused base slots, the replay limit): exact replay must
// give snapshot's hypotheses bit for bit, log-probabilities included.
TEST_P(Beam, LongSearchUnderReplayIsBitIdenticalToSnapshot) {
  auto m = load(GetParam());
  const std::vector<int32_t> prompt = {4, 8, 15, 16};
  auto search = [&](Strategy s, int64_t page, int64_t limit) {
    BeamOptions b = beam_options(8, 48, s, true, 4, page);
    b.state.replay_limit = limit;
    return beams_or_none(*m, prompt, b);
  };
  const std::vector<Hypothesis> want = search(Strategy::kSnapshot, 4, 0);
  ASSERT_EQ(want.size(), 8u);
  for (auto [page, limit] : {std::pair<int64_t, int64_t>{4, 0}, {3, 4}, {1, 6}}) {
    const std::vector<Hypothesis> got = search(Strategy::kReplay, page, limit);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "page " << page << " limit " << limit << " rank " << i;
      EXPECT_EQ(got[i].logprob, want[i].logprob) << "page " << page << " limit " << limit << " rank " << i;
    }
  }
}

// Windows below K−1 (the fixtures' conv width is 4): the family spacing is
// then W, so a family checkpoint can sit 1 or 2 tokens past its base and
// reuse the base's slot while later tokens of the step still read the
// base's conv window (the kernels must copy it first). Exact replay gives
// snapshot's hypotheses bit for bit, and the fast form the same tokens.
TEST_P(Beam, WindowsBelowTheConvWidthUnderReplayMatchSnapshot) {
  auto m = load(GetParam());
  const std::vector<int32_t> prompt = {4, 8, 15, 16};
  auto search = [&](Strategy s, bool exact, int64_t window) {
    return beams_or_none(*m, prompt, beam_options(4, 40, s, exact, window, 1));
  };
  for (int64_t w : {1, 2, 3}) {
    const std::vector<Hypothesis> want = search(Strategy::kSnapshot, true, w);
    ASSERT_EQ(want.size(), 4u);
    for (bool exact : {true, false}) {
      const std::vector<Hypothesis> got = search(Strategy::kReplay, exact, w);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].tokens, want[i].tokens) << "window " << w << " exact " << exact << " rank " << i;
        if (exact) EXPECT_EQ(got[i].logprob, want[i].logprob) << "window " << w << " rank " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Beam, ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny"));

}  // namespace
}  // namespace replayssm

namespace replayssm {
namespace {

// The memory targets of speculation, on a model with real proportions (one
// log entry ≈ 1/38 of a state; tools/make_ratio_model.py): with T = 4
// drafts per step, replay holds at most 1.25× what plain decoding holds,
// while snapshot holds about T+1 states.
TEST(WorkloadMemory, SpeculationUnderReplayStaysNearPlainDecoding) {
  auto m = Model::load(test::data_dir("nemotron_h_ratio"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto be = test::cpu_backend(**m), self = test::cpu_backend(**m);
  const std::vector<int32_t> prompt = {4, 8, 15, 16, 23, 42, 4, 8, 15};
  auto peak = [&](Strategy s, bool spec) {
    GenerateOptions o;
    o.max_new_tokens = 96;
    o.stop_at_eos = false;
    o.state.strategy = s;
    if (spec) o.spec = {SpecOptions::kDraft, 4, 3, self.get()};  // self-draft: every draft kept
    auto r = generate(*be, prompt, o);
    EXPECT_TRUE(r.ok());
    if (spec) EXPECT_DOUBLE_EQ(r->spec.acceptance_rate(), 1.0);
    return static_cast<double>(r->state.state_bytes_peak);
  };
  const double replay_plain = peak(Strategy::kReplay, false), replay_spec = peak(Strategy::kReplay, true);
  const double snap_plain = peak(Strategy::kSnapshot, false), snap_spec = peak(Strategy::kSnapshot, true);
  std::printf("replay: plain %.0f spec %.0f (%.3fx); snapshot: plain %.0f spec %.0f (%.2fx)\n", replay_plain,
              replay_spec, replay_spec / replay_plain, snap_plain, snap_spec, snap_spec / snap_plain);
  EXPECT_LE(replay_spec, 1.25 * replay_plain);
  EXPECT_GE(snap_spec, 4.5 * snap_plain);  // ≈ (T+1)×
  EXPECT_LE(snap_spec, 6.5 * snap_plain);
}

}  // namespace
}  // namespace replayssm

namespace replayssm {
namespace {

// The least state bytes any replay layout can hold for a set of live
// beams: each beam needs a checkpoint on its path (the zero state at
// position 0 is free) and the log from there to its end; a checkpoint
// costs S, a log entry e. Exact dynamic program over the token trie
// (per token, ignoring pages and the transient of writing a checkpoint).
struct TrieFloor {
  struct Node {
    std::map<int32_t, int> kids;
    bool tip = false;
  };
  std::vector<Node> nodes{Node{}};
  double S, e;

  void add(const std::vector<int32_t>& path) {
    int v = 0;
    for (int32_t t : path) {
      auto it = nodes[v].kids.find(t);
      if (it == nodes[v].kids.end()) {
        nodes.push_back({});
        it = nodes[v].kids.emplace(t, static_cast<int>(nodes.size()) - 1).first;
      }
      v = it->second;
    }
    nodes[v].tip = true;
  }
  // (covered: every beam below has a checkpoint at or below v, so token v
  // needs no log; any: the cheapest, token v logged if a beam relies on a
  // checkpoint above it.)
  std::pair<double, double> solve(int v) const {
    double any = 0.0, covered = 0.0;
    for (const auto& [tok, k] : nodes[v].kids) {
      const auto [c, a] = solve(k);
      covered += c;
      any += a;
    }
    const double d = std::min(S + any, nodes[v].tip ? INFINITY : covered);
    return {d, std::min(d, e + any)};
  }
  double floor_bytes() const {
    double total = 0.0;  // below the free zero state
    for (const auto& [tok, k] : nodes[0].kids) total += solve(k).second;
    return total;
  }
};

// Beam search, width 8, 256 tokens, on the model with real state/log
// proportions and on the trained embedded model. Snapshot holds exactly one
// state per beam (pruned beams are released before the survivors are
// copied); replay holds the beam tree — checkpoints at its nodes and the
// log of its live branches — and writes a small fraction of snapshot's
// state bytes. The floor of any replay layout is printed and checked
// against too: with log entries that leave the post-conv rows to replay,
// it lies below the target of 1/3 of snapshot's bytes, which the
// store reaches on the ratio model at the default page size B = 1 (checked
// below), not on the trained model nor at B = 4 (docs/workloads.md).
struct BeamMemoryCase {
  std::string model;
  std::vector<int32_t> prompt;
  int64_t page_size;
  double max_of_snapshot, max_of_floor;  // replay's peak, as measured with some margin
};

void PrintTo(const BeamMemoryCase& c, std::ostream* os) { *os << c.model << " B=" << c.page_size; }

class BeamMemory : public ::testing::TestWithParam<BeamMemoryCase> {};

TEST_P(BeamMemory, FamiliesHoldTheTreeNotOneStatePerBeam) {
  const BeamMemoryCase& c = GetParam();
  auto m = Model::load(test::data_dir(c.model));
  ASSERT_TRUE(m.ok()) << m.status().message();
  const int64_t w = 8;
  StateManager probe(cache_spec((*m)->config()), StateOptions{}, cpu::PlanCache::units(cache_spec((*m)->config())));
  auto be = test::cpu_backend(**m);
  const double S = static_cast<double>(probe.checkpoint_bytes());
  const double e = static_cast<double>(probe.page_log_bytes()) / probe.options().page_size;
  // floor_8b: were an entry S/101, as in Nemotron-H-8B (a layer's state
  // 128·64·128 floats, its entry C + H = 10,240 + 128).
  double floor_peak = 0.0, floor_8b = 0.0;
  auto run = [&](Strategy s, bool floor) {
    BeamOptions b;
    b.width = w;
    b.max_new_tokens = 256;
    b.stop_at_eos = false;
    b.state.strategy = s;
    b.state.page_size = c.page_size;
    if (floor)
      b.on_step = [&](const std::vector<std::vector<int32_t>>& beams) {
        TrieFloor t{{TrieFloor::Node{}}, S, e};
        for (const std::vector<int32_t>& beam : beams) {
          std::vector<int32_t> path = c.prompt;
          path.insert(path.end(), beam.begin(), beam.end());
          t.add(path);
        }
        floor_peak = std::max(floor_peak, t.floor_bytes());
        t.e = S / 101;
        floor_8b = std::max(floor_8b, t.floor_bytes());
      };
    SearchStats st;
    auto r = beam_search(*be, c.prompt, b, &st);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::make_pair(r.ok() ? *r : std::vector<Hypothesis>{}, st.state);
  };
  const auto [replay_hyps, replay] = run(Strategy::kReplay, true);
  const auto [snap_hyps, snap] = run(Strategy::kSnapshot, false);
  ASSERT_EQ(replay_hyps.size(), snap_hyps.size());
  for (size_t i = 0; i < snap_hyps.size(); ++i) EXPECT_EQ(replay_hyps[i].tokens, snap_hyps[i].tokens);
  const double rp = static_cast<double>(replay.state_bytes_peak), sp = static_cast<double>(snap.state_bytes_peak);
  std::printf("%s, B=%lld, beam %lld x 256: replay peak %.0f (%.2f states), snapshot %.0f (%.2f), ratio %.3f; floor of "
              "any replay layout %.0f (%.2f states, %.3f of snapshot; %.2f states were an entry S/101); "
              "writes replay %lld snapshot %lld\n",
              c.model.c_str(), (long long)c.page_size, (long long)w, rp, rp / S, sp, sp / S, rp / sp, floor_peak, floor_peak / S,
              floor_peak / sp, floor_8b / S, (long long)replay.state_writes_bytes, (long long)snap.state_writes_bytes);
  EXPECT_EQ(snap.state_bytes_peak, w * probe.checkpoint_bytes());  // one state per beam, no more
  EXPECT_LE(rp, c.max_of_snapshot * sp);
  EXPECT_LE(rp, c.max_of_floor * floor_peak);  // pages, the transient of a flush, W between writes
  EXPECT_LE(50 * replay.state_writes_bytes, snap.state_writes_bytes);
  // The 1/3 target is within reach of a layout on these proportions; what
  // keeps the store above it is its own (docs/workloads.md). If this
  // fails, the floor rose (larger log entries?) and the docs should say so.
  EXPECT_LT(floor_peak, sp / 3) << "the 1/3 target is below any replay layout again";
}

INSTANTIATE_TEST_SUITE_P(
    Models, BeamMemory,
    // At B = 1 (the default) the ratio model meets the workloads issue's
    // target, 1/3 of snapshot (0.307 measured); the trained model does not
    // (0.365; docs/workloads.md says why). B = 4 adds every beam's tip page.
    ::testing::Values(BeamMemoryCase{"nemotron_h_ratio", {4, 8, 15, 16}, 1, 1.0 / 3, 1.05},
                      // "The Python standard library"
                      BeamMemoryCase{"../../models/nemotron_h_small", {501, 477, 1218, 1073}, 1, 0.38, 1.2},
                      BeamMemoryCase{"nemotron_h_ratio", {4, 8, 15, 16}, 4, 0.37, 1.25},
                      BeamMemoryCase{"../../models/nemotron_h_small", {501, 477, 1218, 1073}, 4, 0.45, 1.45}),
    [](const ::testing::TestParamInfo<BeamMemoryCase>& i) {
      return (i.param.model.find("ratio") != std::string::npos ? std::string("ratio") : std::string("trained")) +
             "_B" + std::to_string(i.param.page_size);
    });

}  // namespace
}  // namespace replayssm
