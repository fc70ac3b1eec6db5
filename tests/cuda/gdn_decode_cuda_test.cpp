// CUDA Gated DeltaNet decode kernels against the CPU per-token arithmetic
// (ops/cpu/ssm_step.h): odd and real sizes (all register tiles), T = 1 and
// verify-sized T, GQA-style key/value head ratios, per-sequence log lengths
// and folds (and steps given no fold arrays); outputs, the u written to the
// log, and folded/stepped states checked. Skipped where no CUDA device exists (CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/ssm_step.h"
#include "ops/cuda/gdn_decode.h"

namespace replayssm {
namespace {

using test::Bf;
using test::close;
using test::Dev;
using test::uniform;
using test::unit_rows;

struct Shape {
  int batch, Hk, Hv, dk, dv, W, T;
};

// A kernel variant (GdnDecodeArgs::variant), the streaming blocks' shape,
// fold_rows (1: a one-token fold's row coefficients precomputed), mma
// (1: the passes on tensor cores, −1: on FMAs, 0: the launcher's choice)
// and early (GdnDecodeArgs::early: the first state rows read before the
// PDL wait; every call here follows a copy, so that holds); l2_ahead
// (GdnDecodeArgs::l2_ahead: passes asked of L2 ahead, −1 the launcher's).
struct Kernel {
  int variant, slice_cols, tile_rows, fold_rows = 0, mma = 0;
  bool early = false;
  int l2_ahead = -1;
};

void PrintTo(const Shape& s, std::ostream* os);
void PrintTo(const std::tuple<Shape, Kernel>& p, std::ostream* os) {
  PrintTo(std::get<0>(p), os);
  const Kernel k = std::get<1>(p);
  if (k.variant == 2) *os << "_sliced";
  else if (k.variant == 3) *os << "_warps";
  else if (k.variant == 4) *os << "_warps_dual";
  else
    *os << "_streaming" << k.slice_cols << "x" << k.tile_rows << (k.fold_rows > 0 ? "_fold_rows" : "")
        << (k.mma > 0 ? "_mma" : k.mma < 0 ? "_fma" : "");
  if (k.early) *os << "_early";
  if (k.l2_ahead >= 0) *os << "_l2_ahead" << k.l2_ahead;
}
void set_kernel(ops::cuda::GdnDecodeArgs& a, const Kernel& k) {
  a.variant = k.variant, a.slice_cols = k.slice_cols, a.tile_rows = k.tile_rows, a.fold_rows = k.fold_rows,
  a.mma = k.mma, a.early = k.early, a.l2_ahead = k.l2_ahead;
}
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B" << s.batch << "_Hk" << s.Hk << "_Hv" << s.Hv << "_dk" << s.dk << "_dv" << s.dv << "_W" << s.W << "_T"
      << s.T;
}




// Both kernel variants (streaming, column slices) on every shape, the
// streaming one at several block shapes (a slice width that does not divide
// dv falls back to one scalar slice).
class GdnCuda : public ::testing::TestWithParam<std::tuple<Shape, Kernel>> {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// The replay on shape s with kernel k, against stepping on the CPU. With
// folds, per-sequence fold counts (none, all, some) into the checkpoint or
// another slot; without, no fold arrays at all, as a step plans the
// steps that fold nothing (the launcher's instances without the fold).
//
// Fork groups (GdnDecodeArgs::group_start): groups of sizes[0], sizes[1],
// … members (cycled) at consecutive positions of the decode order, sharing
// the first member's checkpoint; `scattered`: the order a shuffle of the
// batch and two empty groups after the last. Only a sequence alone in its
// group folds. split: the sums kernel's blocks (GdnDecodeArgs::group_split).
struct Groups {
  std::vector<int> sizes;  // empty: no fork groups
  bool scattered = false;
  int split = 0;
};
void check_replay(const Shape& s, const Kernel& k, bool folds, const Groups& gr = {}) {
  SCOPED_TRACE(folds ? "fold arrays" : "no fold arrays");
  const int B = s.batch, Hk = s.Hk, Hv = s.Hv, dk = s.dk, dv = s.dv, W = s.W, T = s.T, rep = Hv / Hk;
  std::mt19937 g(5 + T);
  const int slots = 2 * B + 1;
  std::vector<int32_t> slot(B), n_log(B), fold(B), fold_slot(B);
  for (int b = 0; b < B; ++b) {
    slot[b] = 2 * b + 1;
    n_log[b] = T + (b * 5 + 2) % (W - T + 1);
    const int base = n_log[b] - T;
    fold[b] = !folds || b % 4 == 1 ? 0 : (b % 4 == 2 ? base : (b * 7) % (base + 1));
    fold_slot[b] = b % 3 == 0 ? slot[b] : 2 * b;
  }
  std::vector<int32_t> group_start{0}, order(B);
  for (int v = 0; v < B; ++v) order[v] = v;
  if (gr.scattered) std::shuffle(order.begin(), order.end(), g);
  int max_group = 0;
  for (int v = 0, n = 0; !gr.sizes.empty() && v < B; ++n) {
    const int members = std::min(B - v, gr.sizes[n % gr.sizes.size()]);
    for (int m = 0; m < members; ++m) {
      slot[order[v + m]] = slot[order[v]];
      if (members > 1) fold[order[v + m]] = 0;
    }
    v += members, max_group = std::max(max_group, members);
    group_start.push_back(v);
  }
  if (gr.scattered) group_start.push_back(B), group_start.push_back(B);
  std::vector<float> state = uniform(g, size_t(slots) * Hv * dk * dv, -0.3f, 0.3f);
  Bf lk = unit_rows(g, size_t(B) * W * Hk, dk, 1.0f), q = unit_rows(g, size_t(B) * T * Hk, dk, 1.0f / std::sqrt(dk)),
     v = test::bf_of(uniform(g, size_t(B) * T * Hv * dv, -1.0f, 1.0f));
  std::vector<float> log_u = uniform(g, size_t(B) * W * Hv * dv, -0.5f, 0.5f);
  std::vector<float> log_g = uniform(g, size_t(B) * W * Hv, -1.0f, -0.01f);
  std::vector<float> beta = uniform(g, size_t(B) * T * Hv, 0.05f, 0.95f);

  Dev<float> dstate(state), du(log_u), dg(log_g), dbeta(beta);
  Dev<int32_t> dslot(slot), dn(n_log), dfold(fold), dfslot(fold_slot);
  Dev<uint16_t> dk_(lk.bits), dq(q.bits), dvv(v.bits), dout(std::vector<uint16_t>(size_t(B) * T * Hv * dv));
  ops::cuda::GdnDecodeArgs a;
  a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.W = W, a.T = T;
  a.state = dstate.p, a.slot = dslot.p, a.q = dq.p, a.v = dvv.p, a.beta = dbeta.p, a.o = dout.p;
  a.n_log = dn.p, a.log_k = dk_.p, a.log_u = du.p, a.log_g = dg.p;
  if (folds) a.fold = dfold.p, a.fold_slot = dfslot.p, a.max_fold = W;
  set_kernel(a, k);
  Dev<int32_t> dgroups(group_start), dorder(order);
  Dev<float> scratch(std::vector<float>(ops::cuda::gdn_replay_scratch_floats(B, T, Hv, dv)));
  if (!gr.sizes.empty())
    a.group_start = dgroups.p, a.n_groups = int(group_start.size()) - 1, a.max_group = max_group, a.scratch = scratch.p;
  if (gr.scattered) a.seq = dorder.p;
  a.group_split = gr.split;
  ASSERT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> o = dout.get();
  const std::vector<float> after = dstate.get(), u_after = du.get();

  const size_t hs = size_t(dk) * dv;
  for (int b = 0; b < B; ++b) {
    const size_t ss = size_t(slot[b]) * Hv * hs;
    std::vector<float> S(state.begin() + ss, state.begin() + ss + Hv * hs), u(dv), oo(dv);
    if (fold_slot[b] != slot[b] || fold[b] == 0)
      ASSERT_TRUE(std::equal(S.begin(), S.end(), after.begin() + ss)) << "checkpoint of b " << b << " written";
    const int base = n_log[b] - T;
    for (int e = 0; e < n_log[b]; ++e) {
      const size_t le = size_t(b) * W + e;
      const int t = e - base;
      for (int h = 0; h < Hv; ++h) {
        float* Sh = S.data() + h * hs;
        const float* k = lk.f.data() + (le * Hk + h / rep) * dk;
        ops::cpu::gdn_decay_head(Sh, dk, dv, std::exp(log_g[le * Hv + h]));
        if (t < 0) {
          ops::cpu::gdn_rank1_head(Sh, dk, dv, k, log_u.data() + (le * Hv + h) * dv);
          continue;
        }
        const size_t bt = size_t(b) * T + t;
        ops::cpu::gdn_correct_head(Sh, dk, dv, k, v.f.data() + (bt * Hv + h) * dv, beta[bt * Hv + h], u.data());
        ops::cpu::gdn_rank1_head(Sh, dk, dv, k, u.data());
        ops::cpu::gdn_output_head(Sh, dk, dv, q.f.data() + (bt * Hk + h / rep) * dk, oo.data());
        for (int c = 0; c < dv; ++c) {
          ASSERT_TRUE(close(u_after[(le * Hv + h) * dv + c], u[c], 1e-4f)) << "u b " << b << " t " << t << " h " << h;
          const float got = bf16_to_f32(o[(bt * Hv + h) * dv + c]);
          ASSERT_TRUE(close(got, oo[c], test::kBf16Tol)) << "o b " << b << " t " << t << " h " << h << " c " << c
                                                         << ": " << got << " vs " << oo[c];
        }
      }
      if (e + 1 == fold[b]) {
        const size_t fs = size_t(fold_slot[b]) * Hv * hs;
        for (size_t i = 0; i < S.size(); ++i)
          ASSERT_TRUE(close(after[fs + i], S[i], test::kStateTol)) << "fold b " << b << " i " << i;
      }
    }
  }
}

TEST_P(GdnCuda, ReplayWithFoldsMatchesSteppingTheRecurrence) {
  check_replay(std::get<0>(GetParam()), std::get<1>(GetParam()), true);
}
TEST_P(GdnCuda, ReplayWithoutFoldArraysMatchesSteppingTheRecurrence) {
  check_replay(std::get<0>(GetParam()), std::get<1>(GetParam()), false);
}

// Fork groups on every shape: groups of 3, 1 and 2 (T ≤ 2: 12 sums a
// block, T = 3–4: 24, the wide instance), beams of 2 and 8 (4 and 16
// sums), consecutive and scattered over the batch with empty groups after,
// with and without fold arrays (only a sequence alone folds: groups of 1
// and 2 put one first at every shape), the sums kernel over whole rows and
// over halves.
class GdnCudaGroups : public test::GpuTestWithParam<Shape> {};
TEST_P(GdnCudaGroups, ForkGroupsMatchStepping) {
  const Shape s = GetParam();
  for (int split : {1, 2})
    for (Groups gr : {Groups{{3, 1, 2}, false}, Groups{{3, 1, 2}, true}, Groups{{2}, true}, Groups{{8, 1}, true},
                      Groups{{1, 2}, false}})
      for (bool folds : {false, true}) {
        gr.split = split;
        SCOPED_TRACE("groups of " + std::to_string(gr.sizes[0]) + (gr.scattered ? ", scattered" : "") + ", split " +
                     std::to_string(split));
        check_replay(s, Kernel{0, 0, 0}, folds, gr);
      }
}

// Fork groups at an odd value width (the sums' scalar loads and stores),
// logs and folds past 32 entries (the prefix sums' second chunk), a
// 5-token verify in groups of 3 (30 sums: the widest instance), an empty
// group between two others, and keys of one k-step.
TEST(GdnCudaReplay, ForkGroupsAtOddWidthsLongLogsAndWideVerifies) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (int split : {1, 2})
    for (bool folds : {false, true}) {
      SCOPED_TRACE("split " + std::to_string(split));
      // Sequences 6 and 7 (a group) log 34 and 39 entries; 14, alone, folds 33.
      check_replay(Shape{15, 1, 3, 37, 37, 40, 2}, Kernel{0, 0, 0}, folds, Groups{{2, 0, 1}, false, split});
      check_replay(Shape{5, 2, 4, 24, 40, 12, 5}, Kernel{0, 0, 0}, folds, Groups{{3, 1}, false, split});
      // Keys of 8 and 5 rows: one k-step, the second half of the rows empty.
      check_replay(Shape{5, 1, 2, 8, 20, 9, 1}, Kernel{0, 0, 0}, folds, Groups{{1, 2}, false, split});
      check_replay(Shape{5, 1, 2, 5, 33, 9, 2}, Kernel{0, 0, 0}, folds, Groups{{2, 1}, true, split});
    }
}

// Beams of 8 at Qwen3-Next shapes (16 sums a block, the launcher's
// instance for fork groups), with a sequence alone between; the
// launcher's choice of the sums blocks, and each forced. With pairs over
// a batch of 20 (10 groups: 640 blocks of 64 columns) the launcher's
// choice on the H200 (132 SMs) is whole rows; with the beams, halves.
TEST(GdnCudaReplay, BeamsOfEightAtQwen3NextShapes) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (int split : {0, 1, 2})
    for (bool folds : {false, true}) {
      SCOPED_TRACE("split " + std::to_string(split));
      check_replay(Shape{17, 16, 32, 128, 128, 16, 1}, Kernel{0, 0, 0}, folds, Groups{{8, 1}, true, split});
    }
  for (bool folds : {false, true}) check_replay(Shape{20, 16, 32, 128, 128, 16, 1}, Kernel{0, 0, 0}, folds, Groups{{2}, false});
}

