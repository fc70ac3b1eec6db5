// What the CUDA backend asks of the chunk scans beyond plain prefill: a chunk
// whose entries stay in the log (the GDN scan writes each token's u,
// GdnScanArgs::u) and states at positions inside a log (apply_log_alone: a
// sequence with no rows folds its log into out_slot). A chunk's entries
// replayed from the chunk's starting state by the log-only scan give the
// chunk's state bit for bit — the Mamba2 log's x, B, dt as mamba2_append_cuda
// writes them, the GDN log's k, g as prepared and u as the scan reported
// it — and a sequence with no rows is untouched unless asked. Skipped where
// no CUDA device exists.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/ssm_step.h"
#include "ops/cuda/gdn_scan.h"
#include "ops/cuda/mamba2_scan.h"
#include "ops/cuda/ssm_append.h"
#include "paged_log_util.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;
using test::uniform;
using test::unit_rows;

// Sequence b: T rows at b·T, state slot b; its log entries (the same rows)
// at b·T + t of the log arrays (contiguous, W = T). Slots B..2B−1: where
// the log-only pass writes; slot 2B: a sequence with no rows, untouched.
TEST(SsmScanLog, Mamba2ChunkEntriesReplayToTheChunksState) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 3, H = 4, P = 16, N = 32, G = 2, T = 11;
  const int64_t HP = int64_t(H) * P, GN = int64_t(G) * N, ld = HP + 2 * GN, rows = int64_t(B) * T;
  std::mt19937 g(61);
  const std::vector<float> A_log = uniform(g, H, -1.0f, 1.0f), D = uniform(g, H, -1.0f, 1.0f),
                           dt_bias = uniform(g, H, -1.0f, 0.5f);
  std::vector<float> state = uniform(g, size_t(2 * B + 1) * HP * N, -0.3f, 0.3f);
  const Bf xbc = test::bf_rand(g, size_t(rows * ld), 1.0f), dt_raw = test::bf_of(uniform(g, size_t(rows * H), -4.0f, 3.0f));
  Dev<float> dA(A_log), dD(D), dbias(dt_bias), dstate(state), ldt(std::vector<float>(size_t(rows * H)));
  Dev<uint16_t> dxbc(xbc.bits), ddt(dt_raw.bits), dy(std::vector<uint16_t>(size_t(rows * HP))),
      lx(std::vector<uint16_t>(size_t(rows * HP))), lB(std::vector<uint16_t>(size_t(rows * GN))),
      cC(std::vector<uint16_t>(size_t(rows * GN)));
  std::vector<int32_t> entry(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) entry[size_t(r)] = int32_t(r);
  Dev<int32_t> dentry(entry);
  // The log's entries as the backend writes them.
  ops::cuda::Mamba2AppendArgs ap;
  ap.rows = rows, ap.H = H, ap.P = P, ap.G = G, ap.N = N, ap.xbc = dxbc.p, ap.ldxbc = ld, ap.dt_raw = ddt.p, ap.lddt = H;
  ap.dt_bias = dbias.p, ap.dt_min = 0.01f, ap.dt_max = 1.5f, ap.entry = dentry.p, ap.x = lx.p, ap.Bm = lB.p,
  ap.dt = ldt.p, ap.Cm = cC.p;
  ASSERT_EQ(ops::cuda::mamba2_append_cuda(ap, nullptr), cudaSuccess);
  // The chunk: slot b → slot b.
  std::vector<int32_t> slot, out, cu, n_rows, n_log;
  for (int b = 0; b < B; ++b) slot.push_back(b), out.push_back(b), cu.push_back(b * T), n_rows.push_back(T);
  cu.push_back(int32_t(rows));
  Dev<int32_t> dslot(slot), dout(out), dcu(cu), dn(n_rows);
  ops::cuda::Mamba2ScanArgs a;
  a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.T = T;
  a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.dt_min = 0.01f, a.dt_max = 1.5f;
  a.state = dstate.p, a.slot = dslot.p, a.out_slot = dout.p;
  a.x = dxbc.p, a.ldx = ld, a.Bm = dxbc.p + HP, a.Cm = dxbc.p + HP + GN, a.ldbc = ld, a.dt_raw = ddt.p, a.lddt = H;
  a.y = dy.p, a.ldy = HP, a.cu_rows = dcu.p, a.n_rows = dn.p;
  ASSERT_EQ(ops::cuda::mamba2_scan_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> chunked = dstate.get();
  // The log alone, from the chunk's starting states (slots b, restored) into
  // slots B + b; one more sequence (slot 2B) with no rows and no log.
  ASSERT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
  slot.push_back(2 * B), out.clear(), n_rows.assign(size_t(B + 1), 0), n_log.assign(size_t(B), T), n_log.push_back(0);
  for (int b = 0; b <= B; ++b) out.push_back(b < B ? B + b : 2 * B);
  cu.assign(size_t(B + 2), 0);
  Dev<int32_t> s2(slot), o2(out), c2(cu), r2(n_rows), l2(n_log);
  a.batch = B + 1, a.T = 1, a.slot = s2.p, a.out_slot = o2.p, a.cu_rows = c2.p, a.n_rows = r2.p;
  a.W = T, a.n_log = l2.p, a.log_x = lx.p, a.log_B = lB.p, a.log_dt = ldt.p;
  // Without apply_log_alone nothing is touched.
  ASSERT_EQ(ops::cuda::mamba2_scan_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(test::same_bits(dstate.get(), state, "states, no rows and no apply_log_alone"));
  a.apply_log_alone = true;
  ASSERT_EQ(ops::cuda::mamba2_scan_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> logged = dstate.get();
  const size_t S = size_t(HP * N);
  for (int b = 0; b < B; ++b) {
    const std::vector<float> want(chunked.begin() + int64_t(b * S), chunked.begin() + int64_t((b + 1) * S));
    const std::vector<float> got(logged.begin() + int64_t((B + b) * S), logged.begin() + int64_t((B + b + 1) * S));
    EXPECT_TRUE(test::same_bits(got, want, "the log's state against the chunk's")) << "sequence " << b;
  }
  const std::vector<float> untouched(logged.begin() + int64_t(2 * B * S), logged.end());
  EXPECT_TRUE(test::same_bits(untouched, std::vector<float>(state.begin() + int64_t(2 * B * S), state.end()),
                              "a sequence with neither rows nor log"));
}

TEST(SsmScanLog, GdnChunkUReplaysToTheChunksState) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 3, Hk = 2, Hv = 4, dk = 32, dv = 40, T = 19;
  const int64_t K = int64_t(Hk) * dk, V = int64_t(Hv) * dv, rows = int64_t(B) * T;
  std::mt19937 g(67);
  std::vector<float> state = uniform(g, size_t(2 * B + 1) * Hv * dk * dv, -0.3f, 0.3f);
  const std::vector<float> gg = uniform(g, size_t(rows * Hv), -1.0f, -0.01f),
                           beta = uniform(g, size_t(rows * Hv), 0.05f, 0.95f);
  const Bf q = unit_rows(g, size_t(rows) * Hk, dk, 1.0f / std::sqrt(float(dk))), k = unit_rows(g, size_t(rows) * Hk, dk, 1.0f),
           v = test::bf_of(uniform(g, size_t(rows * V), -1.0f, 1.0f));
  Dev<float> dstate(state), dg(gg), dbeta(beta), du(std::vector<float>(size_t(rows * V)));
  Dev<uint16_t> dq(q.bits), dk_(k.bits), dv_(v.bits), dout(std::vector<uint16_t>(size_t(rows * V)));
  std::vector<int32_t> slot, out, cu, n_rows, n_log;
  for (int b = 0; b < B; ++b) slot.push_back(b), out.push_back(b), cu.push_back(b * T), n_rows.push_back(T);
  cu.push_back(int32_t(rows));
  Dev<int32_t> dslot(slot), dos(out), dcu(cu), dn(n_rows);
  ops::cuda::GdnScanArgs a;
  a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = T;
  a.state = dstate.p, a.slot = dslot.p, a.out_slot = dos.p, a.q = dq.p, a.k = dk_.p, a.v = dv_.p, a.g = dg.p;
  a.beta = dbeta.p, a.o = dout.p, a.cu_rows = dcu.p, a.n_rows = dn.p, a.u = du.p;
  ASSERT_EQ(ops::cuda::gdn_scan_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> chunked = dstate.get(), u = du.get();
  // u against the CPU's sequential delta rule on the same inputs (its own
  // rounding: the scan takes Sᵀk before the decay).
  {
    std::vector<float> S(state.begin(), state.begin() + int64_t(Hv) * dk * dv), uu(static_cast<size_t>(dv));
    float worst = 0.0f;
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < Hv; ++h) {
        float* Sh = S.data() + int64_t(h) * dk * dv;
        const float* kh = k.f.data() + int64_t(t) * K + (h / (Hv / Hk)) * dk;
        ops::cpu::gdn_decay_head(Sh, dk, dv, std::exp(gg[size_t(t * Hv + h)]));
        ops::cpu::gdn_correct_head(Sh, dk, dv, kh, v.f.data() + int64_t(t) * V + h * dv, beta[size_t(t * Hv + h)],
                                   uu.data());
        ops::cpu::gdn_rank1_head(Sh, dk, dv, kh, uu.data());
        for (int j = 0; j < dv; ++j)
          worst = std::max(worst, std::abs(u[size_t(t * V + h * dv + j)] - uu[size_t(j)]) / (1.0f + std::abs(uu[size_t(j)])));
      }
    EXPECT_LE(worst, test::kStateTol) << "u against the CPU";
  }
  // The entries (k, u, g) replayed from the chunk's starting states.
  ASSERT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
  slot.push_back(2 * B), out.clear(), n_rows.assign(size_t(B + 1), 0), n_log.assign(size_t(B), T), n_log.push_back(0);
  for (int b = 0; b <= B; ++b) out.push_back(b < B ? B + b : 2 * B);
  cu.assign(size_t(B + 2), 0);
  Dev<int32_t> s2(slot), o2(out), c2(cu), r2(n_rows), l2(n_log);
  a.batch = B + 1, a.T = 1, a.slot = s2.p, a.out_slot = o2.p, a.cu_rows = c2.p, a.n_rows = r2.p, a.u = nullptr;
  a.W = T, a.n_log = l2.p, a.log_k = dk_.p, a.log_u = du.p, a.log_g = dg.p, a.apply_log_alone = true;
  ASSERT_EQ(ops::cuda::gdn_scan_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> logged = dstate.get();
  const size_t S = size_t(Hv) * dk * dv;
  for (int b = 0; b < B; ++b) {
    const std::vector<float> want(chunked.begin() + int64_t(b * S), chunked.begin() + int64_t((b + 1) * S));
    const std::vector<float> got(logged.begin() + int64_t((B + b) * S), logged.begin() + int64_t((B + b + 1) * S));
    EXPECT_TRUE(test::same_bits(got, want, "the log's state against the chunk's")) << "sequence " << b;
  }
  const std::vector<float> untouched(logged.begin() + int64_t(2 * B * S), logged.end());
  EXPECT_TRUE(test::same_bits(untouched, std::vector<float>(state.begin() + int64_t(2 * B * S), state.end()),
                              "a sequence with neither rows nor log"));
}

}  // namespace
}  // namespace replayssm
