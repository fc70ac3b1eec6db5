// The CUDA backend's step schedule (src/backend/cuda/step_schedule.h),
// tested without a GPU: the emulator (schedule_emulator.h) runs every
// launch of the schedule with the CPU's arithmetic on storage laid out as
// the device's, against the CPU backend planned alike (the CUDA units, so
// both managers emit the same plans). Random scripts of prompts in chunks,
// decode steps, drafts, commits, rollbacks and restores to any position,
// forks and releases, under every strategy, with the schedule's paths
// forced one way and another (every slice through the chunk scans; short
// logs only; no GDN standard step): exact plans must give the CPU's logits
// bit for bit (the same arithmetic in the same order), fast ones within
// the dual form's rounding; the manager's counters alike; and no launch may
// read storage nothing wrote, race another of its sequences, or write the
// zero slot. The workloads (generation with speculation, beams, best-of-n,
// the tree under a budget, the engine's mixed batches) give the CPU's
// tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../backend_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/layer_launches.h"
#include "model/program.h"
#include "cuda_test_util.h"
#include "replayssm/engine.h"
#include "replayssm/tree_search.h"
#include "schedule_emulator.h"
#include "workloads/beam_search.h"
#include "workloads/generate.h"
#include "workloads/session.h"

namespace replayssm {
namespace {

StateOptions opts(Strategy s, int64_t w, bool exact, int64_t k, int64_t page, int64_t retention, int64_t budget = 0) {
  StateOptions o;
  o.strategy = s, o.window = w, o.exact = exact, o.checkpoint_interval = k, o.page_size = page;
  o.log_retention = retention, o.state_budget = budget;
  return o;
}

struct Named {
  std::string name;
  StateOptions opt;
};

std::vector<Named> strategies() {
  return {{"replay_exact_w4_p4", opts(Strategy::kReplay, 4, true, 0, 4, 0)},
          {"replay_exact_w8_p2_k8_all", opts(Strategy::kReplay, 8, true, 8, 2, -1)},
          {"replay_exact_w16_p1", opts(Strategy::kReplay, 16, true, 0, 1, 0)},
          {"replay_exact_w3_p8", opts(Strategy::kReplay, 3, true, 0, 8, 2)},
          {"snapshot_p4", opts(Strategy::kSnapshot, 8, false, 0, 4, 0)},
          {"recompute_k8_p4", opts(Strategy::kRecompute, 8, false, 8, 4, 0)},
          {"replay_fast_w8_p2_k8_all", opts(Strategy::kReplay, 8, false, 8, 2, -1)},
          {"replay_fast_w6_p4", opts(Strategy::kReplay, 6, false, 0, 4, 1)}};
}

struct Limits {
  std::string name;
  cuda::ScheduleLimits lim;
};

std::vector<Limits> limits() {
  cuda::ScheduleLimits scans, short_logs, no_step;
  scans.decode_tokens = 0;
  short_logs.decode_log = 6;
  no_step.gdn_step = false;
  return {{"default", {}}, {"scans", scans}, {"short_logs", short_logs}, {"no_gdn_step", no_step}};
}

class CudaSchedule : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = Model::load(test::fixture(GetParam()));
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = std::move(m).value();
    auto c = cpu::CpuBackend::create(*model_);
    ASSERT_TRUE(c.ok()) << c.status().message();
    cpu_ = std::move(c).value();
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
};

// Rows of two steps' logits: bit for bit, or within fp32 rounding of a
// different summation (the dual form).
void expect_rows(const std::vector<float>& got, const std::vector<float>& want, bool bits, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (bits) {
    size_t diff = 0;
    while (diff < got.size() && got[diff] == want[diff]) ++diff;
    EXPECT_EQ(diff, got.size()) << what << ": first difference at " << diff << " ("
                                << (diff < got.size() ? got[diff] : 0.0f) << " against "
                                << (diff < got.size() ? want[diff] : 0.0f) << ")";
    return;
  }
  float worst = 0.0f;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / (1.0f + std::abs(want[i])));
  EXPECT_LE(worst, 2e-4f) << what;
}