// Keys tall enough that a verify's staged k, q and v (bf16) outgrow the
// sums' shared memory they borrow and take their own (gdn_replay.cu,
// kStage), and rows of dk % 8 = 2 (4-byte copies): the tensor-core pass
// (the launcher's choice for T = 4) and the FMA one; with fold arrays
// sequence 2 folds its whole log.
TEST(GdnCudaReplay, TallKeysVerifyStagesItsInputsApart) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const Kernel k : {Kernel{1, 128, 4}, Kernel{1, 128, 4, 0, -1}})
    for (bool folds : {false, true}) check_replay(Shape{3, 1, 2, 202, 128, 9, 4}, k, folds);
}

// L2 asked for 0–4 passes ahead: one token and a verify at Qwen3-Next's
// shape, and dk = 37 rows, not a multiple of a pass's 16, so the last
// pass is partial and the prefetches must stop at the state's last row
// (one token: the FMA pass, whole passes unbounded then a bounded one;
// T = 3: the tensor-core pass). A prefetch is a hint that changes no
// value, so this checks only that asking for one reads or writes nothing
// else; whether L2 got it shows in time alone (the SSM bench's
// --gdn-l2-ahead).
TEST(GdnCudaReplay, PrefetchDepthsLeaveResultsAlone) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (int ahead : {0, 2, 4})
    for (const Shape s : {Shape{2, 16, 32, 128, 128, 16, 1}, Shape{2, 16, 32, 128, 128, 20, 4},
                          Shape{3, 1, 2, 37, 128, 7, 1}, Shape{3, 1, 2, 37, 128, 7, 3}})
      for (bool folds : {false, true}) {
        SCOPED_TRACE("l2_ahead " + std::to_string(ahead));
        check_replay(s, Kernel{1, 128, 4, 0, 0, false, ahead}, folds);
      }
}

