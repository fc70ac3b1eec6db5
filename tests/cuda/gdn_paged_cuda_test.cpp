// Gated DeltaNet replay over a paged log (GdnDecodeArgs::pages) against
// the same entries in the contiguous layout: the streaming blocks at
// several slice and pass shapes (a fold's row coefficients, the passes on
// tensor cores and on FMAs, the first pass before the PDL wait), the
// column slices, the register-resident warps (the sequential recurrence
// and the dual form, older entries before and after the wait), exact
// replay on each of the standard step's kernels, and fork groups (the sums
// kernel over whole rows and halves, consecutive and scattered groups) —
// with and without folds, at page sizes 1, 4 and 16, random offsets of
// entry 0, slots in random order among unused ones. Outputs, folded
// states and the u written into the log must have the same bits in both
// layouts, and no row of the paged log but the new tokens' may change.
// Skipped where no CUDA device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cuda/gdn_decode.h"
#include "paged_log_util.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;
using test::PagedLayout;
using test::uniform;
using test::unit_rows;

struct Shape {
  int batch, Hk, Hv, dk, dv, W, T;
};

// A replay kernel as the suite forces it (GdnDecodeArgs fields of the same
// names) and fork groups (0: none; 1: groups of 3, 1, 2, … consecutive; 2:
// the same over a shuffled decode order, two empty groups after the last).
struct Kernel {
  const char* name;
  int variant, slice_cols, tile_rows, fold_rows, mma;
  bool early, exact;
  int groups, group_split;
};

void PrintTo(const std::tuple<Shape, Kernel>& p, std::ostream* os) {
  const Shape s = std::get<0>(p);
  *os << "B" << s.batch << "_Hk" << s.Hk << "_Hv" << s.Hv << "_dk" << s.dk << "_dv" << s.dv << "_W" << s.W << "_T"
      << s.T << "_" << std::get<1>(p).name;
}

using GdnPaged = test::GpuTestWithParam<std::tuple<Shape, Kernel>>;

