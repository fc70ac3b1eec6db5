// The store under the real fixture models: every strategy gives
// transformers' greedy tokens; replay's decode logits match transformers;
// exact mode is bit-identical to the standard (dense) decode path; a tight
// budget changes nothing but the restore counts; nothing leaks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "workloads/beam_search.h"
#include "workloads/generate.h"
#include "workloads/speculative.h"
#include "workloads/session.h"
#include "backend/cpu/dense_cache.h"
#include "cpu_state.h"
#include "test_util.h"

namespace replayssm {
namespace {

using test::data_dir;

struct Fixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<cpu::CpuBackend> backend;  // the sessions of a test take it in turn
  nlohmann::json expected;
};

const Fixture& fixture(const std::string& name) {
  static std::map<std::string, Fixture> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    Fixture f;
    auto m = Model::load(data_dir(name));
    EXPECT_TRUE(m.ok()) << m.status().message();
    f.model = std::move(m).value();
    f.backend = test::cpu_backend(*f.model);
    f.expected = test::read_json(data_dir(name) + "/expected.json");
    it = cache.emplace(name, std::move(f)).first;
  }
  return it->second;
}

std::vector<int32_t> prompt(const Fixture& f, size_t i) {
  return f.expected["prompts"][i].get<std::vector<int32_t>>();
}

struct StoreCase {
  std::string name;
  StateOptions opt;
};

std::vector<StoreCase> store_cases() {
  auto make = [](Strategy s, int64_t w, bool exact, int64_t k = 0, int64_t page = 16) {
    StateOptions o;
    o.strategy = s;
    o.window = w;
    o.exact = exact;
    o.checkpoint_interval = k;
    o.page_size = page;
    return o;
  };
  return {
      {"replay_w1_fast", make(Strategy::kReplay, 1, false)},
      {"replay_w4_exact", make(Strategy::kReplay, 4, true, 0, 5)},
      {"replay_w16_fast", make(Strategy::kReplay, 16, false)},
      {"replay_w64_exact_k8", make(Strategy::kReplay, 64, true, 8, 7)},
      {"snapshot", make(Strategy::kSnapshot, 16, false)},
      {"recompute_k8", make(Strategy::kRecompute, 16, false, 8)},
  };
}

class StoreModel : public ::testing::TestWithParam<std::string> {};

TEST_P(StoreModel, EveryStrategyGivesTransformersGreedyTokens) {
  const Fixture& f = fixture(GetParam());
  for (const StoreCase& sc : store_cases()) {
    int compared = 0;
    for (size_t p = 0; p < f.expected["prompts"].size(); ++p) {
      GenerateOptions opt;
      opt.max_new_tokens = 12;
      opt.stop_at_eos = false;
      opt.state = sc.opt;
      auto r = generate(*f.backend, prompt(f, p), opt);
      ASSERT_TRUE(r.ok()) << sc.name << ": " << r.status().message();
      const auto& want = f.expected["greedy"][p];
      for (size_t i = 0; i < 12 && want["gaps"][i].get<double>() > 2e-3; ++i, ++compared)
        ASSERT_EQ(r->tokens[i], want["tokens"][i].get<int32_t>()) << sc.name << " prompt " << p << " step " << i;
    }
    EXPECT_GE(compared, 24) << sc.name;
  }
}

