// The chunk scans' replay over a paged log (Mamba2ScanArgs::pages,
// GdnScanArgs::pages) against the same entries in the contiguous layout:
// logs longer than the decode kernels' 64 entries (paged, the scans apply
// any number; the contiguous run takes a W that holds them), none, short
// and several shared-memory tiles long, at page sizes 1, 4 and 16, random
// offsets of entry 0 and slots in random order. The same arithmetic on the
// same values: outputs and states with the same bits, the log untouched.
// Skipped where no CUDA device exists.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cuda/gdn_scan.h"
#include "ops/cuda/mamba2_scan.h"
#include "paged_log_util.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;
using test::PagedLayout;
using test::uniform;
using test::unit_rows;

// Sequence b reads slot 2b + 1 and writes 2b (b odd) or in place; its log
// holds n_log[b] of the W entries, from none to all.
struct Plan {
  std::vector<int32_t> slot, out, n_log;
  Plan(int B, int W) {
    for (int b = 0; b < B; ++b) {
      slot.push_back(2 * b + 1), out.push_back(b % 2 == 1 ? 2 * b : 2 * b + 1);
      n_log.push_back(b % 4 == 0 ? W : b % 4 == 1 ? 0 : b % 4 == 2 ? (7 * b + 3) % W : 65 % (W + 1));
    }
  }
};

struct MShape {
  int batch, H, P, N, G, T, W;
};
void PrintTo(const MShape& s, std::ostream* os) {
  *os << "B" << s.batch << "_H" << s.H << "_P" << s.P << "_N" << s.N << "_G" << s.G << "_T" << s.T << "_W" << s.W;
}
using Mamba2ScanPaged = test::GpuTestWithParam<MShape>;