// One random script on both backends; returns the steps compared.
int run_script(test::EmulatedBackend& emu, Backend& ref, const StateOptions& so, uint32_t seed,
               const std::string& what) {
  auto a = Session::create(emu, so);
  auto b = Session::create(ref, so);
  EXPECT_TRUE(a.ok() && b.ok()) << what;
  if (!a.ok() || !b.ok()) return 0;
  Session& A = **a;
  Session& Bs = **b;
  const int32_t V = int32_t(emu.config().vocab_size);
  std::mt19937 g(seed);
  std::vector<int64_t> live;
  int compared = 0;
  auto pick = [&]() { return live[g() % live.size()]; };
  for (int round = 0; round < 70 && !::testing::Test::HasFatalFailure(); ++round) {
    const int op = int(g() % 12);
    const std::string at = what + " round " + std::to_string(round);
    if (live.empty() || (op == 0 && live.size() < 5)) {
      const int64_t x = A.state().add_sequence(), y = Bs.state().add_sequence();
      EXPECT_EQ(x, y) << at;
      live.push_back(x);
    } else if (op == 1 && live.size() < 6) {
      const int64_t s = pick(), len = A.state().length(s);
      const int64_t pos = int64_t(g() % uint32_t(len + 1));
      auto x = A.state().fork(s, pos);
      auto y = Bs.state().fork(s, pos);
      if (x.ok() != y.ok()) {
        ADD_FAILURE() << at << ": fork";
        return compared;
      }
      if (x.ok()) {
        EXPECT_EQ(*x, *y) << at;
        live.push_back(*x);
      }
      continue;
    } else if (op == 2) {
      const int64_t s = pick(), len = A.state().length(s);
      const int64_t pos = int64_t(g() % uint32_t(len + 1));
      auto x = A.restore(s, pos);
      auto y = Bs.restore(s, pos);
      if (x.ok() != y.ok()) {
        ADD_FAILURE() << at << ": " << (x.ok() ? y.status().message() : x.status().message());
        return compared;
      }
      if (x.ok()) {
        EXPECT_EQ(int(x->path), int(y->path)) << at;
      }
      continue;
    } else if (op == 3) {
      const int64_t s = pick(), n = A.state().length(s) - A.state().committed(s);
      if (n > 0) {
        const int64_t k = 1 + int64_t(g() % uint32_t(n));
        EXPECT_EQ(A.state().commit(s, k).ok(), Bs.state().commit(s, k).ok()) << at;
      }
      continue;
    } else if (op == 4 && live.size() > 1) {
      const size_t i = g() % live.size();
      EXPECT_TRUE(A.release(live[i]).ok() && Bs.release(live[i]).ok()) << at;
      live.erase(live.begin() + int64_t(i));
      continue;
    }
    // A step: up to three sequences, each a token, a few or a chunk.
    std::vector<int64_t> seqs = live;
    std::shuffle(seqs.begin(), seqs.end(), g);
    seqs.resize(std::min<size_t>(seqs.size(), 1 + g() % 3));
    std::vector<std::vector<int32_t>> toks;
    toks.reserve(seqs.size());  // the inputs' spans point into it
    std::vector<StepInput> in;
    int64_t rows = 0;
    for (int64_t s : seqs) {
      const int kind = int(g() % 6);
      const int n = kind < 3 ? 1 : kind < 5 ? 2 + int(g() % 5) : 9 + int(g() % 14);
      if (rows + n > emu.max_step_rows()) break;
      rows += n;
      toks.emplace_back();
      for (int i = 0; i < n; ++i) toks.back().push_back(int32_t(g() % uint32_t(V)));
      const bool commit = g() % 4 != 0;
      in.push_back({s, toks.back(), commit, g() % 3 == 0 ? StepInput::kAll : StepInput::kLast});
    }
    std::vector<float> la, lb;
    const Status sa = A.step(in, &la), sb = Bs.step(in, &lb);
    if (sa.ok() != sb.ok()) {
      ADD_FAILURE() << at << ": " << sa.message() << " / " << sb.message();
      return compared;
    }
    if (!sa.ok()) continue;
    expect_rows(la, lb, so.exact || so.strategy != Strategy::kReplay, at);
    ++compared;
    if (emu.failures() > 0) break;
  }
  const StateStats& x = A.state().stats();
  const StateStats& y = Bs.state().stats();
  EXPECT_EQ(x.replayed_tokens, y.replayed_tokens) << what;
  EXPECT_EQ(x.restores_log_replay, y.restores_log_replay) << what;
  EXPECT_EQ(x.restores_reprefill, y.restores_reprefill) << what;
  EXPECT_EQ(x.state_bytes_peak, y.state_bytes_peak) << what;
  return compared;
}

TEST_P(CudaSchedule, RandomScriptsGiveTheCpusLogits) {
  int compared = 0;
  for (const Limits& l : limits())
    for (const Named& s : strategies()) {
      test::EmulatedBackend emu(*model_, l.lim);
      test::PlannedAs ref(*cpu_, emu);
      for (uint32_t seed : {1u, 2u}) {
        compared += run_script(emu, ref, s.opt, seed, s.name + "/" + l.name + " seed " + std::to_string(seed));
        ASSERT_EQ(emu.failures(), 0) << s.name << "/" << l.name;
      }
    }
  EXPECT_GT(compared, 500);
}