// Decode-path logits under replay (fast and exact) match transformers like
// the dense path does; exact mode equals the dense path bit for bit.
TEST_P(StoreModel, ReplayDecodeLogitsMatchAndExactIsBitIdentical) {
  const Fixture& f = fixture(GetParam());
  const int64_t V = f.model->config().vocab_size;
  const std::vector<int32_t> ids = prompt(f, 3);  // 70 tokens: several flushes
  const int64_t n = static_cast<int64_t>(ids.size());
  // The standard path: a dense state per sequence, one token per step.
  std::vector<float> dense(n * V);
  {
    DenseCache cache(cache_spec(f.model->config()));
    const int64_t seq = cache.add_sequence();
    for (int64_t t = 0; t < n; ++t) {
      SeqSlice s{seq, t, 1, 0};
      const int64_t row = 0;
      ASSERT_TRUE(f.model->forward({&s, 1}, {&ids[t], 1}, cache, {&row, 1}, dense.data() + t * V).ok());
    }
  }
  for (bool exact : {false, true}) {
    StateOptions o;
    o.window = 5;
    o.page_size = 4;
    o.exact = exact;
    auto session = Session::create(*f.backend, o);
    ASSERT_TRUE(session.ok());
    const int64_t seq = (*session)->state().add_sequence();
    std::vector<float> got, row;
    for (int64_t t = 0; t < n; ++t) {
      const StepInput in{seq, {&ids[t], 1}};
      ASSERT_TRUE((*session)->step({&in, 1}, &row).ok());
      got.insert(got.end(), row.begin(), row.end());
    }
    double worst = 0;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < V; ++j) {
        const double ref = f.expected["decode_logits"][3][t][j].get<double>();
        worst = std::max(worst, std::abs(got[t * V + j] - ref) / (1 + std::abs(ref)));
      }
    EXPECT_LE(worst, 1e-4) << (exact ? "exact" : "fast");
    if (exact) EXPECT_EQ(std::memcmp(got.data(), dense.data(), sizeof(float) * got.size()), 0);
    EXPECT_GT((*session)->state().stats().replayed_tokens, 0);
    EXPECT_GT((*session)->state().stats().state_writes_bytes, 0);
  }
}

// A budget far below what the sequences want: the store evicts and
// restores (replays and re-prefills), the tokens do not change.
TEST_P(StoreModel, TightBudgetChangesOnlyRestores) {
  const Fixture& f = fixture(GetParam());
  for (Strategy strat : {Strategy::kReplay, Strategy::kSnapshot}) {
    StateOptions free_opt;
    free_opt.strategy = strat;
    free_opt.window = 4;
    free_opt.page_size = 4;
    free_opt.log_retention = -1;
    free_opt.exact = true;
    StateOptions tight = free_opt;
    // Three sequences decoded in turn; the tight run gets half the state
    // memory the free run peaked at, and eviction pressure from outside.
    const int64_t ck = ssm_state_bytes_per_sequence(f.model->config(), 4);
    auto a = Session::create(*f.backend, free_opt);
    ASSERT_TRUE(a.ok());
    std::vector<int64_t> sa, sb;
    std::vector<std::vector<int32_t>> out_a(3), out_b(3);
    for (int i = 0; i < 3; ++i) sa.push_back((*a)->state().add_sequence());
    auto run = [&](Session& s, const std::vector<int64_t>& seqs, std::vector<std::vector<int32_t>>& out,
                   int64_t budget_evict) {
      std::vector<float> logits;
      for (int i = 0; i < 3; ++i) {
        const std::vector<int32_t> p = prompt(f, 1 + i % 2);
        const StepInput in{seqs[i], p};
        ASSERT_TRUE(s.step({&in, 1}, &logits).ok());
        out[i].push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      }
      for (int t = 0; t < 10; ++t)
        for (int i = 0; i < 3; ++i) {
          if (budget_evict > 0) s.state().evict(budget_evict);  // pressure from elsewhere
          const StepInput in{seqs[i], {&out[i].back(), 1}};
          ASSERT_TRUE(s.step({&in, 1}, &logits).ok());
          out[i].push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        }
    };
    run(**a, sa, out_a, 0);
    tight.state_budget = (*a)->state().stats().state_bytes_peak / 2;
    auto second = test::cpu_backend(*f.model);
    auto b = Session::create(*second, tight);
    ASSERT_TRUE(b.ok());
    for (int i = 0; i < 3; ++i) sb.push_back((*b)->state().add_sequence());
    run(**b, sb, out_b, ck);
    EXPECT_EQ(out_a, out_b) << strategy_name(strat);
    const StateStats& st = (*b)->state().stats();
    EXPECT_LE(st.state_bytes_peak, tight.state_budget);
    EXPECT_GT(st.evictions, 0);
    EXPECT_GT(st.restores_log_replay + st.restores_reprefill, 0) << strategy_name(strat);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE((*a)->state().release(sa[i]).ok());
      ASSERT_TRUE((*b)->state().release(sb[i]).ok());
    }
    for (Session* s : {a->get(), b->get()}) {
      EXPECT_EQ(s->state().n_pages(), 0);
      EXPECT_EQ(s->state().n_checkpoints(), 0);
      EXPECT_EQ(s->state().stats().state_bytes, 0);
      EXPECT_EQ(s->state().stats().kv_bytes, 0);
    }
  }
}