TEST_P(GdnPaged, ReplayIsBitIdenticalToTheContiguousLog) {
  const Shape s = std::get<0>(GetParam());
  const Kernel k = std::get<1>(GetParam());
  const int B = s.batch, Hk = s.Hk, Hv = s.Hv, dk = s.dk, dv = s.dv, W = s.W, T = s.T;
  if (k.variant >= 3 && dk > ops::cuda::kGdnStepWarpsMaxDk)
    GTEST_SKIP() << "the register-resident warps take dk ≤ " << ops::cuda::kGdnStepWarpsMaxDk;
  if (k.groups > 0 && 3 * T > ops::cuda::kGdnMaxGroupRows) GTEST_SKIP() << "groups of 3 take T ≤ 5";
  std::mt19937 g(43 + T + dk);
  // As the contiguous suite (gdn_decode_cuda_test.cpp): sequence b reads
  // slot 2b + 1, folds in place (b % 3 == 0) or to 2b, none, all or some
  // of the entries before its tokens.
  const int slots = 2 * B + 1;
  std::vector<int32_t> slot(B), n_log(B), fold(B), fold_slot(B);
  for (int b = 0; b < B; ++b) {
    slot[b] = 2 * b + 1;
    n_log[b] = T + (b * 5 + 2) % (W - T + 1);
    const int base = n_log[b] - T;
    fold[b] = b % 4 == 1 ? 0 : (b % 4 == 2 ? base : (b * 7) % (base + 1));
    fold_slot[b] = b % 3 == 0 ? slot[b] : 2 * b;
  }
  const test::ForkGroups fg(g, B, k.groups, slot, fold);
  const std::vector<int32_t>& group_start = fg.start;
  const std::vector<int32_t>& order = fg.order;
  const std::vector<float> state = uniform(g, size_t(slots) * Hv * dk * dv, -0.3f, 0.3f);
  const Bf lk = unit_rows(g, size_t(B) * W * Hk, dk, 1.0f),
           q = unit_rows(g, size_t(B) * T * Hk, dk, 1.0f / std::sqrt(float(dk))),
           v = test::bf_of(uniform(g, size_t(B) * T * Hv * dv, -1.0f, 1.0f));
  const std::vector<float> log_u = uniform(g, size_t(B) * W * Hv * dv, -0.5f, 0.5f),
                           log_g = uniform(g, size_t(B) * W * Hv, -1.0f, -0.01f),
                           beta = uniform(g, size_t(B) * T * Hv, 0.05f, 0.95f);
  const int64_t UW = int64_t(Hv) * dv;  // log u's row width

  Dev<float> dstate(state), du(log_u), dg(log_g), dbeta(beta);
  Dev<int32_t> dslot(slot), dn(n_log), dfold(fold), dfslot(fold_slot), dgroups(group_start), dorder(order);
  Dev<uint16_t> dlk(lk.bits), dq(q.bits), dvv(v.bits), dout(std::vector<uint16_t>(size_t(B) * T * Hv * dv));
  Dev<float> scratch(std::vector<float>(ops::cuda::gdn_replay_scratch_floats(B, T, Hv, dv)));
  ops::cuda::GdnDecodeArgs a;
  a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.W = W, a.T = T;
  a.state = dstate.p, a.slot = dslot.p, a.q = dq.p, a.v = dvv.p, a.beta = dbeta.p, a.o = dout.p, a.n_log = dn.p;
  a.variant = k.variant, a.slice_cols = k.slice_cols, a.tile_rows = k.tile_rows, a.fold_rows = k.fold_rows;
  a.mma = k.mma, a.early = k.early, a.exact = k.exact;
  if (k.groups > 0) {
    a.group_start = dgroups.p, a.n_groups = int(group_start.size()) - 1, a.max_group = 3, a.scratch = scratch.p;
    a.group_split = k.group_split;
  }
  if (k.groups == 2) a.seq = dorder.p;
  // One run from the initial state and log u: (outputs, states).
  auto run = [&](bool folds, Dev<float>& u, const std::vector<float>& u0) {
    EXPECT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(u.p, u0.data(), sizeof(float) * u0.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemset(dout.p, 0xff, 2 * dout.n), cudaSuccess);
    a.log_u = u.p;
    a.fold = folds ? dfold.p : nullptr, a.fold_slot = folds ? dfslot.p : nullptr, a.max_fold = folds ? W : 0;
    EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return std::pair{dout.get(), dstate.get()};
  };
  // The contiguous log's entries in use, the rest a fill (to compare with
  // the paged log's, gathered back).
  auto in_use = [&](const std::vector<float>& contiguous) {
    std::vector<float> x(contiguous.size(), test::f32_garbage());
    for (int b = 0; b < B; ++b)
      std::copy_n(contiguous.begin() + int64_t(b) * W * UW, n_log[b] * UW, x.begin() + int64_t(b) * W * UW);
    return x;
  };

  for (const bool folds : {true, false}) {
    SCOPED_TRACE(folds ? "fold arrays" : "no fold arrays");
    a.log_k = dlk.p, a.log_g = dg.p, a.pages = {}, a.W = W;
    const auto [o_ref, s_ref] = run(folds, du, log_u);
    const std::vector<float> u_ref = in_use(du.get());
    for (const int page_size : {1, 4, 16}) {
      SCOPED_TRACE(testing::Message() << "pages of " << page_size);
      const PagedLayout L(g, B, W, page_size);
      const std::vector<uint16_t> pk = L.scatter(lk.bits, W, int64_t(Hk) * dk, test::kBf16Garbage);
      const std::vector<float> pu = L.scatter(log_u, W, UW, test::f32_garbage()),
                               pg = L.scatter(log_g, W, Hv, test::f32_garbage());
      Dev<uint16_t> dpk(pk);
      Dev<float> dpu(pu), dpg(pg);
      Dev<int32_t> dpage(L.page), dfirst(L.first);
      a.log_k = dpk.p, a.log_g = dpg.p;
      a.pages = {dpage.p, L.page_stride, dfirst.p, page_size};
      // Paged, W only bounds the log (0: kGdnMaxW): a forced kernel is the
      // same kernel under either bound.
      a.W = page_size == 4 && (k.variant != 0 || k.exact || k.groups > 0) ? 0 : W;
      const auto [o, st] = run(folds, dpu, pu);
      EXPECT_TRUE(test::same_bits(o, o_ref, "outputs"));
      EXPECT_TRUE(test::same_bits(st, s_ref, "states"));
      const std::vector<float> pu_after = dpu.get();
      EXPECT_TRUE(test::same_bits(L.gather(pu_after, W, UW, n_log, test::f32_garbage()), u_ref, "log u"));
      EXPECT_TRUE(L.only_entries_written(pu, pu_after, UW, n_log));
      EXPECT_TRUE(test::same_bits(dpk.get(), pk, "log k (read only)"));
      EXPECT_TRUE(test::same_bits(dpg.get(), pg, "log g (read only)"));
    }
  }
}