// Under a budget that evicts: rebuilds (re-prefills) and log replays from
// older checkpoints, planned alike on both.
TEST_P(CudaSchedule, ScriptsUnderABudgetGiveTheCpusLogits) {
  const int64_t ckpt = ssm_state_bytes_per_sequence(model_->config(), 4);
  for (const Limits& l : limits()) {
    for (const StateOptions& o :
         {opts(Strategy::kReplay, 4, true, 4, 2, -1, 3 * ckpt), opts(Strategy::kRecompute, 4, false, 4, 4, 0, 4 * ckpt)}) {
      test::EmulatedBackend emu(*model_, l.lim);
      test::PlannedAs ref(*cpu_, emu);
      run_script(emu, ref, o, 7, std::string(strategy_name(o.strategy)) + " budget/" + l.name);
      ASSERT_EQ(emu.failures(), 0) << l.name;
    }
  }
}

// read_state after a script: every SSM layer's window and state of every
// live sequence, against the CPU's (fp32 storage both: bit for bit in
// exact plans).
TEST_P(CudaSchedule, ReadStateMatchesTheCpu) {
  for (const Named& s : strategies()) {
    if (s.opt.strategy != Strategy::kReplay || !s.opt.exact) continue;
    test::EmulatedBackend emu(*model_);
    test::PlannedAs ref(*cpu_, emu);
    auto a = Session::create(emu, s.opt);
    auto b = Session::create(ref, s.opt);
    ASSERT_TRUE(a.ok() && b.ok());
    const int64_t x = (*a)->state().add_sequence();
    (*b)->state().add_sequence();
    std::vector<int32_t> toks;
    for (int i = 0; i < 23; ++i) toks.push_back(int32_t((i * 7 + 3) % model_->config().vocab_size));
    for (size_t at = 0; at < toks.size(); at += 5) {
      const std::span<const int32_t> t(toks.data() + at, std::min<size_t>(5, toks.size() - at));
      const StepInput in{x, t};
      ASSERT_TRUE((*a)->step({&in, 1}).ok() && (*b)->step({&in, 1}).ok());
      auto ra = (*a)->state().read_plan(x);
      ASSERT_TRUE(ra.ok()) << ra.status().message();
      for (size_t l = 0; l < emu.cache_spec().layers.size(); ++l) {
        if (emu.cache_spec().layers[l].kind == CacheLayerSpec::kAttention) continue;
        std::vector<float> wa, sa, wb, sb;
        ASSERT_TRUE(emu.read_state(*ra, int(l), &wa, &sa).ok());
        ASSERT_TRUE(ref.read_state(*ra, int(l), &wb, &sb).ok());
        EXPECT_EQ(wa, wb) << s.name << " layer " << l << " at " << at;
        EXPECT_EQ(sa, sb) << s.name << " layer " << l << " at " << at;
      }
    }
  }
}