// A global state budget the request cannot fit even after eviction is a
// clear error, and the other sequence is untouched.
TEST_P(StoreModel, OverBudgetIsAnErrorAndOthersAreUntouched) {
  const Fixture& f = fixture(GetParam());
  StateOptions o;
  o.window = 4;
  o.page_size = 4;
  const std::vector<int32_t> p = prompt(f, 2);
  // The budget: exactly what one prompt's prefill needs at its peak.
  auto ref = Session::create(*f.backend, o);
  ASSERT_TRUE(ref.ok());
  const int64_t r = (*ref)->state().add_sequence();
  std::vector<float> lr;
  const StepInput r1{r, p}, r2{r, {&p[0], 1}};
  ASSERT_TRUE((*ref)->step({&r1, 1}, &lr).ok());
  o.state_budget = (*ref)->state().stats().state_bytes_peak;
  ASSERT_TRUE((*ref)->step({&r2, 1}, &lr).ok());

  auto second = test::cpu_backend(*f.model);
  auto s = Session::create(*second, o);
  ASSERT_TRUE(s.ok());
  const int64_t a = (*s)->state().add_sequence(), b = (*s)->state().add_sequence();
  std::vector<float> la, lb;
  const StepInput ia{a, p};
  ASSERT_TRUE((*s)->step({&ia, 1}, &la).ok());
  // a's state is pinned by its own token in the same step, so b's prefill
  // cannot fit: an error, and neither sequence changes.
  const StepInput both[2] = {{a, {&p[0], 1}}, {b, p}};
  const Status st = (*s)->step(both, &lb);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOutOfBudget);
  EXPECT_NE(st.message().find("state budget"), std::string::npos) << st.message();
  EXPECT_EQ((*s)->state().length(a), static_cast<int64_t>(p.size()));
  EXPECT_EQ((*s)->state().length(b), 0);
  // a continues exactly as without the failed step.
  const StepInput again{a, {&p[0], 1}};
  std::vector<float> l2;
  ASSERT_TRUE((*s)->step({&again, 1}, &l2).ok());
  EXPECT_EQ(l2, lr);
  // Alone, b fits: a's checkpoint is evicted to make room, never lost.
  const StepInput ib{b, p};
  ASSERT_TRUE((*s)->step({&ib, 1}, &lb).ok());
  EXPECT_EQ(lb, la);
  EXPECT_GT((*s)->state().stats().evictions, 0);
  const StepInput a3{a, {&p[1], 1}}, r3{r, {&p[1], 1}};
  ASSERT_TRUE((*s)->step({&a3, 1}, &l2).ok());
  ASSERT_TRUE((*ref)->step({&r3, 1}, &lr).ok());
  EXPECT_EQ(std::max_element(l2.begin(), l2.end()) - l2.begin(), std::max_element(lr.begin(), lr.end()) - lr.begin());
  EXPECT_GT((*s)->state().stats().restores_reprefill + (*s)->state().stats().restores_log_replay, 0);
}

