// The decode kernels' row maps (Mamba2DecodeArgs::row, GdnDecodeArgs::row,
// decode_rows.cuh): in a ragged step the decoding sequences' rows lie
// packed among a prompt chunk's, in any order, and the sequences the chunk
// scans take (or that take nothing) sit the launch out. Every kernel and
// variant, both families, T = 1 and a verify's T: each sequence with rows
// gets, bit for bit, what the same kernel gives it in the uniform layout
// (rows b·T) — outputs, folds, GDN's u in the log — the rows of no
// sequence keep what they held, and a sequence left out has its state
// slots and log untouched. The arithmetic is the uniform layout's, which
// the other decode tests hold against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/activation.h"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/mamba2_decode.h"

namespace replayssm {
namespace {

using test::bf_rand;
using test::Dev;

// The ragged layout of B sequences of T rows: in reverse order, a spare
// row before each, every third sequence (from the second) left out.
struct Rows {
  int B, T, R;
  std::vector<int32_t> row;  // first row of each sequence; −1: left out
  bool taken(int b) const { return row[size_t(b)] >= 0; }
};
Rows ragged_rows(int B, int T) {
  Rows r{B, T, 0, std::vector<int32_t>(size_t(B), -1)};
  for (int b = B - 1; b >= 0; --b) {
    ++r.R;  // a row of no sequence (a prompt's, in a step)
    if (b % 3 == 1) continue;
    r.row[size_t(b)] = r.R, r.R += T;
  }
  return r;
}

// A per-row array of the uniform layout (B·T rows of `width`) in the
// ragged one; the rows of no sequence hold `fill`.
template <typename E>
std::vector<E> pack(const std::vector<E>& uniform, size_t width, const Rows& r, E fill) {
  std::vector<E> out(size_t(r.R) * width, fill);
  for (int b = 0; b < r.B; ++b)
    if (r.taken(b))
      std::copy_n(uniform.begin() + ptrdiff_t(size_t(b) * r.T * width), size_t(r.T) * width,
                  out.begin() + ptrdiff_t(size_t(r.row[size_t(b)]) * width));
  return out;
}

// A ragged output against the uniform one: a taken sequence's rows bit for
// bit, every other row still `fill`.
template <typename E>
void expect_rows(const std::vector<E>& ragged, const std::vector<E>& uniform, size_t width, const Rows& r, E fill) {
  EXPECT_EQ(ragged, pack(uniform, width, r, fill));
}

// The state slots after a ragged launch: the uniform launch's, except the
// slots a left-out sequence would have written (owner[s] = its b), which
// keep what they held.
void expect_slots(const std::vector<float>& ragged, const std::vector<float>& uniform, const std::vector<float>& before,
                  const std::vector<int>& owner, size_t slot_floats, const Rows& r) {
  for (size_t s = 0; s < owner.size(); ++s) {
    const bool kept = owner[s] >= 0 && !r.taken(owner[s]);
    const std::vector<float>& want = kept ? before : uniform;
    ASSERT_EQ(std::memcmp(ragged.data() + s * slot_floats, want.data() + s * slot_floats, slot_floats * 4), 0)
        << "slot " << s << (kept ? ", a left-out sequence's, was written" : " differs from the uniform layout's");
  }
}

constexpr uint16_t kFillBf = 0x7fc1;  // a NaN no kernel writes

struct Mamba2Case {
  bool standard, exact;
  int variant;
};

TEST(DecodeRowsCuda, Mamba2RaggedRowsMatchTheUniformLayout) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 5, H = 6, P = 16, N = 32, G = 2, W = 8;
  for (const int T : {1, 3}) {
    std::mt19937 g(17 + T);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> A_log(H), Dv(H), dt_bias(H);
    for (int h = 0; h < H; ++h) A_log[h] = 0.5f * u(g), Dv[h] = u(g), dt_bias[h] = u(g) - 1.0f;
    // Replay: b reads 2b + 1 and folds into 2b. Standard: b's T tokens' states go to 2B + b·T + t.
    const int slots = 2 * B + B * T;
    const size_t hs = size_t(H) * P * N;
    std::vector<int32_t> slot(B), n_log(B), fold(B), fold_slot(B), out_slot(size_t(B) * T);
    std::vector<int> owner(size_t(slots), -1);
    for (int b = 0; b < B; ++b) {
      slot[b] = 2 * b + 1, fold_slot[b] = 2 * b, owner[size_t(2 * b)] = b;
      n_log[b] = T + (b * 5 + 3) % (W - T + 1);
      fold[b] = b % 2 == 0 ? n_log[b] : (b * 3) % (n_log[b] + 1);
      for (int t = 0; t < T; ++t) out_slot[size_t(b) * T + t] = 2 * B + b * T + t, owner[size_t(2 * B + b * T + t)] = b;
    }
    std::vector<float> state(size_t(slots) * hs);
    for (float& x : state) x = 0.3f * u(g);
    const size_t rows = size_t(B) * T;
    const auto C = bf_rand(g, rows * G * N, 1.0f).bits, x = bf_rand(g, rows * H * P, 1.0f).bits,
               Bm = bf_rand(g, rows * G * N, 1.0f).bits;
    std::vector<float> dt_raw(rows * H), log_dt(size_t(B) * W * H);
    for (float& v : dt_raw) v = u(g);
    for (float& v : log_dt) v = ops::softplus(u(g) - 1.0f);
    const auto lx = bf_rand(g, size_t(B) * W * H * P, 1.0f).bits, lB = bf_rand(g, size_t(B) * W * G * N, 1.0f).bits;
    const Rows r = ragged_rows(B, T);
    std::vector<int32_t> out_slot_r = pack(out_slot, 1, r, int32_t(0));

    Dev<float> dA(A_log), dD(Dv), dbias(dt_bias), dstate(state), ddt(dt_raw), ddt_r(pack(dt_raw, H, r, 0.0f)),
        dlogdt(log_dt), scratch(std::vector<float>(ops::cuda::mamba2_replay_scratch_floats(B, T, H, P)));
    Dev<int32_t> dslot(slot), dn(n_log), dfold(fold), dfslot(fold_slot), dout(out_slot), dout_r(out_slot_r),
        drow(r.row);
    Dev<uint16_t> dC(C), dC_r(pack(C, size_t(G) * N, r, kFillBf)), dx(x), dx_r(pack(x, size_t(H) * P, r, kFillBf)),
        dB(Bm), dB_r(pack(Bm, size_t(G) * N, r, kFillBf)), dlx(lx), dlB(lB);
    Dev<uint16_t> dy(std::vector<uint16_t>(rows * H * P, kFillBf)),
        dy_r(std::vector<uint16_t>(size_t(r.R) * H * P, kFillBf));

    for (const Mamba2Case mc : {Mamba2Case{true, false, 0}, Mamba2Case{false, false, 1}, Mamba2Case{false, false, 2},
                                Mamba2Case{false, false, 3}, Mamba2Case{false, false, 4}, Mamba2Case{false, true, 1},
                                Mamba2Case{false, true, 3}}) {
      SCOPED_TRACE(testing::Message() << "T " << T << (mc.standard ? " standard" : " replay") << (mc.exact ? " exact" : "")
                                      << " variant " << mc.variant);
      auto launch = [&](bool ragged) {
        EXPECT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
        ops::cuda::Mamba2DecodeArgs a;
        a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.T = T;
        a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.state = dstate.p, a.slot = dslot.p;
        a.Cm = ragged ? dC_r.p : dC.p, a.y = ragged ? dy_r.p : dy.p, a.row = ragged ? drow.p : nullptr;
        if (mc.standard) {
          a.x = ragged ? dx_r.p : dx.p, a.Bm = ragged ? dB_r.p : dB.p, a.dt_raw = ragged ? ddt_r.p : ddt.p;
          a.out_slot = ragged ? dout_r.p : dout.p;
          EXPECT_EQ(ops::cuda::mamba2_step_cuda(a, nullptr), cudaSuccess);
        } else {
          a.W = W, a.n_log = dn.p, a.log_x = dlx.p, a.log_B = dlB.p, a.log_dt = dlogdt.p;
          a.fold = dfold.p, a.fold_slot = dfslot.p, a.max_fold = W;
          a.variant = mc.variant, a.exact = mc.exact, a.scratch = scratch.p;
          EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaSuccess);
        }
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      };
      launch(false);
      const std::vector<uint16_t> y = dy.get();
      const std::vector<float> after = dstate.get();
      launch(true);
      expect_rows(dy_r.get(), y, size_t(H) * P, r, kFillBf);
      expect_slots(dstate.get(), after, state, owner, hs, r);
    }
    // Fork groups take no row map.
    ops::cuda::Mamba2DecodeArgs a;
    a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.T = T, a.W = W, a.scratch = scratch.p, a.row = drow.p;
    const int32_t groups[2] = {0, B};
    a.group_start = groups, a.n_groups = 1, a.max_group = B;
    EXPECT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaErrorInvalidValue);
  }
}