// The standard step on shape s with kernel k, against stepping on the CPU:
// every token's output and written state.
void check_step(const Shape& s, const Kernel& kern) {
  const int B = s.batch, Hk = s.Hk, Hv = s.Hv, dk = s.dk, dv = s.dv, T = s.T, rep = Hv / Hk;
  std::mt19937 g(9 + T);
  const int slots = B + B * T;
  std::vector<int32_t> slot(B), out_slot(size_t(B) * T);
  for (int b = 0; b < B; ++b) {
    slot[b] = B - 1 - b;  // a permutation: in-place writes never collide
    for (int t = 0; t < T; ++t) out_slot[size_t(b) * T + t] = T == 1 ? slot[b] : B + b * T + t;
  }
  std::vector<float> state = uniform(g, size_t(slots) * Hv * dk * dv, -0.3f, 0.3f);
  Bf k = unit_rows(g, size_t(B) * T * Hk, dk, 1.0f), q = unit_rows(g, size_t(B) * T * Hk, dk, 1.0f / std::sqrt(dk)),
     v = test::bf_of(uniform(g, size_t(B) * T * Hv * dv, -1.0f, 1.0f));
  std::vector<float> gg = uniform(g, size_t(B) * T * Hv, -1.0f, -0.01f), beta = uniform(g, size_t(B) * T * Hv, 0.05f, 0.95f);
  Dev<float> dstate(state), dg(gg), dbeta(beta);
  Dev<int32_t> dslot(slot), dos(out_slot);
  Dev<uint16_t> dk_(k.bits), dq(q.bits), dvv(v.bits), dout(std::vector<uint16_t>(size_t(B) * T * Hv * dv));
  ops::cuda::GdnDecodeArgs a;
  a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = T;
  a.state = dstate.p, a.slot = dslot.p, a.q = dq.p, a.v = dvv.p, a.beta = dbeta.p, a.o = dout.p;
  a.k = dk_.p, a.g = dg.p, a.out_slot = dos.p;
  set_kernel(a, kern);
  ASSERT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> o = dout.get();
  const std::vector<float> after = dstate.get();
  const size_t hs = size_t(dk) * dv;
  for (int b = 0; b < B; ++b) {
    const size_t ss = size_t(slot[b]) * Hv * hs;
    std::vector<float> S(state.begin() + ss, state.begin() + ss + Hv * hs), u(dv), oo(dv);
    for (int t = 0; t < T; ++t) {
      const size_t bt = size_t(b) * T + t;
      for (int h = 0; h < Hv; ++h) {
        float* Sh = S.data() + h * hs;
        const float* kh = k.f.data() + (bt * Hk + h / rep) * dk;
        ops::cpu::gdn_decay_head(Sh, dk, dv, std::exp(gg[bt * Hv + h]));
        ops::cpu::gdn_correct_head(Sh, dk, dv, kh, v.f.data() + (bt * Hv + h) * dv, beta[bt * Hv + h], u.data());
        ops::cpu::gdn_rank1_head(Sh, dk, dv, kh, u.data());
        ops::cpu::gdn_output_head(Sh, dk, dv, q.f.data() + (bt * Hk + h / rep) * dk, oo.data());
        for (int c = 0; c < dv; ++c)
          ASSERT_TRUE(close(bf16_to_f32(o[(bt * Hv + h) * dv + c]), oo[c], test::kBf16Tol))
              << "o b " << b << " t " << t << " h " << h << " c " << c;
      }
      const size_t os = size_t(out_slot[bt]) * Hv * hs;
      for (size_t i = 0; i < S.size(); ++i)
        ASSERT_TRUE(close(after[os + i], S[i], test::kStateTol)) << "state b " << b << " t " << t << " i " << i;
    }
  }
}

