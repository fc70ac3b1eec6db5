// Randomized property test of the StateManager (DESIGN.md §1, §3, §5).
//
// Thousands of random operations — steps (prefill chunks, single tokens,
// drafts), commit, truncate, fork, restore, evict, release — on a store
// holding one attention layer and one SSM layer (Mamba2 or Gated DeltaNet)
// at odd sizes, checked against a naive oracle that keeps the state and
// conv window at every position of every sequence and computes each output
// by dense single-token stepping. A token's layer inputs are a fixed
// function of its id, so re-prefills can re-run it. Exact mode must match
// the oracle bit for bit (outputs and states); fast mode within 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "ops/cpu/attention.h"
#include "ops/cpu/ssm_mixer.h"
#include "cpu_state.h"
#include "replayssm/state.h"

namespace replayssm {
namespace {

constexpr int kVocab = 23;

struct Config {
  std::string name;
  CacheLayerSpec::Kind kind;
  Strategy strategy = Strategy::kReplay;
  bool exact = true;
  int64_t window = 4, interval = 0, page = 3, retention = 0, budget = 0;
  EvictionPolicy policy = EvictionPolicy::kCostAware;
  uint32_t seed = 1;
  int ops = 2500;
  // Beam-like traffic: a family (a root and its forks) steps together one
  // token at a time, forks are frequent, ancestors are released while
  // their forks live — trees of shared history for the family planner.
  bool beams = false;
  int64_t replay_limit = 0;
};

std::vector<float> randv(std::mt19937& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// The fake model: per token id, fixed layer inputs; fixed layer weights.
struct Layers {
  // Attention: Hq=3, Hkv=1, D=5. SSM sizes are odd on purpose.
  int64_t Hq = 3, Hkv = 1, D = 5;
  int64_t H = 0, P = 0, N = 0, G = 0, Hk = 0, Hv = 0, dk = 0, dv = 0, C = 0, K = 4, in_w = 0;
  CacheLayerSpec::Kind kind;
  std::vector<float> q, kv, in;  // per token: q (Hq·D), k|v (2·Hkv·D), SSM inputs (in_w)
  std::vector<float> conv_w, conv_b, A_log, D_skip, dt_bias;
  ops::Conv1dParams conv;
  ops::Mamba2Params mp;
  ops::GdnParams gp;

  Layers(CacheLayerSpec::Kind k, std::mt19937& g) : kind(k) {
    if (k == CacheLayerSpec::kMamba2) {
      H = 6, P = 5, N = 7, G = 3;
      C = H * P + 2 * G * N;
      in_w = C + H;  // pre-conv xBC | dt
    } else {
      Hk = 2, Hv = 6, dk = 5, dv = 7;
      C = 2 * Hk * dk + Hv * dv;
      in_w = C + 2 * Hv;  // pre-conv qkv | a | b
    }
    q = randv(g, kVocab * Hq * D, -1, 1);
    kv = randv(g, kVocab * 2 * Hkv * D, -1, 1);
    in = randv(g, kVocab * in_w, -1.5f, 1.5f);
    conv_w = randv(g, C * K, -0.6f, 0.6f);
    conv_b = randv(g, C, -0.2f, 0.2f);
    const int64_t heads = k == CacheLayerSpec::kMamba2 ? H : Hv;
    A_log = randv(g, heads, -1.0f, 1.0f);
    D_skip = randv(g, heads, -1.0f, 1.0f);
    dt_bias = randv(g, heads, -2.0f, 0.5f);
    conv = {C, K, conv_w.data(), k == CacheLayerSpec::kMamba2 ? conv_b.data() : nullptr};
    mp = {H, P, N, G, A_log.data(), D_skip.data(), dt_bias.data(), 0.0f, INFINITY};
    gp = {Hk, Hv, dk, dv, A_log.data(), dt_bias.data()};
  }
  CacheSpec spec() const {
    CacheLayerSpec att{CacheLayerSpec::kAttention};
    att.n_kv_heads = Hkv;
    att.head_dim = D;
    CacheLayerSpec ssm{kind};
    ssm.conv_channels = C;
    ssm.conv_width = K;
    ssm.n_heads = kind == CacheLayerSpec::kMamba2 ? H : Hv;
    ssm.state_rows = kind == CacheLayerSpec::kMamba2 ? P : dk;
    ssm.state_cols = kind == CacheLayerSpec::kMamba2 ? N : dv;
    CacheSpec s;
    s.layers = {att, ssm};
    s.prefill_flops_per_token = 2e4;
    return s;
  }
  int64_t out_w() const { return kind == CacheLayerSpec::kMamba2 ? H * P : Hv * dv; }
  int64_t state_floats() const { return kind == CacheLayerSpec::kMamba2 ? H * P * N : Hv * dk * dv; }
  const float* input(int32_t tok) const { return in.data() + tok * in_w; }

  // Runs one step through the store: attention then SSM outputs per row.
  Status step(test::CpuState& st, const std::vector<SeqSlice>& slices, const std::vector<int32_t>& toks,
              std::vector<float>* att_out, std::vector<float>* ssm_out) const {
    RSSM_RETURN_IF_ERROR(st.begin_step(slices, toks));
    const int64_t rows = static_cast<int64_t>(toks.size());
    std::vector<float> qr(rows * Hq * D), kvr(rows * 2 * Hkv * D), inr(rows * in_w);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(&qr[r * Hq * D], &q[toks[r] * Hq * D], sizeof(float) * Hq * D);
      std::memcpy(&kvr[r * 2 * Hkv * D], &kv[toks[r] * 2 * Hkv * D], sizeof(float) * 2 * Hkv * D);
      std::memcpy(&inr[r * in_w], input(toks[r]), sizeof(float) * in_w);
    }
    att_out->assign(rows * Hq * D, 0.0f);
    ssm_out->assign(rows * out_w(), 0.0f);
    const ops::AttentionParams ap{Hq, Hkv, D, 1.0f / std::sqrt(static_cast<float>(D))};
    st.attention(0, ap, slices, qr.data(), Hq * D, kvr.data(), kvr.data() + Hkv * D, 2 * Hkv * D,
                 att_out->data(), Hq * D);
    if (kind == CacheLayerSpec::kMamba2)
      st.mamba2(1, conv, mp, slices, inr.data(), in_w, inr.data() + C, in_w, ssm_out->data(), out_w());
    else
      st.gated_deltanet(1, conv, gp, slices, inr.data(), in_w, inr.data() + C, in_w,
                        inr.data() + C + Hv, in_w, ssm_out->data(), out_w());
    st.end_step(slices);
    return {};
  }
};

// The oracle: a sequence's window and state after every position, and the
// outputs of dense single-token stepping.
struct OracleSeq {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> windows, states;  // index = position
  std::vector<std::vector<float>> ssm_out, att_out;  // index = token position
  int64_t committed = 0;
};

void oracle_append(const Layers& L, OracleSeq& o, int32_t tok) {
  std::vector<float> w = o.windows.back(), s = o.states.back(), y(L.out_w()), scratch;
  const float* in = L.input(tok);
  if (L.kind == CacheLayerSpec::kMamba2)
    ops::cpu::mamba2_mixer(L.conv, L.mp, w.data(), s.data(), in, L.in_w, in + L.C, L.in_w, 1, y.data(),
                           L.out_w(), &scratch);
  else
    ops::cpu::gdn_mixer(L.conv, L.gp, w.data(), s.data(), in, L.in_w, in + L.C, L.in_w, in + L.C + L.Hv,
                        L.in_w, 1, y.data(), L.out_w(), &scratch);
  o.tokens.push_back(tok);
  o.windows.push_back(w);
  o.states.push_back(s);
  o.ssm_out.push_back(y);
  // Attention over every K/V row so far, as one dense page.
  const int64_t n = static_cast<int64_t>(o.tokens.size());
  std::vector<float> kk, vv;
  for (int32_t t : o.tokens) {
    kk.insert(kk.end(), &L.kv[t * 2 * L.Hkv * L.D], &L.kv[t * 2 * L.Hkv * L.D] + L.Hkv * L.D);
    vv.insert(vv.end(), &L.kv[t * 2 * L.Hkv * L.D] + L.Hkv * L.D, &L.kv[(t + 1) * 2 * L.Hkv * L.D]);
  }
  const float* kp = kk.data();
  const float* vp = vv.data();
  std::vector<float> a(L.Hq * L.D);
  const ops::AttentionParams ap{L.Hq, L.Hkv, L.D, 1.0f / std::sqrt(static_cast<float>(L.D))};
  ops::cpu::attention(ap, &L.q[tok * L.Hq * L.D], L.Hq * L.D, n - 1, 1,
                      ops::KvView{&kp, &vp, INT64_MAX, L.Hkv * L.D}, a.data(), L.Hq * L.D);
  o.att_out.push_back(a);
}

void oracle_truncate(OracleSeq& o, int64_t p) {
  o.tokens.resize(p);
  o.windows.resize(p + 1);
  o.states.resize(p + 1);
  o.ssm_out.resize(p);
  o.att_out.resize(p);
  o.committed = std::min(o.committed, p);
}

void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

class StoreProperty : public ::testing::TestWithParam<Config> {};

TEST_P(StoreProperty, MatchesOracle) {
  const Config cfg = GetParam();
  std::mt19937 g(cfg.seed);
  Layers L(cfg.kind, g);
  StateOptions opt;
  opt.strategy = cfg.strategy;
  opt.exact = cfg.exact;
  opt.window = cfg.window;
  opt.checkpoint_interval = cfg.interval;
  opt.page_size = cfg.page;
  opt.log_retention = cfg.retention;
  opt.state_budget = cfg.budget;
  opt.eviction = cfg.policy;
  opt.replay_limit = cfg.replay_limit;
  ASSERT_TRUE(opt.validate().ok());
  test::CpuState st(L.spec(), opt);
  std::map<int64_t, OracleSeq> oracle;
  std::map<int64_t, int64_t> root_of;  // the request (root sequence) of each sequence
  auto fresh = [&]() {
    OracleSeq o;
    o.windows.push_back(std::vector<float>((L.K - 1) * L.C, 0.0f));
    o.states.push_back(std::vector<float>(L.state_floats(), 0.0f));
    return o;
  };
  // The operations so far, printed when a check fails.
  std::vector<std::string> trace;
  auto note = [&](const std::string& line) { trace.push_back(line); };
  struct Dump {
    std::vector<std::string>& t;
    ~Dump() {
      if (!::testing::Test::HasFailure()) return;
      for (size_t i = 0; i < t.size(); ++i) std::printf("  %s\n", t[i].c_str());
    }
  } dump{trace};
  const double tol = cfg.exact ? 0.0 : 1e-5;
  double worst = 0.0;
  auto compare = [&](const float* got, const std::vector<float>& want, const char* what, int64_t seq,
                     int64_t pos) {
    double scale = 0.0;
    for (float w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
    for (size_t i = 0; i < want.size(); ++i) {
      if (tol == 0.0) {
        ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
            << what << " seq " << seq << " pos " << pos << " i " << i << ": " << got[i] << " vs " << want[i];
      } else {
        const double err = std::abs(got[i] - want[i]) / std::max(scale, 1e-3);
        worst = std::max(worst, err);
        ASSERT_LE(err, tol) << what << " seq " << seq << " pos " << pos << " i " << i;
      }
    }
  };
  // Makes a sequence steppable, as Session does; false if the budget says no.
  auto ready = [&](int64_t s) {
    auto plan = st.resume_plan(s);
    if (!plan.ok()) {
      ADD_FAILURE() << plan.status().message();
      return false;
    }
    if (plan->path != RestorePath::kReprefill) return true;
    auto toks = st.tokens(s);
    std::vector<int32_t> t(toks.begin() + plan->from, toks.end());
    std::vector<float> a, y;
    const Status rs = L.step(st, {SeqSlice{s, plan->from, plan->to - plan->from, 0, false}}, t, &a, &y);
    note("rebuild seq " + std::to_string(s) + " from " + std::to_string(plan->from) + " to " +
         std::to_string(plan->to) + (rs.ok() ? "" : " refused"));
    if (!rs.ok()) {
      EXPECT_EQ(rs.code(), StatusCode::kOutOfBudget) << rs.message();
      return false;
    }
    EXPECT_EQ(st.resume_plan(s)->path, RestorePath::kCheckpoint);
    return true;
  };
  std::uniform_int_distribution<int> pick(0, 99);
  // Cumulative odds of step, commit, truncate, fork, restore, evict,
  // release; the rest inspects a state.
  const std::vector<int> odds = cfg.beams ? std::vector<int>{60, 62, 67, 82, 86, 89, 96}
                                          : std::vector<int>{55, 63, 71, 79, 86, 91, 95};
  const size_t max_seqs = cfg.beams ? 9 : 6;
  int steps = 0, failed_budget = 0;
  for (int it = 0; it < cfg.ops; ++it) {
    std::vector<int64_t> ids;
    for (auto& [id, o] : oracle) ids.push_back(id);
    const int r = pick(g);
    std::set<int64_t> roots;
    for (auto& [id, root] : root_of) roots.insert(root);
    if (ids.empty() || (r < 6 && (cfg.beams ? roots.size() < 2 : ids.size() < max_seqs))) {
      const int64_t id = st.add_sequence();
      oracle[id] = fresh();
      root_of[id] = id;
      note("add " + std::to_string(id));
      continue;
    }
    const int64_t s = ids[g() % ids.size()];
    OracleSeq& o = oracle[s];
    const int64_t len = static_cast<int64_t>(o.tokens.size());
    if (r < odds[0]) {  // a step over 1–3 sequences, or a whole family of beams
      std::vector<int64_t> chosen{s};
      for (int64_t other : ids)
        if (other != s && (cfg.beams ? root_of[other] == root_of[s] && pick(g) < 90
                                     : chosen.size() < 3 && pick(g) < 25))
          chosen.push_back(other);
      std::vector<SeqSlice> slices;
      std::vector<int32_t> toks;
      bool ok = true;
      st.pin(chosen);  // as Session does: rebuilding one must not evict another
      for (int64_t c : chosen) ok = ok && ready(c);
      if (!ok) {
        st.unpin_all();
        ++failed_budget;
        continue;
      }
      for (int64_t c : chosen) {
        const int64_t n = cfg.beams ? (pick(g) < 90 ? 1 : 1 + g() % 5) : (pick(g) < 15 ? 1 + g() % 12 : 1 + g() % 3);
        slices.push_back({c, static_cast<int64_t>(oracle[c].tokens.size()), n,
                          static_cast<int64_t>(toks.size()), pick(g) < (cfg.beams ? 92 : 60)});
        for (int64_t i = 0; i < n; ++i) toks.push_back(static_cast<int32_t>(g() % kVocab));
      }
      std::vector<float> att, y;
      const int64_t pages_before = st.n_pages(), ck_before = st.n_checkpoints();
      const int64_t bytes_before = st.stats().state_bytes;
      const Status step_st = L.step(st, slices, toks, &att, &y);
      st.unpin_all();
      if (!step_st.ok()) {
        ASSERT_EQ(step_st.code(), StatusCode::kOutOfBudget) << step_st.message();
        for (int64_t c : chosen) ASSERT_EQ(st.length(c), static_cast<int64_t>(oracle[c].tokens.size()));
        // A refused step changes nothing: no allocation, no eviction.
        ASSERT_EQ(st.n_pages(), pages_before);
        ASSERT_EQ(st.n_checkpoints(), ck_before);
        ASSERT_EQ(st.stats().state_bytes, bytes_before);
        ++failed_budget;
        continue;
      }
      ++steps;
      for (const SeqSlice& sl : slices)
        note("step seq " + std::to_string(sl.seq) + " pos " + std::to_string(sl.pos) + " n " + std::to_string(sl.n) +
             (sl.commit ? " commit" : " draft"));
      for (const SeqSlice& sl : slices) {
        OracleSeq& oc = oracle[sl.seq];
        for (int64_t i = 0; i < sl.n; ++i) {
          oracle_append(L, oc, toks[sl.row + i]);
          compare(&y[(sl.row + i) * L.out_w()], oc.ssm_out.back(), "ssm output", sl.seq, sl.pos + i);
          if (HasFatalFailure()) return;
          // Attention reads the same rows in the same order: always exact.
          ASSERT_EQ(std::memcmp(&att[(sl.row + i) * L.Hq * L.D], oc.att_out.back().data(),
                                sizeof(float) * L.Hq * L.D), 0) << "attention seq " << sl.seq;
        }
        if (sl.commit) oc.committed = static_cast<int64_t>(oc.tokens.size());
        ASSERT_EQ(st.length(sl.seq), static_cast<int64_t>(oc.tokens.size()));
        ASSERT_EQ(st.committed(sl.seq), oc.committed);
      }
    } else if (r < odds[1]) {  // commit
      const int64_t n = (len - o.committed) > 0 ? g() % (len - o.committed + 1) : 0;
      ASSERT_TRUE(st.commit(s, n).ok());
      o.committed += n;
      note("commit seq " + std::to_string(s) + " n " + std::to_string(n));
      ASSERT_FALSE(st.commit(s, len - o.committed + 1).ok());
    } else if (r < odds[2]) {  // truncate (usually a rollback of drafts)
      const int64_t p = pick(g) < 70 ? o.committed + g() % (len - o.committed + 1) : g() % (len + 1);
      ASSERT_TRUE(st.truncate(s, p).ok());
      oracle_truncate(o, p);
      note("truncate seq " + std::to_string(s) + " to " + std::to_string(p));
    } else if (r < odds[3]) {  // fork at a random position
      if (ids.size() >= max_seqs) continue;
      const int64_t p = pick(g) < (cfg.beams ? 80 : 50) ? len : g() % (len + 1);
      auto f = st.fork(s, p);
      if (!f.ok()) {
        ASSERT_EQ(f.status().code(), StatusCode::kOutOfBudget) << f.status().message();
        continue;
      }
      OracleSeq child = o;
      oracle_truncate(child, p);
      oracle[*f] = child;
      root_of[*f] = root_of[s];
      note("fork seq " + std::to_string(s) + " at " + std::to_string(p) + " -> " + std::to_string(*f));
      ASSERT_EQ(st.length(*f), p);
    } else if (r < odds[4]) {  // restore to a random earlier position
      const int64_t p = g() % (len + 1);
      auto plan = st.restore(s, p);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      oracle_truncate(o, p);
      note("restore seq " + std::to_string(s) + " to " + std::to_string(p) + " path " +
           restore_path_name(plan->path) + " from " + std::to_string(plan->from));
      ASSERT_EQ(plan->to, p);
      ASSERT_LE(plan->from, p);
    } else if (r < odds[5]) {  // eviction pressure
      const int64_t freed = st.evict(1 + g() % 4000);
      note("evict " + std::to_string(freed));
    } else if (r < odds[6]) {  // release (an ancestor of live forks, too)
      ASSERT_TRUE(st.release(s).ok());
      ASSERT_FALSE(st.release(s).ok());
      note("release seq " + std::to_string(s));
      oracle.erase(s);
      root_of.erase(s);
    } else {  // inspect the state at the length
      if (!ready(s)) continue;
      std::vector<float> w, state;
      const Status ms = L.kind == CacheLayerSpec::kMamba2
                            ? st.materialize_mamba2(s, 1, L.conv, L.mp, &w, &state)
                            : st.materialize_gdn(s, 1, L.conv, L.gp, &w, &state);
      ASSERT_TRUE(ms.ok()) << ms.message();
      // Checkpoint writes are sequential in both modes, so states are
      // bit-identical — except GDN in fast mode, whose logged u came from
      // the dual form and carries its rounding.
      if (cfg.exact || cfg.kind == CacheLayerSpec::kMamba2) {
        ASSERT_EQ(std::memcmp(state.data(), o.states.back().data(), sizeof(float) * state.size()), 0)
            << "state of seq " << s << " at " << len;
      } else {
        compare(state.data(), o.states.back(), "state", s, len);
        if (HasFatalFailure()) return;
      }
      ASSERT_EQ(std::memcmp(w.data(), o.windows.back().data(), sizeof(float) * w.size()), 0)
          << "window of seq " << s << " at " << len;
    }
    if (cfg.budget > 0) ASSERT_LE(st.stats().state_bytes, cfg.budget);
  }
  EXPECT_GT(steps, cfg.ops / 5);
  for (auto& [id, o] : oracle) ASSERT_TRUE(st.release(id).ok());
  EXPECT_EQ(st.n_sequences(), 0);
  EXPECT_EQ(st.n_pages(), 0);
  EXPECT_EQ(st.n_checkpoints(), 0);
  EXPECT_EQ(st.stats().state_bytes, 0);
  EXPECT_EQ(st.stats().kv_bytes, 0);
  const StateStats& ss = st.stats();
  std::printf("[%s] steps %d, restores: checkpoint %lld log %lld reprefill %lld, evictions %lld, "
              "budget refusals %d, replayed %lld, shared flushes %lld, worst rel err %.2e\n",
              cfg.name.c_str(), steps, (long long)ss.restores_checkpoint, (long long)ss.restores_log_replay,
              (long long)ss.restores_reprefill, (long long)ss.evictions, failed_budget,
              (long long)ss.replayed_tokens, (long long)ss.shared_flushes, worst);
  // Families stepping together share checkpoints at their tree's nodes.
  // (Forks that diverge at once are better served by private ones.)
  if (cfg.strategy == Strategy::kReplay && cfg.budget == 0 && cfg.beams) EXPECT_GT(ss.shared_flushes, 0);
}

std::vector<Config> configs() {
  using K = CacheLayerSpec;
  std::vector<Config> c;
  for (K::Kind kind : {K::kMamba2, K::kGatedDeltaNet}) {
    const std::string k = kind == K::kMamba2 ? "mamba2" : "gdn";
    c.push_back({k + "_replay_exact", kind, Strategy::kReplay, true, 4, 0, 3, 0, 0, EvictionPolicy::kCostAware, 11});
    c.push_back({k + "_replay_exact_keeplog", kind, Strategy::kReplay, true, 5, 7, 4, -1, 0, EvictionPolicy::kLru, 12});
    c.push_back({k + "_replay_fast", kind, Strategy::kReplay, false, 6, 0, 5, 8, 0, EvictionPolicy::kCostAware, 13});
    c.push_back({k + "_replay_fast_w1", kind, Strategy::kReplay, false, 1, 3, 2, -1, 0, EvictionPolicy::kLru, 14});
    c.push_back({k + "_replay_budget_cost", kind, Strategy::kReplay, true, 4, 5, 3, -1, 90000, EvictionPolicy::kCostAware, 15});
    c.push_back({k + "_replay_budget_lru", kind, Strategy::kReplay, false, 8, 0, 4, -1, 90000, EvictionPolicy::kLru, 16});
    c.push_back({k + "_snapshot", kind, Strategy::kSnapshot, true, 4, 0, 3, 0, 0, EvictionPolicy::kCostAware, 17});
    c.push_back({k + "_snapshot_budget", kind, Strategy::kSnapshot, true, 4, 6, 3, 0, 50000, EvictionPolicy::kLru, 18});
    c.push_back({k + "_recompute", kind, Strategy::kRecompute, true, 4, 5, 3, 0, 0, EvictionPolicy::kCostAware, 19});
    // Families of forks: checkpoints at tree nodes, a base's slot reused
    // when its family leaves it, shared log trimmed, the replay limit.
    c.push_back({k + "_beams_exact", kind, Strategy::kReplay, true, 3, 0, 3, 0, 0, EvictionPolicy::kCostAware, 21, 2500, true});
    c.push_back({k + "_beams_fast_limit", kind, Strategy::kReplay, false, 2, 0, 2, 0, 0, EvictionPolicy::kCostAware, 22, 2500, true, 4});
    c.push_back({k + "_beams_interval_keeplog", kind, Strategy::kReplay, true, 4, 3, 4, -1, 0, EvictionPolicy::kLru, 23, 2500, true});
    c.push_back({k + "_beams_budget", kind, Strategy::kReplay, true, 3, 0, 3, 0, 20000, EvictionPolicy::kCostAware, 24, 2500, true});
    c.push_back({k + "_beams_budget_lru", kind, Strategy::kReplay, false, 2, 4, 2, 2, 20000, EvictionPolicy::kLru, 25, 2500, true, 6});
    // Long branching runs with long replays: every replayed token's conv
    // outputs (x | B, or k) are rebuilt from the logged pre-conv rows and
    // must round exactly as when the token was new.
    c.push_back({k + "_beams_exact_long", kind, Strategy::kReplay, true, 6, 0, 5, 0, 0, EvictionPolicy::kCostAware, 27, 8000, true, 40});
    c.push_back({k + "_beams_snapshot", kind, Strategy::kSnapshot, true, 3, 0, 3, 0, 0, EvictionPolicy::kCostAware, 26, 2500, true});
    // Windows below K−1 (K = 4): a family checkpoint then sits closer than
    // K−1 to its base, so a write that reuses the base's slot lands while
    // later tokens of the slice (and later writes) still read the base's
    // conv window. Pages of 1 (the CLI default) and 2 tokens.
    for (int64_t w : {1, 2, 3}) {
      const std::string ws = "_w" + std::to_string(w);
      c.push_back({k + "_beams_exact" + ws, kind, Strategy::kReplay, true, w, 0, 1, 0, 0, EvictionPolicy::kCostAware,
                   static_cast<uint32_t>(30 + w), 2500, true});
      c.push_back({k + "_beams_fast" + ws, kind, Strategy::kReplay, false, w, 0, 2, 0, 0, EvictionPolicy::kCostAware,
                   static_cast<uint32_t>(33 + w), 2500, true});
    }
  }
  return c;
}

INSTANTIATE_TEST_SUITE_P(Random, StoreProperty, ::testing::ValuesIn(configs()),
                         [](const ::testing::TestParamInfo<Config>& i) { return i.param.name; });

// A long committed step folds its log into its own checkpoint as it goes:
// pages wholly below the step's write get no log (docs/store.md, a step).
// A 128-token prefill with W = 16, B = 4 holds exactly its checkpoint S
// (before: S + 32 pages, the whole prompt's log); decoding then holds at
// most S + the W/B pages of one window. Outputs and states are bit for bit
// those of a store that keeps every log (log_retention −1: nothing folded).
TEST(StoreMemory, PrefillFoldsItsLogAsItGoes) {
  std::mt19937 g(7);
  for (CacheLayerSpec::Kind kind : {CacheLayerSpec::kMamba2, CacheLayerSpec::kGatedDeltaNet}) {
    Layers L(kind, g);
    StateOptions opt;
    opt.window = 16;
    opt.page_size = 4;
    opt.exact = true;
    StateOptions keep = opt;
    keep.log_retention = -1;
    test::CpuState st(L.spec(), opt), ref(L.spec(), keep);
    const int64_t S = st.checkpoint_bytes(), pg = st.page_log_bytes();
    std::vector<int32_t> prompt(128);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(g() % kVocab);
    const int64_t a = st.add_sequence(), b = ref.add_sequence();
    std::vector<float> att, y, att_ref, y_ref;
    ASSERT_TRUE(L.step(st, {SeqSlice{a, 0, 128, 0, true}}, prompt, &att, &y).ok());
    ASSERT_TRUE(L.step(ref, {SeqSlice{b, 0, 128, 0, true}}, prompt, &att_ref, &y_ref).ok());
    EXPECT_EQ(y, y_ref);
    EXPECT_EQ(st.stats().state_bytes_peak, S);
    EXPECT_EQ(ref.stats().state_bytes_peak, S + 32 * pg);  // the old figure
    for (int t = 0; t < 40; ++t) {
      const std::vector<int32_t> tok{static_cast<int32_t>(g() % kVocab)};
      ASSERT_TRUE(L.step(st, {SeqSlice{a, st.length(a), 1, 0, true}}, tok, &att, &y).ok());
      ASSERT_TRUE(L.step(ref, {SeqSlice{b, ref.length(b), 1, 0, true}}, tok, &att_ref, &y_ref).ok());
      ASSERT_EQ(y, y_ref) << "token " << t;
    }
    EXPECT_LE(st.stats().state_bytes_peak, S + (opt.window / opt.page_size) * pg);
    std::vector<float> w, s, w_ref, s_ref;
    const bool m2 = kind == CacheLayerSpec::kMamba2;
    ASSERT_TRUE((m2 ? st.materialize_mamba2(a, 1, L.conv, L.mp, &w, &s) : st.materialize_gdn(a, 1, L.conv, L.gp, &w, &s)).ok());
    ASSERT_TRUE((m2 ? ref.materialize_mamba2(b, 1, L.conv, L.mp, &w_ref, &s_ref)
                    : ref.materialize_gdn(b, 1, L.conv, L.gp, &w_ref, &s_ref)).ok());
    EXPECT_EQ(w, w_ref);
    EXPECT_EQ(s, s_ref);

    // A prefill that does not end on a page boundary keeps the page of its
    // tail; drafts are never folded; a prompt shorter than W is not either.
    test::CpuState st2(L.spec(), opt);
    const int64_t c = st2.add_sequence(), d = st2.add_sequence(), e = st2.add_sequence();
    std::vector<int32_t> p130(130, 3);
    ASSERT_TRUE(L.step(st2, {SeqSlice{c, 0, 130, 0, true}}, p130, &att, &y).ok());
    EXPECT_EQ(st2.stats().state_bytes_peak, S + pg);
    ASSERT_TRUE(st2.release(c).ok());
    ASSERT_TRUE(L.step(st2, {SeqSlice{d, 0, 128, 0, false}}, prompt, &att, &y).ok());
    EXPECT_EQ(st2.stats().state_bytes, 32 * pg);  // every draft's entry, no checkpoint
    ASSERT_TRUE(st2.release(d).ok());
    ASSERT_TRUE(L.step(st2, {SeqSlice{e, 0, 15, 0, true}}, std::vector<int32_t>(15, 5), &att, &y).ok());
    EXPECT_EQ(st2.stats().state_bytes, 4 * pg);
  }
}

}  // namespace
}  // namespace replayssm
