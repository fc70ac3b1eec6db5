// CUDA Mamba2 decode kernels against the CPU reference scan: odd and real
// sizes (every register tile), T = 1 and verify-sized T, valid-domain
// inputs (A < 0, dt > 0), permuted slots, per-sequence log lengths and
// folds (none, partial, all, in place); outputs (bf16) and states (fp32)
// both checked, and the read checkpoint checked untouched. Skipped where no
// CUDA device exists (CI); run on the H200 by scripts/gpu_check.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/mamba2_scan.h"
#include "ops/cuda/mamba2_decode.h"

namespace replayssm {
namespace {

using test::Bf;
using test::bf_rand;
using test::close;
using test::Dev;

struct Shape {
  int batch, H, P, N, G, W, T;
};

void PrintTo(const Shape& s, std::ostream* os);
void PrintTo(const std::tuple<Shape, int>& p, std::ostream* os) {
  PrintTo(std::get<0>(p), os);
  static const char* const kName[] = {"", "_one_kernel", "_split", "_fork_groups", "_wide", "_tensor_cores",
                                      "_fork_groups_tensor_cores", "_scattered_groups", "_scattered_groups_fma", "_fused"};
  *os << kName[std::get<1>(p)];
}
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B" << s.batch << "_H" << s.H << "_P" << s.P << "_N" << s.N << "_G" << s.G << "_W" << s.W << "_T" << s.T;
}

class Mamba2Cuda : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// Raw dt for the CPU scan whose softplus(raw + 0) is the logged dt.
std::vector<float> raw_of(const float* dt, int H) {
  std::vector<float> r(H);
  for (int h = 0; h < H; ++h) r[h] = std::log(std::expm1(dt[h]));
  return r;
}

// Every replay variant (1: one kernel; 2: the log's part split into its
// own kernel over scratch; 3: fork groups sharing checkpoints; 4: the
// sequential recurrence in wide blocks, a head per pass; 5: the split
// path's pass on tensor cores; 6: fork groups on tensor cores; 7 and 8:
// fork groups whose members are scattered over the batch (a decode order,
// Mamba2DecodeArgs::seq) with empty groups past the last, on the
// launcher's choice and on the FMA pass; 9: the fused kernel, the log's
// part and the pass in one block) on every shape (5, 6 and 7 fall back to
// the FMA split pass where N % 16 ≠ 0 or a block has more than 8 outputs;
// 9 to the launcher's choice where N is not 128 or 256, P % 16 ≠ 0 or
// T > 4).
class Mamba2CudaReplay : public ::testing::TestWithParam<std::tuple<Shape, int>> {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(Mamba2CudaReplay, ReplayWithFoldsMatchesTheCpuScan) {
  const Shape s = std::get<0>(GetParam());
  const int B = s.batch, H = s.H, P = s.P, N = s.N, G = s.G, W = s.W, T = s.T;
  std::mt19937 g(7 + T);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A_log(H), Dv(H), zero(H, 0.0f);
  for (int h = 0; h < H; ++h) A_log[h] = 0.5f * u(g), Dv[h] = u(g);
  // Slots: sequence b reads 2b+1; folds go in place (b % 3 == 0) or to 2b.
  const int slots = 2 * B + 1;
  std::vector<int32_t> slot(B), n_log(B), fold(B), fold_slot(B);
  for (int b = 0; b < B; ++b) {
    slot[b] = 2 * b + 1;
    n_log[b] = T + (b * 5 + 3) % (W - T + 1);
    fold[b] = b % 4 == 1 ? 0 : (b % 4 == 2 ? n_log[b] : (b * 7) % (n_log[b] + 1));
    fold_slot[b] = b % 3 == 0 ? slot[b] : 2 * b;
  }
  // Variants 3, 6–8: fork groups of 3, 1, 2, 3, 1, 2, … members sharing
  // the first member's checkpoint, consecutive positions of the decode
  // order (7, 8: a shuffle of the batch, and two empty groups after the
  // last); only a sequence alone in its group folds.
  const int variant = std::get<1>(GetParam());
  std::vector<int32_t> group_start{0}, order(B);
  for (int v = 0; v < B; ++v) order[v] = v;
  const bool groups = variant == 3 || (variant >= 6 && variant <= 8), scattered = variant == 7 || variant == 8;
  if (scattered) std::shuffle(order.begin(), order.end(), g);
  if (groups) {
    for (int v = 0, k = 0; v < B; ++k) {
      const int members = std::min(B - v, k % 3 == 0 ? 3 : (k % 3 == 1 ? 1 : 2));
      for (int m = 0; m < members; ++m) {
        slot[order[v + m]] = slot[order[v]];
        if (members > 1) fold[order[v + m]] = 0;
      }
      v += members;
      group_start.push_back(v);
    }
    if (scattered) group_start.push_back(B), group_start.push_back(B);
  }
  std::vector<float> state(size_t(slots) * H * P * N);
  for (float& x : state) x = 0.3f * u(g);
  Bf Cm = bf_rand(g, size_t(B) * T * G * N, 1.0f), lx = bf_rand(g, size_t(B) * W * H * P, 1.0f),
     lB = bf_rand(g, size_t(B) * W * G * N, 1.0f);
  std::vector<float> log_dt(size_t(B) * W * H);
  for (float& v : log_dt) v = ops::softplus(u(g) - 1.0f);