TEST_P(Mamba2ScanPaged, LogAppliedIsBitIdenticalToTheContiguousLog) {
  const MShape s = GetParam();
  const int B = s.batch, H = s.H, P = s.P, N = s.N, G = s.G, T = s.T, W = s.W;
  std::mt19937 g(47 + T + N);
  const int64_t HP = int64_t(H) * P, GN = int64_t(G) * N, ld = HP + 2 * GN, rows = int64_t(B) * T;
  const Plan pl(B, W);
  const std::vector<float> A_log = uniform(g, H, -1.0f, 1.0f), D = uniform(g, H, -1.0f, 1.0f),
                           dt_bias = uniform(g, H, -1.0f, 0.5f),
                           state = uniform(g, size_t(2 * B + 1) * HP * N, -0.3f, 0.3f),
                           log_dt = uniform(g, size_t(B) * W * H, 0.02f, 0.8f);
  const Bf xbc = test::bf_rand(g, size_t(rows * ld), 1.0f),
           dt_raw = test::bf_of(uniform(g, size_t(rows * H), -4.0f, 3.0f)),
           lx = test::bf_rand(g, size_t(B) * W * HP, 1.0f), lB = test::bf_rand(g, size_t(B) * W * GN, 1.0f);
  Dev<float> dA(A_log), dD(D), dbias(dt_bias), dstate(state), dldt(log_dt);
  Dev<uint16_t> dxbc(xbc.bits), ddt(dt_raw.bits), dlx(lx.bits), dlB(lB.bits),
      dy(std::vector<uint16_t>(size_t(rows * HP)));
  Dev<int32_t> dslot(pl.slot), dout(pl.out), dn(pl.n_log);
  ops::cuda::Mamba2ScanArgs a;
  a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.T = T;
  a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.dt_min = 0.01f, a.dt_max = 1.5f;
  a.state = dstate.p, a.slot = dslot.p, a.out_slot = dout.p;
  a.x = dxbc.p, a.ldx = ld, a.Bm = dxbc.p + HP, a.Cm = dxbc.p + HP + GN, a.ldbc = ld, a.dt_raw = ddt.p, a.lddt = H;
  a.y = dy.p, a.ldy = HP, a.n_log = dn.p;
  auto run = [&] {
    EXPECT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(ops::cuda::mamba2_scan_cuda(a, nullptr), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return std::pair{dy.get(), dstate.get()};
  };
  a.W = W, a.log_x = dlx.p, a.log_B = dlB.p, a.log_dt = dldt.p;
  const auto [y_ref, s_ref] = run();
  for (const int page_size : {1, 4, 16}) {
    SCOPED_TRACE(testing::Message() << "pages of " << page_size);
    const PagedLayout L(g, B, W, page_size);
    const std::vector<uint16_t> px = L.scatter(lx.bits, W, HP, test::kBf16Garbage),
                                pB = L.scatter(lB.bits, W, GN, test::kBf16Garbage);
    const std::vector<float> pdt = L.scatter(log_dt, W, H, test::f32_garbage());
    Dev<uint16_t> dpx(px), dpB(pB);
    Dev<float> dpdt(pdt);
    Dev<int32_t> dpage(L.page), dfirst(L.first);
    a.W = 0;  // paged: the log's length is n_log's alone
    a.log_x = dpx.p, a.log_B = dpB.p, a.log_dt = dpdt.p, a.pages = {dpage.p, L.page_stride, dfirst.p, page_size};
    const auto [y, st] = run();
    EXPECT_TRUE(test::same_bits(y, y_ref, "outputs"));
    EXPECT_TRUE(test::same_bits(st, s_ref, "states"));
    EXPECT_TRUE(test::same_bits(dpB.get(), pB, "log B (read only)"));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba2ScanPaged,
                         ::testing::Values(MShape{4, 4, 16, 64, 2, 5, 150},    // logs of 150, 65: tiles of 32 entries
                                           MShape{4, 6, 37, 11, 3, 40, 100},   // odd sizes, several row slices
                                           MShape{5, 4, 64, 128, 2, 1, 130},   // 128-column tile, one token
                                           MShape{4, 2, 24, 256, 1, 3, 70}));  // 256-column tile

struct GShape {
  int batch, Hk, Hv, dk, dv, T, W;
};
void PrintTo(const GShape& s, std::ostream* os) {
  *os << "B" << s.batch << "_Hk" << s.Hk << "_Hv" << s.Hv << "_dk" << s.dk << "_dv" << s.dv << "_T" << s.T << "_W"
      << s.W;
}
using GdnScanPaged = test::GpuTestWithParam<GShape>;

TEST_P(GdnScanPaged, LogAppliedIsBitIdenticalToTheContiguousLog) {
  const GShape s = GetParam();
  const int B = s.batch, Hk = s.Hk, Hv = s.Hv, dk = s.dk, dv = s.dv, T = s.T, W = s.W;
  std::mt19937 g(53 + T + dk);
  const int64_t rows = int64_t(B) * T, K = int64_t(Hk) * dk, V = int64_t(Hv) * dv;
  const Plan pl(B, W);
  const std::vector<float> state = uniform(g, size_t(2 * B + 1) * Hv * dk * dv, -0.3f, 0.3f),
                           gg = uniform(g, size_t(rows * Hv), -1.0f, -0.01f),
                           beta = uniform(g, size_t(rows * Hv), 0.05f, 0.95f),
                           log_u = uniform(g, size_t(B) * W * V, -0.5f, 0.5f),
                           log_g = uniform(g, size_t(B) * W * Hv, -1.0f, -0.01f);
  const Bf q = unit_rows(g, size_t(rows) * Hk, dk, 1.0f / std::sqrt(float(dk))),
           k = unit_rows(g, size_t(rows) * Hk, dk, 1.0f), v = test::bf_of(uniform(g, size_t(rows * V), -1.0f, 1.0f)),
           lk = unit_rows(g, size_t(B) * W * Hk, dk, 1.0f);
  Dev<float> dstate(state), dg(gg), dbeta(beta), du(log_u), dlg(log_g);
  Dev<uint16_t> dq(q.bits), dk_(k.bits), dv_(v.bits), dlk(lk.bits), dout(std::vector<uint16_t>(size_t(rows * V)));
  Dev<int32_t> dslot(pl.slot), dos(pl.out), dn(pl.n_log);
  ops::cuda::GdnScanArgs a;
  a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = T;
  a.state = dstate.p, a.slot = dslot.p, a.out_slot = dos.p, a.q = dq.p, a.k = dk_.p, a.v = dv_.p, a.g = dg.p;
  a.beta = dbeta.p, a.o = dout.p, a.n_log = dn.p;
  auto run = [&] {
    EXPECT_EQ(cudaMemcpy(dstate.p, state.data(), sizeof(float) * state.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(ops::cuda::gdn_scan_cuda(a, nullptr), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return std::pair{dout.get(), dstate.get()};
  };
  a.W = W, a.log_k = dlk.p, a.log_u = du.p, a.log_g = dlg.p;
  const auto [o_ref, s_ref] = run();
  for (const int page_size : {1, 4, 16}) {
    SCOPED_TRACE(testing::Message() << "pages of " << page_size);
    const PagedLayout L(g, B, W, page_size);
    const std::vector<uint16_t> pk = L.scatter(lk.bits, W, K, test::kBf16Garbage);
    const std::vector<float> pu = L.scatter(log_u, W, V, test::f32_garbage()),
                             pg = L.scatter(log_g, W, Hv, test::f32_garbage());
    Dev<uint16_t> dpk(pk);
    Dev<float> dpu(pu), dpg(pg);
    Dev<int32_t> dpage(L.page), dfirst(L.first);
    a.W = 0;  // paged: the log's length is n_log's alone
    a.log_k = dpk.p, a.log_u = dpu.p, a.log_g = dpg.p, a.pages = {dpage.p, L.page_stride, dfirst.p, page_size};
    const auto [o, st] = run();
    EXPECT_TRUE(test::same_bits(o, o_ref, "outputs"));
    EXPECT_TRUE(test::same_bits(st, s_ref, "states"));
    EXPECT_TRUE(test::same_bits(dpu.get(), pu, "log u (read only)"));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GdnScanPaged,
                         ::testing::Values(GShape{4, 2, 4, 64, 40, 5, 150},     // logs of 150, 65: tiles of 16 entries
                                           GShape{4, 1, 2, 128, 128, 17, 100},  // Qwen3-Next heads
                                           GShape{4, 1, 3, 37, 33, 1, 70},      // odd sizes, one token
                                           GShape{4, 2, 2, 200, 64, 2, 90}));   // tall keys

TEST(SsmScanPagedArgs, BadPagesAreRefused) {
  const int32_t table[2] = {0, 1};
  const float* f = reinterpret_cast<const float*>(16);  // never dereferenced: refused first
  float* fs = reinterpret_cast<float*>(16);
  const uint16_t* h = reinterpret_cast<const uint16_t*>(16);
  uint16_t* hs = reinterpret_cast<uint16_t*>(16);
  ops::cuda::Mamba2ScanArgs m;
  m.batch = 1, m.H = 2, m.P = 4, m.N = 8, m.G = 1, m.T = 1, m.ldx = m.ldbc = 8, m.lddt = 2, m.ldy = 8;
  m.A_log = m.D = m.dt_bias = f, m.state = fs, m.slot = m.out_slot = table, m.x = m.Bm = m.Cm = m.dt_raw = h, m.y = hs;
  m.n_log = table, m.log_x = m.log_B = h, m.log_dt = f;
  m.pages = {table, 1, table, 3};  // not a power of two
  EXPECT_EQ(ops::cuda::mamba2_scan_cuda(m, nullptr), cudaErrorInvalidValue);
  m.pages = {table, 1, nullptr, 4};
  EXPECT_EQ(ops::cuda::mamba2_scan_cuda(m, nullptr), cudaErrorInvalidValue);
  ops::cuda::GdnScanArgs d;
  d.batch = 1, d.Hk = 1, d.Hv = 1, d.dk = 8, d.dv = 8, d.T = 1;
  d.state = fs, d.slot = d.out_slot = table, d.q = d.k = d.v = h, d.g = d.beta = f, d.o = hs;
  d.n_log = table, d.log_k = h, d.log_u = f, d.log_g = f;
  d.pages = {table, 0, table, 4};
  EXPECT_EQ(ops::cuda::gdn_scan_cuda(d, nullptr), cudaErrorInvalidValue);
  d.pages = {table, 1, table, 0};
  EXPECT_EQ(ops::cuda::gdn_scan_cuda(d, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace replayssm