TEST_P(GdnCuda, StandardStepWritesOneStatePerTokenAndMatchesStepping) {
  check_step(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

// The register-resident standard step (variant 3, dk ≤ 128) on the shapes
// it takes — odd values (the scalar path), keys of 8 and 16 rows a lane,
// dk % 8 ≠ 0, up to 8 tokens, several blocks of columns with a partial
// last one (dv 70, 100, 300: the launcher's choice for dv > 256 too) — and
// at a batch of several waves of blocks.
class GdnCudaStepWarps : public test::GpuTestWithParam<Shape> {};
TEST_P(GdnCudaStepWarps, StandardStepWritesOneStatePerTokenAndMatchesStepping) {
  for (bool early : {false, true}) {
    SCOPED_TRACE(early ? "early state reads" : "state read after the wait");
    check_step(GetParam(), Kernel{3, 0, 0, 0, 0, early});
  }
}
// The same warps as the fast replay's kernel (variant 3: exact replay's
// sequential recurrence, the older entries staged and, with early, applied
// before the wait): with and without folds, against stepping.
TEST_P(GdnCudaStepWarps, ReplayMatchesSteppingTheRecurrence) {
  for (bool early : {false, true})
    for (bool folds : {false, true}) {
      SCOPED_TRACE(early ? "older entries before the wait" : "after the wait");
      check_replay(GetParam(), Kernel{3, 0, 0, 0, 0, early}, folds);
    }
}
// Those warps with the older entries in the dual form on tensor cores
// (variant 4, the fast replay's kernel at small batch): logs of up to 64
// entries (several products of 16), with and without folds, against
// stepping within the fast replay's tolerance.
TEST_P(GdnCudaStepWarps, DualFormReplayMatchesSteppingTheRecurrence) {
  for (bool early : {false, true})
    for (bool folds : {false, true}) {
      SCOPED_TRACE(early ? "older entries before the wait" : "after the wait");
      check_replay(GetParam(), Kernel{4, 0, 0, 0, 0, early}, folds);
    }
}

// The register-resident warps read arrays that are views at any offset:
// every array one element past an aligned start (no 16-byte access then
// holds a row) gives the bits of the aligned run — the standard step (a
// verify, so a state per token) and exact replay over a log with a fold.
TEST(GdnCudaStep, WarpsTakeArraysAtAnyOffset) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 3, Hk = 2, Hv = 4, dk = 128, dv = 64, T = 2, W = 8, slots = B + B * T;
  std::mt19937 g(77);
  std::vector<int32_t> slot(B), out_slot(size_t(B) * T), n_log(B), fold(B), fold_slot(B);
  for (int b = 0; b < B; ++b) {
    slot[b] = b, n_log[b] = T + 3 + b, fold[b] = b, fold_slot[b] = B + b;
    for (int t = 0; t < T; ++t) out_slot[size_t(b) * T + t] = B + b * T + t;
  }
  const std::vector<float> state = uniform(g, size_t(slots) * Hv * dk * dv, -0.3f, 0.3f);
  const Bf k = unit_rows(g, size_t(B) * W * Hk, dk, 1.0f), q = unit_rows(g, size_t(B) * T * Hk, dk, 0.09f),
           v = test::bf_of(uniform(g, size_t(B) * T * Hv * dv, -1.0f, 1.0f));
  const std::vector<float> gg = uniform(g, size_t(B) * W * Hv, -1.0f, -0.01f),
                           beta = uniform(g, size_t(B) * T * Hv, 0.05f, 0.95f),
                           log_u = uniform(g, size_t(B) * W * Hv * dv, -0.5f, 0.5f);
  Dev<int32_t> dslot(slot), dos(out_slot), dn(n_log), dfold(fold), dfs(fold_slot);
  // (outputs, states, log u) of one run with every array `off` elements in.
  auto run = [&](size_t off, bool exact) {
    auto pad = [&](const auto& h) {
      std::decay_t<decltype(h)> x(off, {});
      x.insert(x.end(), h.begin(), h.end());
      return x;
    };
    Dev<float> dstate(pad(state)), dg(pad(gg)), dbeta(pad(beta)), du(pad(log_u));
    Dev<uint16_t> dk_(pad(k.bits)), dq(pad(q.bits)), dvv(pad(v.bits)),
        dout(std::vector<uint16_t>(off + size_t(B) * T * Hv * dv));
    ops::cuda::GdnDecodeArgs a;
    a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = T, a.variant = 3;
    a.state = dstate.p + off, a.slot = dslot.p, a.q = dq.p + off, a.v = dvv.p + off, a.beta = dbeta.p + off;
    a.o = dout.p + off;
    if (exact) {
      a.W = W, a.exact = true, a.n_log = dn.p, a.log_k = dk_.p + off, a.log_u = du.p + off, a.log_g = dg.p + off;
      a.fold = dfold.p, a.fold_slot = dfs.p, a.max_fold = W;
      EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaSuccess);
    } else {
      a.k = dk_.p + off, a.g = dg.p + off, a.out_slot = dos.p;
      EXPECT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaSuccess);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto strip = [&](auto x) { return decltype(x)(x.begin() + off, x.end()); };
    return std::make_tuple(strip(dout.get()), strip(dstate.get()), strip(du.get()));
  };
  for (bool exact : {false, true}) {
    SCOPED_TRACE(exact ? "exact replay" : "standard step");
    const auto aligned = run(0, exact), offset = run(1, exact);
    EXPECT_TRUE(std::get<0>(aligned) == std::get<0>(offset)) << "outputs differ";
    EXPECT_TRUE(std::get<1>(aligned) == std::get<1>(offset)) << "states differ";
    EXPECT_TRUE(std::get<2>(aligned) == std::get<2>(offset)) << "log u differs";
    EXPECT_TRUE(std::get<1>(aligned) != state) << "nothing written";
  }
}