TEST_P(CudaSchedule, WorkloadsGiveTheCpusTokens) {
  const std::vector<int32_t> prompt = {5, 9, 13, 5, 9, 13, 5, 9, 13, 5, 2, 7};
  for (const Named& s : strategies()) {
    if (!(s.opt.exact || s.opt.strategy != Strategy::kReplay)) continue;  // bitwise plans only: tokens must agree
    test::EmulatedBackend emu(*model_);
    test::PlannedAs ref(*cpu_, emu);
    GenerateOptions go;
    go.max_new_tokens = 10, go.stop_at_eos = false, go.state = s.opt;
    go.spec.kind = SpecOptions::kNgram, go.spec.tokens = 3;
    auto ga = generate(emu, prompt, go);
    auto gb = generate(ref, prompt, go);
    ASSERT_TRUE(ga.ok() && gb.ok()) << s.name;
    EXPECT_EQ(ga->tokens, gb->tokens) << s.name;
    BeamOptions bo;
    bo.width = 3, bo.max_new_tokens = 6, bo.stop_at_eos = false, bo.state = s.opt;
    auto ba = beam_search(emu, prompt, bo, nullptr);
    auto bb = beam_search(ref, prompt, bo, nullptr);
    ASSERT_TRUE(ba.ok() && bb.ok()) << s.name;
    ASSERT_EQ(ba->size(), bb->size());
    for (size_t i = 0; i < ba->size(); ++i) EXPECT_EQ((*ba)[i].tokens, (*bb)[i].tokens) << s.name << " beam " << i;
    BestOfNOptions no;
    no.n = 3, no.max_new_tokens = 5, no.stop_at_eos = false, no.sampling = {0.8f, 0.9f, 11}, no.state = s.opt;
    auto na = best_of_n(emu, prompt, no, nullptr);
    auto nb = best_of_n(ref, prompt, no, nullptr);
    ASSERT_TRUE(na.ok() && nb.ok()) << s.name;
    for (size_t i = 0; i < na->size(); ++i) EXPECT_EQ((*na)[i].tokens, (*nb)[i].tokens) << s.name << " sample " << i;
    {  // The tree under a budget: evictions, restores by log replay and re-prefill.
    StateOptions tree = s.opt;
    tree.state_budget = 3 * ssm_state_bytes_per_sequence(model_->config(), 4) + 20000;
    auto ta = TreeSearch::create(emu, tree);
    auto tb = TreeSearch::create(ref, tree);
    ASSERT_TRUE(ta.ok() && tb.ok()) << s.name;
    const std::vector<int32_t> root = {7, 3, 9, 27, 81};
    std::vector<TreeSearch::NodeId> na_nodes{*(*ta)->root(root)}, nb_nodes{*(*tb)->root(root)};
    for (int i = 0; i < 20; ++i) {
      const size_t at = size_t((i * 7) % na_nodes.size());
      const std::vector<int32_t> add = {int32_t(1 + (i * 13) % 60), int32_t(2 + i % 5)};
      auto ca = (*ta)->expand(na_nodes[at], add);
      auto cb = (*tb)->expand(nb_nodes[at], add);
      ASSERT_TRUE(ca.ok() && cb.ok()) << s.name;
      na_nodes.push_back(*ca), nb_nodes.push_back(*cb);
      const std::span<const float> x = *(*ta)->logits(*ca), y = *(*tb)->logits(*cb);
      EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << s.name << " node " << i;
    }
    // The conformance suite's budget evicts under this layout's units too.
    EXPECT_GT((*ta)->state().stats().evictions, 0) << s.name;
    }  // the trees release the backends
    // The engine: decode tokens beside prompt chunks in one step.
    EngineOptions eo;
    eo.state = s.opt, eo.max_batch_tokens = 16, eo.prefill_chunk = 5;
    auto ea = Engine::create(emu, eo);
    auto eb = Engine::create(ref, eo);
    ASSERT_TRUE(ea.ok() && eb.ok()) << s.name << ": " << (ea.ok() ? eb.status().message() : ea.status().message());
    std::vector<int64_t> ia, ib;
    for (int r = 0; r < 3; ++r) {
      RequestParams rp;
      rp.prompt.assign(prompt.begin(), prompt.begin() + 4 + 3 * r);
      rp.max_new_tokens = 6, rp.stop_at_eos = false;
      ia.push_back(*(*ea)->submit(rp)), ib.push_back(*(*eb)->submit(rp));
    }
    ASSERT_TRUE((*ea)->run().ok() && (*eb)->run().ok()) << s.name;
    for (size_t r = 0; r < ia.size(); ++r) EXPECT_EQ(*(*ea)->output(ia[r]), *(*eb)->output(ib[r])) << s.name;
    EXPECT_EQ(emu.failures(), 0) << s.name;
  }
}