TEST(GdnPagedArgs, BadPagesAreRefused) {
  // Every array (host memory): each refusal is of the pages, before the
  // device reads anything.
  const int32_t table[2] = {0, 1};
  float fx[1] = {};
  uint16_t hx[1] = {};
  ops::cuda::GdnDecodeArgs a;
  a.n_log = a.slot = table, a.log_u = fx, a.log_g = fx, a.log_k = hx;
  a.state = fx, a.q = a.v = hx, a.o = hx, a.beta = fx;
  a.batch = 1, a.Hk = 2, a.Hv = 4, a.dk = 16, a.dv = 64, a.W = 8, a.T = 1;
  a.pages = {table, 2, table, 6};  // page size not a power of two
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.pages = {table, 2, nullptr, 4};  // no offsets
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.pages = {table, -1, table, 4};  // no table entries
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.pages = {table, 2, table, 4}, a.W = 65;  // W still bounds the log when paged
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.W = 8, a.exact = true, a.pages = {table, 2, table, -4};
  EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaErrorInvalidValue);
}

const Kernel kKernels[] = {
    {"launchers_choice", 0, 0, 0, 0, 0, false, false, 0, 0},
    {"launchers_choice_early", 0, 0, 0, 0, 0, true, false, 0, 0},
    {"streaming128x4", 1, 128, 4, 0, 0, false, false, 0, 0},
    {"streaming64x8", 1, 64, 8, 0, 0, false, false, 0, 0},
    {"streaming256x8", 1, 256, 8, 0, 0, false, false, 0, 0},
    {"streaming_fold_rows", 1, 128, 4, 1, 0, false, false, 0, 0},
    {"streaming_mma", 1, 128, 4, 0, 1, false, false, 0, 0},
    {"streaming_mma_early", 1, 128, 4, 0, 1, true, false, 0, 0},
    {"streaming_fma", 1, 128, 4, 0, -1, false, false, 0, 0},
    {"sliced", 2, 0, 0, 0, 0, false, false, 0, 0},
    {"warps", 3, 0, 0, 0, 0, false, false, 0, 0},
    {"warps_early", 3, 0, 0, 0, 0, true, false, 0, 0},
    {"warps_dual", 4, 0, 0, 0, 0, false, false, 0, 0},
    {"warps_dual_early", 4, 0, 0, 0, 0, true, false, 0, 0},
    {"exact_streaming", 1, 0, 0, 0, 0, false, true, 0, 0},
    {"exact_sliced", 2, 0, 0, 0, 0, false, true, 0, 0},
    {"exact_warps_early", 3, 0, 0, 0, 0, true, true, 0, 0},
    {"fork_groups", 0, 0, 0, 0, 0, false, false, 1, 1},
    {"fork_groups_halves", 0, 0, 0, 0, 0, false, false, 1, 2},
    {"scattered_groups", 0, 0, 0, 0, 0, false, false, 2, 0},
};

INSTANTIATE_TEST_SUITE_P(Shapes, GdnPaged,
                         ::testing::Combine(::testing::Values(Shape{3, 2, 6, 12, 10, 5, 1},        // odd sizes
                                                              Shape{4, 1, 3, 24, 40, 9, 3},        // odd, verify
                                                              Shape{3, 2, 4, 64, 128, 12, 1},      // 128 columns
                                                              Shape{2, 1, 2, 48, 256, 10, 4},      // wide values
                                                              Shape{3, 1, 2, 37, 128, 7, 3},       // odd keys
                                                              Shape{2, 1, 2, 65, 52, 40, 2},       // long log
                                                              Shape{2, 2, 4, 128, 20, 64, 6},      // longest log
                                                              Shape{2, 2, 2, 200, 70, 6, 2},       // tall keys
                                                              Shape{2, 16, 32, 128, 128, 20, 4}),  // Qwen3-Next verify
                                            ::testing::ValuesIn(kKernels)));

}  // namespace
}  // namespace replayssm