// Per-request budgets: a request is held to its own bytes (its forks
// included), evicting only its own state; other requests are not touched.
TEST_P(StoreModel, PerRequestBudget) {
  const Fixture& f = fixture(GetParam());
  StateOptions o;
  o.window = 4;
  o.page_size = 4;
  auto s = Session::create(*f.backend, o);
  ASSERT_TRUE(s.ok());
  StateManager& st = (*s)->state();
  const std::vector<int32_t> p = prompt(f, 2);
  std::vector<float> l;
  // Probe what one prefill and a window of decoding need (the prefill
  // alone holds just its checkpoint: its log is folded as it is written),
  // then give request A that (or what its forks below need, if more).
  const int64_t probe = st.add_sequence();
  const StepInput ip{probe, p};
  ASSERT_TRUE((*s)->step({&ip, 1}, &l).ok());
  const std::vector<float> want = l;
  for (int64_t t = 0; t < o.window; ++t) {
    const StepInput dp{probe, {&p[t % p.size()], 1}};
    ASSERT_TRUE((*s)->step({&dp, 1}, &l).ok());
  }
  const int64_t need = st.stats().state_bytes_peak;
  ASSERT_TRUE(st.release(probe).ok());
  // The forks below need room for two checkpoints at once (a fork whose
  // log was evicted rebuilds into a checkpoint of its own while a's base
  // is still held) and a page; with log entries far smaller than a state
  // (nemotron_h_tiny: a page of 4 entries is S/2) one prefill and a window
  // of decoding hold less than that.
  const int64_t fork_need = 2 * st.checkpoint_bytes() + st.page_log_bytes();
  const int64_t budget = std::max(need, fork_need);

  const int64_t a = st.add_sequence(budget), tiny = st.add_sequence(16), b = st.add_sequence();
  const StepInput ia{a, p}, it{tiny, p}, ib{b, p};
  ASSERT_TRUE((*s)->step({&ia, 1}, &l).ok());
  EXPECT_EQ(l, want);
  const Status refused = (*s)->step({&it, 1}, &l);
  EXPECT_EQ(refused.code(), StatusCode::kOutOfBudget);
  EXPECT_NE(refused.message().find("request " + std::to_string(tiny)), std::string::npos) << refused.message();
  EXPECT_EQ(st.length(tiny), 0);
  ASSERT_TRUE((*s)->step({&ib, 1}, &l).ok());  // no budget: unaffected
  EXPECT_EQ(l, want);
  // A fork of a belongs to a's request: stepping both stays within a's
  // budget by evicting a's own older state, and the results do not change.
  // The fork takes other tokens than a (identical forks would share one
  // checkpoint and fit); b2, a fork of b, takes the same as the fork.
  auto child = st.fork(a), b2 = st.fork(b);
  ASSERT_TRUE(child.ok() && b2.ok());
  const int64_t evictions_before = st.stats().evictions;
  std::vector<float> la, lc, lb, lb2;
  auto argmax = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
  for (int t = 0; t < 6; ++t) {
    const int32_t other = p[(t + 1) % p.size()];
    const StepInput sa{a, {&p[t], 1}}, sc{*child, {&other, 1}}, sb{b, {&p[t], 1}}, sb2{*b2, {&other, 1}};
    for (auto [in, out] : {std::pair{&sa, &la}, {&sc, &lc}, {&sb, &lb}, {&sb2, &lb2}}) {
      const Status r = (*s)->step({in, 1}, out);
      ASSERT_TRUE(r.ok()) << "step " << t << " of sequence " << in->seq << ": " << r.message();
    }
    EXPECT_EQ(argmax(la), argmax(lb));
    EXPECT_EQ(argmax(lc), argmax(lb2));
  }
  EXPECT_GT(st.stats().evictions, evictions_before);
}

// A prompt taken in one step under replay with an interval K keeps a
// checkpoint at each multiple of K it passes: a restore inside it replays
// fewer than K entries, to the logits the prompt step gave there.
TEST_P(StoreModel, APromptInOneStepKeepsACheckpointEveryK) {
  const Fixture& f = fixture(GetParam());
  const int64_t V = f.model->config().vocab_size;
  const std::vector<int32_t> ids = prompt(f, 3);  // 70 tokens
  ASSERT_GE(ids.size(), 30u);
  StateOptions o;
  o.window = 16, o.checkpoint_interval = 8, o.page_size = 4, o.log_retention = -1;
  auto session = Session::create(*f.backend, o);
  ASSERT_TRUE(session.ok());
  const int64_t seq = (*session)->state().add_sequence();
  const std::span<const int32_t> first(ids.data(), 30);
  std::vector<float> all;
  const StepInput in{seq, first, true, StepInput::kAll};
  ASSERT_TRUE((*session)->step({&in, 1}, &all).ok());
  for (int64_t at : {29, 20, 9}) {
    auto rp = (*session)->state().restore(seq, at);
    ASSERT_TRUE(rp.ok()) << rp.status().message();
    EXPECT_EQ(rp->path, RestorePath::kLogReplay) << "at " << at;
    EXPECT_EQ(rp->from, at / 8 * 8) << "at " << at;  // the multiple of K below, not position 0
    std::vector<float> again;
    const StepInput one{seq, std::span<const int32_t>(ids.data() + at, 1), true, StepInput::kLast};
    ASSERT_TRUE((*session)->step({&one, 1}, &again).ok());
    ASSERT_EQ(again.size(), size_t(V));
    for (int64_t v = 0; v < V; ++v)
      ASSERT_NEAR(again[size_t(v)], all[size_t(at * V + v)], 1e-3f * (1.0f + std::abs(all[size_t(at * V + v)])))
          << "at " << at << " logit " << v;
  }
}