// Every launch the backend makes of these schedules, its arguments built
// as the backend builds them (layer_launches.h) over stand-in device
// pointers: no launcher refuses them (each checks its arguments before it
// asks the device anything, so this runs without a GPU).
void check_launches(const Model& m, const cuda::StepSchedule& s, int64_t B, int* checked) {
  const ModelConfig& c = m.config();
  const CacheSpec spec = cache_spec(c);
  // Stand-ins: aligned, distinct (a launcher may refuse aliased buffers).
  uintptr_t next = uintptr_t{1} << 32;
  auto fake = [&](auto* p) {
    next += uintptr_t{1} << 32;
    return reinterpret_cast<decltype(p)>(next);
  };
  float* f = fake(static_cast<float*>(nullptr));
  for (const Block& blk : m.program().blocks) {
    if (blk.cache_layer < 0) continue;
    cuda::DeviceBlock d;
    d.kind = blk.kind, d.cache_layer = blk.cache_layer;
    d.conv_w = f, d.A_log = d.D = d.dt_bias = d.norm_w = f;
    cuda::LayerArgs a;
    a.config = &c, a.blk = &d, a.page_size = B, a.sched = reinterpret_cast<const int32_t*>(f), a.check_only = true;
    uint16_t* const h = nullptr;
    a.proj = fake(h), a.xconv = fake(h), a.y = fake(h), a.cC = fake(h), a.gq = fake(h), a.gk = fake(h);
    a.gv = fake(h), a.win_stage = fake(h);
    a.mamba_scratch = fake(f), a.gg = fake(f), a.gbeta = fake(f), a.gu = fake(f), a.attn_scratch = fake(f);
    cuda::SsmStore st;
    cuda::KvStore kv;
    Status r;
    if (blk.kind == BlockKind::kAttention) {
      const AttentionConfig& ac = c.attn;
      const int64_t D = ac.head_dim, d_kv = ac.n_kv_heads * D, head = ac.output_gate ? 2 * D : D;
      d.in.n_out = blk.attn.q.n_out + blk.attn.k.n_out + blk.attn.v.n_out;
      kv.width = d_kv, kv.rows = fake(h);
      kv.k_pages = fake(static_cast<uint16_t**>(nullptr)), kv.v_pages = fake(static_cast<uint16_t**>(nullptr));
      a.kv = &kv, a.q = fake(h), a.k = fake(h), a.v = fake(h), a.q_head_stride = head;
      a.ldq = ac.qk_norm ? ac.n_heads * head : d.in.n_out, a.ldk = a.ldv = ac.qk_norm ? d_kv : d.in.n_out;
      r = cuda::attention_layer(a, s);
    } else {
      d.in.n_out = blk.kind == BlockKind::kMamba2
                       ? blk.mamba.in_proj.n_out
                       : blk.gdn.in_qkv.n_out + blk.gdn.in_z.n_out + blk.gdn.in_a.n_out + blk.gdn.in_b.n_out;
      d.conv_b = blk.kind == BlockKind::kMamba2 && blk.mamba.conv_b != nullptr ? f : nullptr;
      st.shape = cuda::ssm_shape(spec.layers[size_t(blk.cache_layer)]);
      st.log_a = fake(h), st.log_pre = fake(h), st.window = fake(h), st.log_b = fake(h);
      st.log_c = fake(f), st.state = fake(f);
      a.ssm = &st;
      r = cuda::ssm_layer(a, s);
    }
    EXPECT_TRUE(r.ok()) << block_kind_name(blk.kind) << " layer " << blk.cache_layer << ": " << r.message();
    ++*checked;
  }
}

TEST_P(CudaSchedule, LaunchersTakeEveryScheduledLaunch) {
  int checked = 0;
  for (const Limits& l : limits())
    for (const Named& s : strategies()) {
      test::EmulatedBackend emu(*model_, l.lim);
      emu.on_schedule = [&](const cuda::StepSchedule& sched) {
        check_launches(*model_, sched, s.opt.page_size, &checked);
      };
      test::PlannedAs ref(*cpu_, emu);
      run_script(emu, ref, s.opt, 3, s.name + "/" + l.name);
      ASSERT_FALSE(HasFailure()) << s.name << "/" << l.name;
    }
  EXPECT_GT(checked, 1000);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaSchedule, ::testing::Values("nemotron_h_tiny", "qwen3_5_tiny"));

// The schedule's own refusals: a plan that breaks what it relies on.
TEST(CudaScheduleRefusals, BrokenPlansAreRefusedByName) {
  StepPlan p;
  p.page_size = 2;
  p.tokens = {1, 2, 3};
  PlanSlice s;
  s.seq = 9, s.pos = 4, s.n = 3, s.row = 0, s.base = 0, s.base_pos = 2, s.table_begin = 0;
  p.slices = {s};
  p.pages = {0, 1, 2, 3};
  p.logs = {0, -1, -1, -1};  // page 1 holds entries 2..3, which the slice replays, but has no log
  auto r = cuda::build_schedule(p, {}, true, false, {}, {10, 20, 21});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sequence 9"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("no log slot"), std::string::npos) << r.status().message();
  p.logs = {0, 1, -1, -1};
  ASSERT_TRUE(cuda::build_schedule(p, {}, true, false, {}, {10, 20, 21}).ok());
  p.slices[0].row = 1;  // rows [1, 4) of 3
  EXPECT_FALSE(cuda::build_schedule(p, {}, true, false, {}, {10, 20, 21}).ok());
  p.slices[0].row = 0;
  const int64_t bad_row[1] = {3};
  EXPECT_FALSE(cuda::build_schedule(p, bad_row, true, false, {}, {10, 20, 21}).ok());
}

}  // namespace
}  // namespace replayssm
