// Mamba2 replay over a paged log (Mamba2DecodeArgs::pages) against the
// same entries in the contiguous layout: every replay kernel — the one
// kernel, the split path (log kernel and pass, on FMAs and tensor cores),
// the wide blocks with the older entries before and after the PDL wait,
// the fused kernel, fork groups consecutive and scattered, exact replay in
// 4 warps and in wide blocks — with and without folds, at page sizes 1, 4
// and 16, random offsets of entry 0, and slots in random order among
// unused ones. The two layouts hold the same values, so outputs and folded
// states must have the same bits. Skipped where no CUDA device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/activation.h"
#include "ops/cuda/mamba2_decode.h"
#include "paged_log_util.h"

namespace replayssm {
namespace {

using test::Bf;
using test::bf_rand;
using test::Dev;
using test::PagedLayout;

struct Shape {
  int batch, H, P, N, G, W, T;
};

// A replay kernel as the suite forces it (Mamba2DecodeArgs::variant,
// exact, early) and its fork groups (0: none; 1: groups of 3, 1, 2, …
// consecutive in the batch; 2: the same over a shuffled decode order, two
// empty groups after the last).
struct Kernel {
  const char* name;
  int variant;
  bool exact, early;
  int groups;
};

void PrintTo(const std::tuple<Shape, Kernel>& p, std::ostream* os) {
  const Shape s = std::get<0>(p);
  *os << "B" << s.batch << "_H" << s.H << "_P" << s.P << "_N" << s.N << "_G" << s.G << "_W" << s.W << "_T" << s.T << "_"
      << std::get<1>(p).name;
}

using Mamba2Paged = test::GpuTestWithParam<std::tuple<Shape, Kernel>>;

TEST_P(Mamba2Paged, ReplayIsBitIdenticalToTheContiguousLog) {
  const Shape s = std::get<0>(GetParam());
  const Kernel k = std::get<1>(GetParam());
  const int B = s.batch, H = s.H, P = s.P, N = s.N, G = s.G, W = s.W, T = s.T;
  std::mt19937 g(41 + T + N);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A_log(H), Dv(H), zero(H, 0.0f);
  for (int h = 0; h < H; ++h) A_log[h] = 0.5f * u(g), Dv[h] = u(g);
  // As the contiguous suite (mamba2_decode_cuda_test.cpp): sequence b reads
  // slot 2b + 1 and folds in place (b % 3 == 0) or to 2b; log lengths and
  // folds spread over T..W and 0..n_log.
  const int slots = 2 * B + 1;
  std::vector<int32_t> slot(B), n_log(B), fold(B), fold_slot(B);
  for (int b = 0; b < B; ++b) {
    slot[b] = 2 * b + 1;
    n_log[b] = T + (b * 5 + 3) % (W - T + 1);
    fold[b] = b % 4 == 1 ? 0 : (b % 4 == 2 ? n_log[b] : (b * 7) % (n_log[b] + 1));
    fold_slot[b] = b % 3 == 0 ? slot[b] : 2 * b;
  }
  const test::ForkGroups fg(g, B, k.groups, slot, fold);
  const std::vector<int32_t>& group_start = fg.start;
  const std::vector<int32_t>& order = fg.order;
  std::vector<float> state(size_t(slots) * H * P * N);
  for (float& x : state) x = 0.3f * u(g);
  const Bf Cm = bf_rand(g, size_t(B) * T * G * N, 1.0f), lx = bf_rand(g, size_t(B) * W * H * P, 1.0f),
           lB = bf_rand(g, size_t(B) * W * G * N, 1.0f);
  std::vector<float> log_dt(size_t(B) * W * H);
  for (float& v : log_dt) v = ops::softplus(u(g) - 1.0f);

  Dev<float> dA(A_log), dD(Dv), dbias(zero), dstate(state), dlogdt(log_dt);
  Dev<int32_t> dslot(slot), dn(n_log), dfold(fold), dfslot(fold_slot), dgroups(group_start), dorder(order);
  Dev<uint16_t> dC(Cm.bits), dlx(lx.bits), dlB(lB.bits), dy(std::vector<uint16_t>(size_t(B) * T * H * P));
  Dev<float> scratch(std::vector<float>(ops::cuda::mamba2_replay_scratch_floats(B, T, H, P)));
  ops::cuda::Mamba2DecodeArgs a;
  a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.W = W, a.T = T;
  a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.state = dstate.p, a.slot = dslot.p, a.Cm = dC.p, a.y = dy.p;
  a.n_log = dn.p, a.fold_slot = dfslot.p, a.scratch = scratch.p;
  a.variant = k.variant, a.exact = k.exact, a.early = k.early;
  if (k.groups > 0) a.group_start = dgroups.p, a.n_groups = int(group_start.size()) - 1, a.max_group = 3;
  if (k.groups == 2) a.seq = dorder.p;
  auto run = [&](bool folds) {
    EXPECT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemset(dy.p, 0xff, 2 * dy.n), cudaSuccess);
    a.fold = folds ? dfold.p : nullptr, a.max_fold = folds ? W : 0;
    EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return std::pair{dy.get(), dstate.get()};
  };