  Dev<float> dA(A_log), dD(Dv), dbias(zero), dstate(state), dlogdt(log_dt);
  Dev<int32_t> dslot(slot), dn(n_log), dfold(fold), dfslot(fold_slot), dgroups(group_start), dorder(order);
  Dev<uint16_t> dC(Cm.bits), dlx(lx.bits), dlB(lB.bits), dy(std::vector<uint16_t>(size_t(B) * T * H * P));
  ops::cuda::Mamba2DecodeArgs a;
  a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.W = W, a.T = T;
  a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.state = dstate.p, a.slot = dslot.p, a.Cm = dC.p, a.y = dy.p;
  a.n_log = dn.p, a.log_x = dlx.p, a.log_B = dlB.p, a.log_dt = dlogdt.p;
  a.fold = dfold.p, a.fold_slot = dfslot.p, a.max_fold = W;
  static const int kVariantArg[] = {0, 1, 2, 0, 3, 4, 4, 0, 2, 5};
  a.variant = kVariantArg[variant];
  Dev<float> scratch(std::vector<float>(ops::cuda::mamba2_replay_scratch_floats(B, T, H, P)));
  if (variant == 2 || variant == 3 || variant >= 5) a.scratch = scratch.p;
  if (groups) a.group_start = dgroups.p, a.n_groups = int(group_start.size()) - 1, a.max_group = 3;
  if (scattered) a.seq = dorder.p;
  // early: the checkpoint's first pass and the older log entries read
  // before the PDL wait (here a plain launch: the same results by contract).
  // Without fold arrays (as a step is planned where no window
  // fills): the kernels' instances without the fold's code, no state
  // written at all.
  for (const bool folds : {true, false})
  for (const bool early : {false, true}) {
    SCOPED_TRACE(testing::Message() << (early ? "early" : "after the wait") << (folds ? "" : ", no fold arrays"));
    ASSERT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
    a.early = early;
    a.fold = folds ? dfold.p : nullptr, a.max_fold = folds ? W : 0;
    ASSERT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint16_t> y = dy.get();
    const std::vector<float> after = dstate.get();
    if (!folds) ASSERT_TRUE(after == state) << "a state written without fold arrays";

    const ops::Mamba2Params raw{H, P, N, G, A_log.data(), Dv.data(), zero.data(), 0.0f, INFINITY};
    for (int b = 0; b < B; ++b) {
      const size_t ss = size_t(slot[b]) * H * P * N;
      std::vector<float> S(state.begin() + ss, state.begin() + ss + size_t(H) * P * N), yy(size_t(H) * P);
      if (fold_slot[b] != slot[b] || fold[b] == 0)
        ASSERT_TRUE(std::equal(S.begin(), S.end(), after.begin() + ss)) << "checkpoint of b " << b << " written";
      for (int e = 0; e < n_log[b]; ++e) {
        const size_t le = size_t(b) * W + e;
        const int t = e - (n_log[b] - T);  // ≥ 0: a new token, whose C is given
        const float* C = t >= 0 ? Cm.f.data() + (size_t(b) * T + t) * G * N : lB.f.data() + le * G * N;
        const std::vector<float> dtr = raw_of(log_dt.data() + le * H, H);
        ops::cpu::mamba2_scan(raw, S.data(), lx.f.data() + le * H * P, H * P, lB.f.data() + le * G * N, C, G * N,
                              dtr.data(), H, 1, yy.data(), H * P);
        if (folds && e + 1 == fold[b]) {
          const size_t fs = size_t(fold_slot[b]) * H * P * N;
          for (size_t i = 0; i < S.size(); ++i)
            ASSERT_TRUE(close(after[fs + i], S[i], test::kStateTol)) << "fold b " << b << " i " << i;
        }
        if (t < 0) continue;
        for (int i = 0; i < H * P; ++i) {
          const float got = bf16_to_f32(y[(size_t(b) * T + t) * H * P + i]);
          ASSERT_TRUE(close(got, yy[i], test::kBf16Tol)) << "y b " << b << " t " << t << " i " << i << ": " << got
                                                          << " vs " << yy[i];
        }
      }
    }
  }
}

TEST_P(Mamba2Cuda, StandardStepWritesOneStatePerTokenAndMatchesTheCpuScan) {
  const Shape s = GetParam();
  const int B = s.batch, H = s.H, P = s.P, N = s.N, G = s.G, T = s.T;
  std::mt19937 g(11 + T);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A_log(H), Dv(H), dt_bias(H);
  for (int h = 0; h < H; ++h) A_log[h] = 0.5f * u(g), Dv[h] = u(g), dt_bias[h] = u(g) - 1.0f;
  // T = 1: in place; T > 1: sequence b reads slot b, writes B + b·T + t.
  const int slots = B + B * T;
  std::vector<int32_t> slot(B), out_slot(size_t(B) * T);
  for (int b = 0; b < B; ++b) {
    slot[b] = B - 1 - b;  // a permutation: in-place writes never collide
    for (int t = 0; t < T; ++t) out_slot[size_t(b) * T + t] = T == 1 ? slot[b] : B + b * T + t;
  }
  std::vector<float> state(size_t(slots) * H * P * N);
  for (float& x : state) x = 0.3f * u(g);
  Bf x = bf_rand(g, size_t(B) * T * H * P, 1.0f), Bm = bf_rand(g, size_t(B) * T * G * N, 1.0f),
     Cm = bf_rand(g, size_t(B) * T * G * N, 1.0f);
  std::vector<float> dt_raw(size_t(B) * T * H);
  for (float& v : dt_raw) v = u(g);
  Dev<float> dA(A_log), dD(Dv), dbias(dt_bias), dstate(state), ddt(dt_raw);
  Dev<int32_t> dslot(slot), dout(out_slot);
  Dev<uint16_t> dx(x.bits), dB(Bm.bits), dC(Cm.bits), dy(std::vector<uint16_t>(size_t(B) * T * H * P));
  ops::cuda::Mamba2DecodeArgs a;
  a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.T = T;
  a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.state = dstate.p, a.slot = dslot.p, a.out_slot = dout.p;
  a.x = dx.p, a.Bm = dB.p, a.Cm = dC.p, a.dt_raw = ddt.p, a.y = dy.p;
  a.early = T == 1;  // both orders of the first pass and the PDL wait, across the shapes
  ASSERT_EQ(ops::cuda::mamba2_step_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> y = dy.get();
  const std::vector<float> after = dstate.get();
  const ops::Mamba2Params cp{H, P, N, G, A_log.data(), Dv.data(), dt_bias.data(), 0.0f, INFINITY};
  for (int b = 0; b < B; ++b) {
    const size_t ss = size_t(slot[b]) * H * P * N;
    std::vector<float> S(state.begin() + ss, state.begin() + ss + size_t(H) * P * N), yy(size_t(H) * P);
    for (int t = 0; t < T; ++t) {
      const size_t bt = size_t(b) * T + t;
      ops::cpu::mamba2_scan(cp, S.data(), x.f.data() + bt * H * P, H * P, Bm.f.data() + bt * G * N,
                            Cm.f.data() + bt * G * N, G * N, dt_raw.data() + bt * H, H, 1, yy.data(), H * P);
      const size_t os = size_t(out_slot[bt]) * H * P * N;
      for (size_t i = 0; i < S.size(); ++i)
        ASSERT_TRUE(close(after[os + i], S[i], test::kStateTol)) << "state b " << b << " t " << t << " i " << i;
      for (int i = 0; i < H * P; ++i)
        ASSERT_TRUE(close(bf16_to_f32(y[bt * H * P + i]), yy[i], test::kBf16Tol)) << "y b " << b << " t " << t;
    }
  }
}

// Exact replay runs the standard step's arithmetic over the log: its
// outputs and folds equal stepping from the checkpoint, bit for bit.
TEST_P(Mamba2Cuda, ExactReplayIsBitIdenticalToStepping) {
  const Shape s = GetParam();
  const int B = s.batch, H = s.H, P = s.P, N = s.N, G = s.G, W = s.W, T = s.T;
  std::mt19937 g(23 + T);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A_log(H), Dv(H), zero(H, 0.0f);
  for (int h = 0; h < H; ++h) A_log[h] = 0.5f * u(g), Dv[h] = u(g);
  std::vector<int32_t> slot(B), n_log(B), fold(B), fold_slot(B);
  for (int b = 0; b < B; ++b) {
    slot[b] = 2 * b + 1, fold_slot[b] = 2 * b;
    n_log[b] = T + (b * 5 + 3) % (W - T + 1);
    fold[b] = (b * 7 + 1) % (n_log[b] + 1);
  }
  // One slot more: the scratch state the reference steps in place.
  const int slots = 2 * B + 1, work = 2 * B;
  std::vector<float> state(size_t(slots + 1) * H * P * N);
  for (float& x : state) x = 0.3f * u(g);
  Bf Cm = bf_rand(g, size_t(B) * T * G * N, 1.0f), lx = bf_rand(g, size_t(B) * W * H * P, 1.0f),
     lB = bf_rand(g, size_t(B) * W * G * N, 1.0f);
  std::vector<float> log_dt(size_t(B) * W * H);
  for (float& v : log_dt) v = ops::softplus(u(g) - 1.0f);
  Dev<float> dA(A_log), dD(Dv), dbias(zero), dstate(state), dlogdt(log_dt);
  Dev<int32_t> dslot(slot), dn(n_log), dfold(fold), dfslot(fold_slot);
  Dev<uint16_t> dC(Cm.bits), dlx(lx.bits), dlB(lB.bits), dy(std::vector<uint16_t>(size_t(B) * T * H * P));
  // The reference: mamba2_step_cuda over each log, one token at a time, in
  // place on the work slot, with the logged dt.
  const size_t hs = size_t(H) * P * N;
  const std::vector<int32_t> one_work{work};
  Dev<int32_t> dwork(one_work);
  Dev<uint16_t> dy1(std::vector<uint16_t>(size_t(H) * P));
  std::vector<uint16_t> y_ref(size_t(B) * T * H * P);
  std::vector<std::vector<float>> fold_ref(B);
  for (int b = 0; b < B; ++b) {
    ASSERT_EQ(cudaMemcpy(dstate.p + work * hs, dstate.p + slot[b] * hs, hs * 4, cudaMemcpyDeviceToDevice), cudaSuccess);
    for (int e = 0; e < n_log[b]; ++e) {
      const size_t le = size_t(b) * W + e;
      const int t = e - (n_log[b] - T);
      ops::cuda::Mamba2DecodeArgs st;
      st.batch = 1, st.H = H, st.P = P, st.N = N, st.G = G, st.T = 1;
      st.A_log = dA.p, st.D = dD.p, st.dt_bias = dbias.p, st.state = dstate.p, st.slot = dwork.p, st.out_slot = dwork.p;
      st.x = dlx.p + le * H * P, st.Bm = dlB.p + le * G * N, st.dt = dlogdt.p + le * H, st.y = dy1.p;
      st.Cm = t >= 0 ? dC.p + (size_t(b) * T + t) * G * N : dlB.p + le * G * N;
      ASSERT_EQ(ops::cuda::mamba2_step_cuda(st, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      if (e + 1 == fold[b]) {
        const std::vector<float> now = dstate.get();
        fold_ref[b].assign(now.begin() + work * hs, now.begin() + (work + 1) * hs);
      }
      if (t < 0) continue;
      const std::vector<uint16_t> y1 = dy1.get();
      std::copy(y1.begin(), y1.end(), y_ref.begin() + (size_t(b) * T + t) * H * P);
    }
  }

  // Both exact kernels: 4 warps (variant 1), wide blocks (3) with the older
  // entries applied after and before the PDL wait (a plain launch here).
  for (const auto& [variant, early] : {std::pair{1, false}, std::pair{3, false}, std::pair{3, true}}) {
    SCOPED_TRACE(testing::Message() << "variant " << variant << (early ? ", early" : ""));
    ASSERT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ops::cuda::Mamba2DecodeArgs a;
    a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.W = W, a.T = T, a.exact = true;
    a.variant = variant, a.early = early;
    a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.state = dstate.p, a.slot = dslot.p, a.Cm = dC.p, a.y = dy.p;
    a.n_log = dn.p, a.log_x = dlx.p, a.log_B = dlB.p, a.log_dt = dlogdt.p;
    a.fold = dfold.p, a.fold_slot = dfslot.p, a.max_fold = W;
    ASSERT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint16_t> y = dy.get();
    const std::vector<float> after = dstate.get();
    for (int b = 0; b < B; ++b) {
      if (fold[b] == 0)
        ASSERT_TRUE(std::equal(after.begin() + fold_slot[b] * hs, after.begin() + (fold_slot[b] + 1) * hs,
                               state.begin() + fold_slot[b] * hs)) << "b " << b << ": no fold, yet written";
      else
        ASSERT_EQ(std::memcmp(fold_ref[b].data(), after.data() + fold_slot[b] * hs, hs * 4), 0)
            << "fold of b " << b << " differs from stepping";
    }
    ASSERT_EQ(std::memcmp(y_ref.data(), y.data(), y.size() * 2), 0) << "y differs from stepping";
  }
}

TEST(Mamba2CudaArgs, OutOfRangeShapesAreRefused) {
  ops::cuda::Mamba2DecodeArgs a;
  a.batch = 1, a.H = 4, a.P = 8, a.N = 300, a.G = 2, a.W = 8, a.T = 1;  // N > 256
  EXPECT_EQ(ops::cuda::mamba2_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.N = 16, a.W = 65;  // W > 64
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.W = 8, a.T = 9;  // T > 8
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.T = 1, a.N = 300;  // N > 256
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.N = 16, a.tile_rows = 3;  // no such tile
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::mamba2_step_cuda(a, nullptr), cudaErrorInvalidValue);
  const int32_t groups[2] = {0, 1};
  a.tile_rows = 0, a.group_start = groups, a.n_groups = 1, a.max_group = 1;  // fork groups without scratch
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.group_start = nullptr, a.n_groups = 0, a.variant = 2;  // split without scratch
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.variant = 4;  // tensor cores without scratch
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.variant = 6;  // no such variant
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  float scratch = 0.0f;  // never reached: refused before the device is asked anything
  a.variant = 3, a.scratch = &scratch, a.group_start = groups, a.n_groups = 1, a.max_group = 1;  // fork groups, wide blocks
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.group_start = nullptr, a.n_groups = 0;
  a.variant = 0, a.seq = groups;  // a decode order without fork groups
  EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  a.scratch = nullptr, a.seq = nullptr;
  a.T = 1, a.G = 3;  // H not a multiple of G
  EXPECT_EQ(ops::cuda::mamba2_step_cuda(a, nullptr), cudaErrorInvalidValue);
}

// Past the wide blocks' batches (batch·H > 2 × SMs) the launcher's choice
// (variant 0) for full tiles is the fused kernel: outputs and folds
// bit-identical to it forced (variant 5, which the replay suite checks
// against the CPU scan), with and without fold arrays, in a ragged step
// whose second sequence takes no part (row < 0: its state and the rows
// past the others' untouched). Batch: the first past that bound, and one
// where the split path would have run before (16 × SMs blocks).
TEST(Mamba2CudaFused, TheLaunchersChoicePastTheWideBlocksIsTheFusedKernel) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  int dev = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  for (const int B : {2 * sms / 32 + 1, (16 * sms + 31) / 32}) {
    SCOPED_TRACE(testing::Message() << "batch " << B);
    const int H = 32, P = 16, N = 128, G = 4, W = 20, T = 4;
    std::mt19937 g(31);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> A_log(H), Dv(H), zero(H, 0.0f);
    for (int h = 0; h < H; ++h) A_log[h] = 0.5f * u(g), Dv[h] = u(g);
    std::vector<int32_t> slot(B), n_log(B), fold(B), fold_slot(B), row(B);
    int rows = 0;
    for (int b = 0; b < B; ++b) {
      slot[b] = 2 * b + 1, fold_slot[b] = b % 2 == 0 ? slot[b] : 2 * b;
      n_log[b] = T + (b * 5 + 3) % (W - T + 1);
      fold[b] = (b * 7) % (n_log[b] + 1);
      row[b] = b == 1 ? -1 : rows;
      if (b != 1) rows += T;
    }
    std::vector<float> state(size_t(2 * B + 1) * H * P * N);
    for (float& x : state) x = 0.3f * u(g);
    Bf Cm = bf_rand(g, size_t(rows) * G * N, 1.0f), lx = bf_rand(g, size_t(B) * W * H * P, 1.0f),
       lB = bf_rand(g, size_t(B) * W * G * N, 1.0f);
    std::vector<float> log_dt(size_t(B) * W * H);
    for (float& v : log_dt) v = ops::softplus(u(g) - 1.0f);
    const std::vector<uint16_t> y_init(size_t(B) * T * H * P, 0x7fc1);  // a NaN no kernel writes
    Dev<float> dA(A_log), dD(Dv), dbias(zero), dstate(state), dlogdt(log_dt);
    Dev<int32_t> dslot(slot), dn(n_log), dfold(fold), dfslot(fold_slot), drow(row);
    Dev<uint16_t> dC(Cm.bits), dlx(lx.bits), dlB(lB.bits), dy(y_init);
    Dev<float> scratch(std::vector<float>(ops::cuda::mamba2_replay_scratch_floats(B, T, H, P)));
    ops::cuda::Mamba2DecodeArgs a;
    a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.W = W, a.T = T;
    a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.state = dstate.p, a.slot = dslot.p, a.Cm = dC.p, a.y = dy.p;
    a.n_log = dn.p, a.log_x = dlx.p, a.log_B = dlB.p, a.log_dt = dlogdt.p, a.row = drow.p, a.scratch = scratch.p;
    a.fold_slot = dfslot.p, a.early = true;
    auto run = [&](int variant, bool folds) {
      EXPECT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(dy.p, y_init.data(), 2 * y_init.size(), cudaMemcpyHostToDevice), cudaSuccess);
      a.variant = variant, a.fold = folds ? dfold.p : nullptr, a.max_fold = folds ? W : 0;
      EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaSuccess);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return std::pair{dy.get(), dstate.get()};
    };
    const size_t hs = size_t(H) * P * N;
    for (const bool folds : {true, false}) {
      SCOPED_TRACE(folds ? "fold arrays" : "no fold arrays");
      const auto [y0, s0] = run(0, folds);
      const auto [y5, s5] = run(5, folds);
      ASSERT_EQ(std::memcmp(y0.data(), y5.data(), 2 * y0.size()), 0) << "outputs differ from the fused kernel's";
      ASSERT_TRUE(s0 == s5) << "states differ from the fused kernel's";
      for (size_t i = size_t(rows) * H * P; i < y0.size(); ++i) ASSERT_EQ(y0[i], 0x7fc1) << "y past the rows, i " << i;
      for (size_t i = 0; i < size_t(rows) * H * P; ++i) ASSERT_NE(y0[i], 0x7fc1) << "y row not written, i " << i;
      for (const int s : {slot[1], fold_slot[1]})
        ASSERT_TRUE(std::equal(s0.begin() + s * hs, s0.begin() + (s + 1) * hs, state.begin() + s * hs))
            << "the sequence outside the launch had slot " << s << " written";
      if (!folds) ASSERT_TRUE(s0 == state) << "a state written without fold arrays";
    }
  }
}

const auto kShapes = ::testing::Values(Shape{3, 6, 5, 11, 3, 4, 1},       // odd sizes, scalar tile
                                           Shape{4, 6, 37, 11, 3, 9, 3},      // odd sizes, several row passes
                                           Shape{5, 8, 16, 128, 2, 16, 1},    // 128-column tile
                                           Shape{3, 4, 5, 128, 2, 13, 2},     // 128-column tile, odd P and W
                                           Shape{3, 4, 24, 256, 2, 12, 4},    // 256-column tile
                                           Shape{2, 4, 64, 256, 2, 64, 8},    // longest log: one block per SM
                                           Shape{2, 128, 64, 128, 8, 16, 1},  // Nemotron-H-8B
                                           Shape{2, 128, 64, 128, 8, 20, 4},  // its verify, T = 4
                                           Shape{2, 96, 80, 128, 8, 16, 1},
                                           Shape{3, 6, 20, 100, 3, 10, 5},    // N % 32 ≠ 0 with 16-byte rows
                                           Shape{4, 4, 20, 48, 2, 40, 3},     // N ≡ 16 (mod 32), folds of 3 × 16 entries
                                           Shape{3, 4, 32, 256, 2, 24, 3},    // fused: two column chunks, T = 3 of 4
                                           Shape{2, 4, 48, 128, 2, 63, 2},    // fused: odd passes and W, T = 2
                                           Shape{8, 4, 16, 256, 2, 64, 2},    // fused: logs past 32 entries, odd folds in place
                                           Shape{6, 4, 48, 128, 2, 40, 4},    // fused: a verify's folds, odd and in place
                                           Shape{5, 4, 32, 256, 2, 20, 1});   // fused: one token, two column chunks, folds
INSTANTIATE_TEST_SUITE_P(Shapes, Mamba2Cuda, kShapes);
INSTANTIATE_TEST_SUITE_P(Shapes, Mamba2CudaReplay, ::testing::Combine(kShapes, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9)));

}  // namespace
}  // namespace replayssm