struct GdnCase {
  bool standard, exact;
  int variant;
};

TEST(DecodeRowsCuda, GdnRaggedRowsMatchTheUniformLayout) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 5, Hk = 2, Hv = 4, dk = 32, dv = 48, W = 8;
  for (const int T : {1, 3}) {
    std::mt19937 g(29 + T);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int slots = 2 * B + B * T;
    const size_t hs = size_t(Hv) * dk * dv, rows = size_t(B) * T;
    std::vector<int32_t> slot(B), n_log(B), fold(B), fold_slot(B), out_slot(rows);
    std::vector<int> owner(size_t(slots), -1);
    for (int b = 0; b < B; ++b) {
      slot[b] = 2 * b + 1, fold_slot[b] = 2 * b, owner[size_t(2 * b)] = b;
      n_log[b] = T + (b * 5 + 2) % (W - T + 1);
      fold[b] = b % 2 == 0 ? n_log[b] - T : (b * 3) % (n_log[b] - T + 1);  // a new token's u is not known before
      for (int t = 0; t < T; ++t) out_slot[size_t(b) * T + t] = 2 * B + b * T + t, owner[size_t(2 * B + b * T + t)] = b;
    }
    std::vector<float> state(size_t(slots) * hs), log_u(size_t(B) * W * Hv * dv), log_g(size_t(B) * W * Hv),
        beta(rows * Hv), gg(rows * Hv);
    for (float& v : state) v = 0.3f * u(g);
    for (float& v : log_u) v = 0.5f * u(g);
    for (float& v : log_g) v = -0.5f + 0.49f * u(g);
    for (float& v : gg) v = -0.5f + 0.49f * u(g);
    for (float& v : beta) v = 0.5f + 0.45f * u(g);
    // Unit keys and queries are not needed for bits: any bf16 of that size.
    const auto q = bf_rand(g, rows * Hk * dk, 0.2f).bits, k = bf_rand(g, rows * Hk * dk, 0.2f).bits,
               v = bf_rand(g, rows * Hv * dv, 1.0f).bits, lk = bf_rand(g, size_t(B) * W * Hk * dk, 0.2f).bits;
    const Rows r = ragged_rows(B, T);

    Dev<float> dstate(state), du(log_u), dlg(log_g), dbeta(beta), dbeta_r(pack(beta, Hv, r, 0.0f)), dg(gg),
        dg_r(pack(gg, Hv, r, 0.0f));
    Dev<int32_t> dslot(slot), dn(n_log), dfold(fold), dfslot(fold_slot), dout(out_slot),
        dout_r(pack(out_slot, 1, r, int32_t(0))), drow(r.row);
    Dev<uint16_t> dq(q), dq_r(pack(q, size_t(Hk) * dk, r, kFillBf)), dk_(k), dk_r(pack(k, size_t(Hk) * dk, r, kFillBf)),
        dv_(v), dv_r(pack(v, size_t(Hv) * dv, r, kFillBf)), dlk(lk);
    Dev<uint16_t> dy(std::vector<uint16_t>(rows * Hv * dv, kFillBf)),
        dy_r(std::vector<uint16_t>(size_t(r.R) * Hv * dv, kFillBf));

    for (const GdnCase gc : {GdnCase{true, false, 1}, GdnCase{true, false, 2}, GdnCase{true, false, 3},
                             GdnCase{false, false, 1}, GdnCase{false, false, 2}, GdnCase{false, true, 1},
                             GdnCase{false, true, 2}, GdnCase{false, true, 3}}) {
      SCOPED_TRACE(testing::Message() << "T " << T << (gc.standard ? " standard" : " replay") << (gc.exact ? " exact" : "")
                                      << " variant " << gc.variant);
      auto launch = [&](bool ragged) {
        EXPECT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(du.p, log_u.data(), sizeof(float) * log_u.size(), cudaMemcpyHostToDevice), cudaSuccess);
        ops::cuda::GdnDecodeArgs a;
        a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = T, a.variant = gc.variant;
        a.state = dstate.p, a.slot = dslot.p, a.row = ragged ? drow.p : nullptr;
        a.q = ragged ? dq_r.p : dq.p, a.v = ragged ? dv_r.p : dv_.p, a.beta = ragged ? dbeta_r.p : dbeta.p;
        a.o = ragged ? dy_r.p : dy.p;
        if (gc.standard) {
          a.k = ragged ? dk_r.p : dk_.p, a.g = ragged ? dg_r.p : dg.p, a.out_slot = ragged ? dout_r.p : dout.p;
          EXPECT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaSuccess);
        } else {
          a.W = W, a.n_log = dn.p, a.log_k = dlk.p, a.log_u = du.p, a.log_g = dlg.p;
          a.fold = dfold.p, a.fold_slot = dfslot.p, a.max_fold = W, a.exact = gc.exact;
          EXPECT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaSuccess);
        }
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      };
      launch(false);
      const std::vector<uint16_t> y = dy.get();
      const std::vector<float> after = dstate.get(), u_after = du.get();
      launch(true);
      expect_rows(dy_r.get(), y, size_t(Hv) * dv, r, kFillBf);
      expect_slots(dstate.get(), after, state, owner, hs, r);
      // The log's u: the uniform launch's where a sequence took part, as it was where not.
      const std::vector<float> u_r = du.get();
      const size_t seq_u = size_t(W) * Hv * dv;
      for (int b = 0; b < B; ++b)
        ASSERT_EQ(std::memcmp(u_r.data() + b * seq_u, (r.taken(b) ? u_after : log_u).data() + b * seq_u, seq_u * 4), 0)
            << "log u of sequence " << b << (r.taken(b) ? "" : ", left out,");
    }
  }
}

}  // namespace
}  // namespace replayssm