// A fork that replays its log to its start (a prefix-cache hit) and keeps
// a checkpoint there: its first step writes it, a fork of it at that
// position starts from it with nothing to replay, to the same logits.
TEST_P(StoreModel, AKeptCheckpointAtADivergenceEndsItsReplay) {
  const Fixture& f = fixture(GetParam());
  const int64_t V = f.model->config().vocab_size;
  const std::vector<int32_t> ids = prompt(f, 3);  // 70 tokens
  StateOptions o;
  o.window = 16, o.page_size = 4, o.log_retention = -1;
  auto session = Session::create(*f.backend, o);
  ASSERT_TRUE(session.ok());
  StateManager& sm = (*session)->state();
  const int64_t entry = sm.add_sequence();
  const StepInput in{entry, std::span<const int32_t>(ids.data(), 40), true, StepInput::kNone};
  ASSERT_TRUE((*session)->step({&in, 1}).ok());
  constexpr int64_t kAt = 27;  // no checkpoint there: the entry's are at 0 and 40
  auto hit = sm.fork_request(entry, kAt);
  ASSERT_TRUE(hit.ok());
  auto rp = sm.resume_plan(*hit);
  ASSERT_TRUE(rp.ok());
  ASSERT_EQ(rp->path, RestorePath::kLogReplay);
  EXPECT_LT(rp->from, kAt);
  ASSERT_TRUE(sm.keep_checkpoint_at(*hit, kAt).ok());
  EXPECT_FALSE(sm.keep_checkpoint_at(*hit, kAt + 1).ok());  // past its length
  std::vector<float> first, again;
  const StepInput suffix{*hit, std::span<const int32_t>(ids.data() + kAt, 5), true, StepInput::kLast};
  ASSERT_TRUE((*session)->step({&suffix, 1}, &first).ok());
  auto next = sm.fork_request(*hit, kAt);
  ASSERT_TRUE(next.ok());
  rp = sm.resume_plan(*next);
  ASSERT_TRUE(rp.ok());
  EXPECT_EQ(rp->path, RestorePath::kCheckpoint);
  EXPECT_EQ(rp->from, kAt);
  const StepInput same{*next, std::span<const int32_t>(ids.data() + kAt, 5), true, StepInput::kLast};
  ASSERT_TRUE((*session)->step({&same, 1}, &again).ok());
  ASSERT_EQ(again.size(), size_t(V));
  for (int64_t v = 0; v < V; ++v)
    ASSERT_NEAR(again[size_t(v)], first[size_t(v)], 1e-3f * (1.0f + std::abs(first[size_t(v)]))) << "logit " << v;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, StoreModel, ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny", "qwen3_5_vl_tied"));

// Misuse through the library's own calls is a Status, not a crash: steps
// at negative positions or with rows outside the step's tokens, a commit
// that would overflow the cursor, sampling outside its domain, a custom
// draft whose probabilities do not match its tokens, a NaN length penalty.
TEST(LibraryMisuse, BadArgumentsAreRefused) {
  const Fixture& f = fixture("nemotron_h_tiny");
  test::CpuState st(cache_spec(f.model->config()), StateOptions{});
  const int64_t a = st.add_sequence();
  const std::vector<int32_t> tokens = {1, 2, 3};
  for (const SeqSlice& bad : {SeqSlice{a, -1, 3, 0}, SeqSlice{a, 0, 3, 1}, SeqSlice{a, 0, 2, -1},
                              SeqSlice{a, 0, 4, 0}}) {
    EXPECT_FALSE(st.begin_step({&bad, 1}, tokens).ok()) << bad.pos << " " << bad.n << " " << bad.row;
    EXPECT_EQ(st.length(a), 0);
  }
  EXPECT_FALSE(st.commit(a, INT64_MAX).ok());
  EXPECT_EQ(st.committed(a), 0);

  const std::vector<int32_t> prompt = {1, 2, 3};
  GenerateOptions g;
  for (const SamplingParams& sp : {SamplingParams{std::nanf(""), 1.0f}, SamplingParams{-1.0f, 1.0f},
                                   SamplingParams{1.0f, 0.0f}, SamplingParams{1.0f, std::nanf("")}}) {
    g.sampling = sp;
    EXPECT_FALSE(generate(*f.backend, prompt, g).ok()) << sp.temperature << " " << sp.top_p;
    BestOfNOptions n;
    n.sampling = sp;
    EXPECT_FALSE(best_of_n(*f.backend, prompt, n).ok());
  }
  g = GenerateOptions{};
  g.spec.kind = static_cast<SpecOptions::Kind>(9);
  EXPECT_FALSE(generate(*f.backend, prompt, g).ok());
  struct OneRowShort final : DraftSource {
    Result<Draft> propose(std::span<const int32_t>, int64_t) override { return Draft{{5, 6}, {{1.0}}}; }
  };
  g.spec.kind = SpecOptions::kCustom;
  g.spec.make_source = [](int64_t) -> Result<std::unique_ptr<DraftSource>> {
    return std::unique_ptr<DraftSource>(new OneRowShort());
  };
  g.sampling.temperature = 1.0f;
  auto r = generate(*f.backend, prompt, g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("probability rows"), std::string::npos) << r.status().message();
  BeamOptions b;
  b.length_penalty = std::nan("");
  EXPECT_FALSE(beam_search(*f.backend, prompt, b).ok());
  b.length_penalty = 1.0;
  b.max_new_tokens = -5;
  EXPECT_FALSE(beam_search(*f.backend, prompt, b).ok());
}

// A model of attention and MLPs alone holds no SSM state: every position is
// its own checkpoint, so it decodes under every strategy (its first decode
// step had asked for a re-prefill that could never satisfy it), each token
// the argmax of a whole-sequence prefill.
TEST(StoreModelNoSsm, AttentionOnlyModelsDecodeUnderEveryStrategy) {
  const std::string nh = R"({"architectures": ["NemotronHForCausalLM"], "hidden_size": 16, "vocab_size": 41,
      "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": 24,
      "hybrid_override_pattern": "*-*-"})";
  const std::string qwen = R"({"architectures": ["Qwen3_5ForCausalLM"], "hidden_size": 16, "vocab_size": 41,
      "num_hidden_layers": 2, "full_attention_interval": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
      "head_dim": 8, "intermediate_size": 24})";
  for (const std::string& text : {nh, qwen}) {
    auto cfg = parse_model_config(text, "config.json");
    ASSERT_TRUE(cfg.ok()) << cfg.status().message();
    auto model = Model::random(*cfg, 7);
    ASSERT_TRUE(model.ok()) << model.status().message();
    auto backend = test::cpu_backend(**model);
    const std::vector<int32_t> prompt = {3, 17, 5, 29, 11};
    std::vector<int32_t> first;
    for (const StoreCase& sc : store_cases()) {
      GenerateOptions opt;
      opt.max_new_tokens = 12;
      opt.stop_at_eos = false;
      opt.state = sc.opt;
      auto r = generate(*backend, prompt, opt);
      ASSERT_TRUE(r.ok()) << cfg->arch_name << " " << sc.name << ": " << r.status().message();
      ASSERT_EQ(r->tokens.size(), 12u) << sc.name;
      if (first.empty()) first = r->tokens;
      EXPECT_EQ(r->tokens, first) << cfg->arch_name << " " << sc.name;
    }
    std::vector<int32_t> seen = prompt;
    for (int32_t t : first) {  // each token from a fresh prefill of everything before it
      auto s = Session::create(*backend, StateOptions{});
      ASSERT_TRUE(s.ok()) << s.status().message();
      const StepInput in{(*s)->state().add_sequence(), seen};
      std::vector<float> logits;
      ASSERT_TRUE((*s)->step({&in, 1}, &logits).ok());
      EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), t) << cfg->arch_name;
      seen.push_back(t);
    }
  }
}

}  // namespace
}  // namespace replayssm