TEST(GdnCudaArgs, OutOfRangeShapesAreRefused) {
  // Every array (host memory), so that each refusal is of the field under
  // test and not of a missing array: every call here is refused before the
  // device reads any.
  const int32_t groups[2] = {0, 1}, rows[1] = {0};
  float fx[1] = {};
  uint16_t hx[1] = {};
  ops::cuda::GdnDecodeArgs a;
  a.n_log = a.slot = a.out_slot = groups, a.log_u = fx, a.log_g = fx, a.log_k = hx;
  a.state = fx, a.q = a.v = a.k = hx, a.o = hx, a.beta = a.g = fx;
  a.batch = 1, a.Hk = 2, a.Hv = 4, a.dk = 600, a.dv = 64, a.W = 8, a.T = 1;  // dk > 512
  EXPECT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.dk = 16, a.dv = 300, a.variant = 1;  // the streaming replay: dv > 256 and no slice divides it
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.dv = 64, a.tile_rows = 6;  // rows per warp: 4 or 8
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.tile_rows = 0, a.slice_cols = 32;  // columns per block: 64, 128 or 256
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.slice_cols = 0;
  a.dv = 64, a.variant = 3, a.dk = 129;  // rows past the warps' registers
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.variant = 4;
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.variant = 3;
  a.exact = true;
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.exact = false, a.dk = 16, a.variant = 0;
  for (int missing = 0; missing < 9; ++missing) {  // the standard step's arrays: every one required
    ops::cuda::GdnDecodeArgs m = a;
    if (missing == 0) m.state = nullptr;
    if (missing == 1) m.slot = nullptr;
    if (missing == 2) m.q = nullptr;
    if (missing == 3) m.v = nullptr;
    if (missing == 4) m.beta = nullptr;
    if (missing == 5) m.o = nullptr;
    if (missing == 6) m.k = nullptr;
    if (missing == 7) m.g = nullptr;
    if (missing == 8) m.out_slot = nullptr;
    EXPECT_EQ(ops::cuda::gdn_step_cuda(m, nullptr), cudaErrorInvalidValue) << "array " << missing << " missing";
    if (missing < 6) EXPECT_EQ(ops::cuda::gdn_replay_cuda(m, nullptr), cudaErrorInvalidValue) << "array " << missing;
  }
  a.variant = 4;  // no such variant of the standard step (the replay's dual-form warps)
  EXPECT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.variant = 5;
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.variant = 0;
  a.dv = 64, a.Hv = 5;  // Hv not a multiple of Hk
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.Hv = 4, a.W = 65;  // W > 64
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.W = 8, a.T = 9;  // T > 8
  EXPECT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.T = 1, a.fold_rows = 2;  // 1, 0 or −1
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.fold_rows = 0, a.mma = -2;  // 1, 0 or −1
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.mma = 0;
  for (int ahead : {-2, 5}) {  // −1..4
    a.l2_ahead = ahead;
    EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue) << "l2_ahead " << ahead;
  }
  a.l2_ahead = -1;
  // Fork groups: need scratch; not with a row map, exact replay or a
  // forced variant; members × T ≤ 16; group_split 0–2; a decode order
  // only with groups.
  a.group_start = groups, a.n_groups = 1, a.max_group = 2;  // no scratch
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.scratch = fx, a.max_group = 17;  // 17 × T = 1 > 16
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.max_group = 4, a.T = 5;  // 20 > 16
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.T = 1, a.exact = true;
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.exact = false, a.row = rows;
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.row = nullptr, a.variant = 1;
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.variant = 0, a.n_groups = 0;
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.n_groups = 1;
  for (int split : {-1, 3}) {  // 0, 1 or 2
    a.group_split = split;
    EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  }
  a.group_split = 0;
  a.group_start = nullptr, a.seq = groups;  // a decode order without groups
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
}