  for (const bool folds : {true, false}) {
    SCOPED_TRACE(folds ? "fold arrays" : "no fold arrays");
    a.log_x = dlx.p, a.log_B = dlB.p, a.log_dt = dlogdt.p, a.pages = {}, a.W = W;
    const auto [y_ref, s_ref] = run(folds);
    for (const int page_size : {1, 4, 16}) {
      SCOPED_TRACE(testing::Message() << "pages of " << page_size);
      const PagedLayout L(g, B, W, page_size);
      const std::vector<uint16_t> px = L.scatter(lx.bits, W, int64_t(H) * P, test::kBf16Garbage),
                                  pB = L.scatter(lB.bits, W, int64_t(G) * N, test::kBf16Garbage);
      const std::vector<float> pdt = L.scatter(log_dt, W, H, test::f32_garbage());
      Dev<uint16_t> dpx(px), dpB(pB);
      Dev<float> dpdt(pdt);
      Dev<int32_t> dpage(L.page), dfirst(L.first);
      a.log_x = dpx.p, a.log_B = dpB.p, a.log_dt = dpdt.p;
      a.pages = {dpage.p, L.page_stride, dfirst.p, page_size};
      // Paged, W only bounds the log (0: kMamba2MaxW): a forced kernel is
      // the same kernel under either bound.
      a.W = page_size == 4 && k.variant != 0 && k.variant != 5 ? 0 : W;
      const auto [y, st] = run(folds);
      EXPECT_TRUE(test::same_bits(y, y_ref, "outputs"));
      EXPECT_TRUE(test::same_bits(st, s_ref, "states"));
      EXPECT_TRUE(test::same_bits(dpx.get(), px, "log x (read only)"));
      EXPECT_TRUE(test::same_bits(dpdt.get(), pdt, "log dt (read only)"));
    }
  }
}

TEST(Mamba2PagedArgs, BadPagesAreRefused) {
  const int32_t table[2] = {0, 1};
  ops::cuda::Mamba2DecodeArgs a;
  a.batch = 1, a.H = 4, a.P = 8, a.N = 16, a.G = 2, a.W = 8, a.T = 1;
  a.pages = {table, 2, table, 3};  // page size not a power of two
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.pages = {table, 2, nullptr, 4};  // no offsets
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.pages = {table, 0, table, 4};  // no table entries
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.pages = {table, 2, table, 0};
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.pages = {table, 2, table, 4}, a.W = 65;  // W still bounds the log when paged
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
}

const Kernel kKernels[] = {{"launchers_choice", 0, false, false, 0},
                           {"one_kernel", 1, false, false, 0},
                           {"split", 2, false, false, 0},
                           {"wide", 3, false, false, 0},
                           {"wide_early", 3, false, true, 0},
                           {"split_tensor_cores", 4, false, false, 0},
                           {"fused", 5, false, true, 0},
                           {"fork_groups", 2, false, false, 1},
                           {"fork_groups_tensor_cores", 4, false, false, 1},
                           {"scattered_groups", 0, false, false, 2},
                           {"exact", 1, true, false, 0},
                           {"exact_wide_early", 3, true, true, 0}};

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba2Paged,
                         ::testing::Combine(::testing::Values(Shape{3, 6, 5, 11, 3, 4, 1},     // odd sizes, scalar tile
                                                              Shape{4, 6, 37, 11, 3, 9, 3},    // several row passes
                                                              Shape{3, 4, 5, 128, 2, 13, 2},   // odd P and W
                                                              Shape{3, 4, 24, 256, 2, 12, 4},  // 256-column tile
                                                              Shape{2, 4, 64, 256, 2, 64, 8},  // longest log
                                                              Shape{4, 4, 20, 48, 2, 40, 3},   // folds of 3 × 16
                                                              Shape{2, 4, 48, 128, 2, 63, 2},  // fused: odd W
                                                              Shape{6, 4, 48, 128, 2, 40, 4},  // fused: a verify
                                                              Shape{5, 4, 32, 256, 2, 20, 1}),  // fused: one token
                                            ::testing::ValuesIn(kKernels)));

}  // namespace
}  // namespace replayssm