const auto kShapes = ::testing::Values(Shape{3, 2, 6, 12, 10, 5, 1},       // odd sizes, generic tile
                                       Shape{4, 1, 3, 24, 40, 9, 3},       // odd sizes, verify
                                       Shape{3, 2, 4, 64, 128, 12, 1},     // 128-column tile
                                       Shape{2, 1, 2, 48, 256, 10, 4},     // wide values
                                       Shape{2, 2, 2, 200, 70, 6, 2},      // tall keys, partial slice
                                       Shape{3, 1, 2, 37, 128, 7, 3},      // odd keys, 128-column slice
                                       Shape{2, 16, 32, 128, 128, 16, 1},  // Qwen3-Next
                                       Shape{2, 16, 32, 128, 128, 20, 4},  // its verify, T = 4
                                       Shape{2, 16, 48, 128, 128, 16, 2});  // Qwen3.5-27B
INSTANTIATE_TEST_SUITE_P(Shapes, GdnCudaGroups, kShapes);
INSTANTIATE_TEST_SUITE_P(Shapes, GdnCudaStepWarps,
                         ::testing::Values(Shape{3, 2, 6, 12, 10, 5, 1}, Shape{4, 1, 3, 24, 40, 9, 3},
                                           Shape{3, 2, 4, 64, 128, 12, 1}, Shape{2, 1, 2, 48, 256, 10, 4},
                                           Shape{3, 1, 2, 37, 128, 7, 3}, Shape{2, 1, 2, 65, 52, 40, 2},
                                           Shape{3, 1, 2, 100, 36, 50, 8}, Shape{2, 2, 4, 128, 20, 64, 6},
                                           Shape{2, 16, 32, 128, 128, 20, 4}, Shape{2, 16, 48, 128, 128, 16, 2},
                                           Shape{3, 1, 2, 128, 100, 8, 2}, Shape{2, 1, 2, 96, 70, 5, 3},
                                           Shape{2, 1, 2, 64, 300, 6, 1}, Shape{40, 16, 32, 128, 128, 16, 1}));
INSTANTIATE_TEST_SUITE_P(Shapes, GdnCuda,
                         ::testing::Combine(kShapes, ::testing::Values(Kernel{1, 0, 0}, Kernel{2, 0, 0}, Kernel{1, 64, 4},
                                                                       Kernel{1, 64, 8}, Kernel{1, 128, 4},
                                                                       Kernel{1, 256, 8}, Kernel{1, 128, 4, 1},
                                                                       Kernel{1, 128, 4, 0, 1}, Kernel{1, 128, 4, 0, -1},
                                                                       Kernel{0, 0, 0, 0, 0, true},
                                                                       Kernel{1, 128, 4, 1, 0, true},
                                                                       Kernel{1, 128, 4, 0, 1, true})));

}  // namespace
}  // namespace replayssm
