// The SSM log appends (ssm_append.h) against their definition, written out
// on the CPU: rows scattered to the entries the plan names (compact or log
// layout), the untouched entries left as they were, Mamba2's dt through
// the CPU scan's softplus and clamp, and the GDN log move with overlapping
// ranges, whole pre-conv rows to their entries; plus the device weight fill (device_fill.h): in range, repeatable,
// seed-dependent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/activation.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/ssm_append.h"
#include "backend/cuda/device_fill.h"

namespace replayssm {
namespace {

TEST(SsmAppendCuda, Mamba2RowsLandOnTheirEntriesWithDt) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int H = 6, P = 5, G = 2, N = 7, rows = 4, W = 4, width = H * P + 2 * G * N + H + 3;  // padded rows
  const int HP = H * P, GN = G * N;
  std::mt19937 g(3);
  const test::Bf in = test::bf_rand(g, size_t(rows * width), 2.0f);
  const std::vector<float> bias = test::uniform(g, size_t(H), -1.0f, 1.0f);
  // Rows → log entries of 3 sequences; the last row left out (a ragged step's row of a chunk scan).
  const std::vector<int32_t> entry = {1 * W + 2, 0 * W + 3, 2 * W + 0, -1};
  const int entries = 3 * W;
  test::Dev<uint16_t> d_in(in.bits), x(std::vector<uint16_t>(size_t(entries * HP), 0xffff)),
      Bm(std::vector<uint16_t>(size_t(entries * GN), 0xffff)), Cm(std::vector<uint16_t>(size_t(rows * GN), 0));
  test::Dev<float> dt(std::vector<float>(size_t(entries * H), -1.0f)), d_bias(bias);
  test::Dev<int32_t> d_entry(entry);
  ops::cuda::Mamba2AppendArgs a;
  a.rows = rows, a.H = H, a.P = P, a.G = G, a.N = N, a.xbc = d_in.p, a.ldxbc = width;
  a.dt_raw = d_in.p + HP + 2 * GN, a.lddt = width, a.dt_bias = d_bias.p, a.dt_min = 0.05f, a.dt_max = 1.5f;
  a.entry = d_entry.p, a.x = x.p, a.Bm = Bm.p, a.dt = dt.p, a.Cm = Cm.p;
  ASSERT_EQ(ops::cuda::mamba2_append_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> hx = x.get(), hB = Bm.get(), hC = Cm.get();
  const std::vector<float> hdt = dt.get();
  std::vector<bool> written(size_t(entries), false);
  for (int r = 0; r < rows; ++r) {
    const int e = entry[size_t(r)];
    if (e < 0) {
      for (int i = 0; i < GN; ++i) ASSERT_EQ(hC[size_t(r * GN + i)], 0) << "row " << r << " was left out, its C too";
      continue;
    }
    written[size_t(e)] = true;
    for (int i = 0; i < HP; ++i) ASSERT_EQ(hx[size_t(e * HP + i)], in.bits[size_t(r * width + i)]);
    for (int i = 0; i < GN; ++i) {
      ASSERT_EQ(hB[size_t(e * GN + i)], in.bits[size_t(r * width + HP + i)]);
      ASSERT_EQ(hC[size_t(r * GN + i)], in.bits[size_t(r * width + HP + GN + i)]);
    }
    for (int h = 0; h < H; ++h) {
      const float want = std::min(std::max(ops::softplus(in.f[size_t(r * width + HP + 2 * GN + h)] + bias[size_t(h)]), 0.05f), 1.5f);
      EXPECT_NEAR(hdt[size_t(e * H + h)], want, 1e-6f * (1.0f + want)) << "row " << r << " head " << h;
    }
  }
  for (int e = 0; e < entries; ++e)
    if (!written[size_t(e)]) {
      EXPECT_EQ(hx[size_t(e * HP)], 0xffff) << "entry " << e << " was not in the plan";
      EXPECT_EQ(hdt[size_t(e * H)], -1.0f) << "entry " << e;
    }
}

// The decode step's conv and append as one kernel against the two launches
// it replaces (each tested against the CPU): every output bit for bit —
// the conv rows, the windows, the log entries, C and dt — over windows of
// K − 1 = 3 rows in shuffled slots and more channels than one block.
TEST(SsmAppendCuda, Mamba2ConvAppendHasTheBitsOfTheTwoKernels) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  struct Case {
    int H, P, G, N, B, off, pad;
  };
  // Odd offsets and widths: a thread per channel. Then even offsets and
  // x | B | C splits at 140 sequences (a block of 256 channels each, more
  // blocks than the H200's 132 SMs): two channels a thread, in both the
  // fused kernel and the conv step before the plain append.
  const Case cases[] = {{8, 20, 2, 36, 3, 7, 5}, {8, 16, 2, 32, 140, 8, 8}};
  for (const Case& k : cases) {
    SCOPED_TRACE(testing::Message() << "batch " << k.B << " offset " << k.off);
    const int H = k.H, P = k.P, G = k.G, N = k.N, B = k.B, K = 4, W = 5, slots = B + 1;
    const int HP = H * P, GN = G * N, C = HP + 2 * GN, off = k.off, width = off + C + H + k.pad;
    std::mt19937 g(11);
    const test::Bf proj = test::bf_rand(g, size_t(B * width), 1.0f),
                   win = test::bf_rand(g, size_t(slots * (K - 1) * C), 1.0f);
    const std::vector<float> cw = test::uniform(g, size_t(C * K), -0.5f, 0.5f),
                             cb = test::uniform(g, size_t(C), -0.2f, 0.2f);
    const std::vector<float> dtb = test::uniform(g, size_t(H), -1.0f, 1.0f);
    std::vector<int32_t> slot(B), entry(B);
    for (int b = 0; b < B; ++b) slot[b] = (b * 7 + 2) % slots, entry[b] = b * W + (b * 3 + 4) % W;  // permuted
    std::vector<int32_t> distinct = slot;
    std::sort(distinct.begin(), distinct.end());
    ASSERT_EQ(std::unique(distinct.begin(), distinct.end()), distinct.end()) << "a slot per sequence";
    struct Out {
      test::Dev<uint16_t> proj, win, x, Bm, Cm;
      test::Dev<float> dt;
    };
    auto make = [&] {
      return Out{test::Dev<uint16_t>(proj.bits), test::Dev<uint16_t>(win.bits),
                 test::Dev<uint16_t>(std::vector<uint16_t>(size_t(B * W * HP), 0xffff)),
                 test::Dev<uint16_t>(std::vector<uint16_t>(size_t(B * W * GN), 0xffff)),
                 test::Dev<uint16_t>(std::vector<uint16_t>(size_t(B * GN), 0xffff)),
                 test::Dev<float>(std::vector<float>(size_t(B * W * H), -1.0f))};
    };
    Out fused = make(), plain = make();
    test::Dev<float> d_cw(cw), d_cb(cb), d_dtb(dtb);
    test::Dev<int32_t> d_slot(slot), d_entry(entry);
    auto args = [&](Out& o, ops::cuda::Conv1dArgs* cv, ops::cuda::Mamba2AppendArgs* a) {
      cv->batch = B, cv->C = C, cv->K = K, cv->weight = d_cw.p, cv->bias = d_cb.p, cv->window = o.win.p;
      cv->slot = d_slot.p, cv->x = o.proj.p + off, cv->ldx = width, cv->y = o.proj.p + off, cv->ldy = width;
      a->rows = B, a->H = H, a->P = P, a->G = G, a->N = N, a->dt_raw = o.proj.p + off + C, a->lddt = width;
      a->dt_bias = d_dtb.p, a->dt_min = 0.01f, a->dt_max = 2.0f, a->entry = d_entry.p;
      a->x = o.x.p, a->Bm = o.Bm.p, a->dt = o.dt.p, a->Cm = o.Cm.p;
    };
    ops::cuda::Conv1dArgs cv;
    ops::cuda::Mamba2AppendArgs a;
    args(fused, &cv, &a);
    ASSERT_EQ(ops::cuda::mamba2_conv_append_cuda(cv, a, nullptr), cudaSuccess);
    args(plain, &cv, &a);
    ASSERT_EQ(ops::cuda::conv1d_step_cuda(cv, nullptr), cudaSuccess);
    a.xbc = plain.proj.p + off, a.ldxbc = width;
    ASSERT_EQ(ops::cuda::mamba2_append_cuda(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(fused.proj.get(), plain.proj.get());
    EXPECT_EQ(fused.win.get(), plain.win.get());
    EXPECT_EQ(fused.x.get(), plain.x.get());
    EXPECT_EQ(fused.Bm.get(), plain.Bm.get());
    EXPECT_EQ(fused.Cm.get(), plain.Cm.get());
    EXPECT_EQ(fused.dt.get(), plain.dt.get());
    EXPECT_NE(fused.proj.get(), proj.bits) << "the conv ran";
    // A conv whose channels are not x | B | C is refused.
    args(fused, &cv, &a);
    cv.C = C - 1;
    EXPECT_EQ(ops::cuda::mamba2_conv_append_cuda(cv, a, nullptr), cudaErrorInvalidValue);
  }
}

TEST(SsmAppendCuda, GdnDenseVAndLogKGThenTheMoveWithOverlap) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int Hk = 2, Hv = 4, dk = 3, dv = 5, rows = 3, W = 5, ldv = Hv * dv + 2;
  const int K = Hk * dk, V = Hv * dv;
  std::mt19937 g(5);
  const test::Bf vin = test::bf_rand(g, size_t(rows * ldv), 1.0f), k = test::bf_rand(g, size_t(rows * K), 1.0f);
  const std::vector<float> gg = test::uniform(g, size_t(rows * Hv), -2.0f, 0.0f);
  const std::vector<int32_t> entry = {0 * W + 3, 1 * W + 1, -1};  // the last row's v only (a chunk scan's row)
  test::Dev<uint16_t> d_vin(vin.bits), d_k(k.bits), v(std::vector<uint16_t>(size_t(rows * V), 0)),
      log_k(std::vector<uint16_t>(size_t(2 * W * K), 0));
  test::Dev<float> d_g(gg), log_g(std::vector<float>(size_t(2 * W * Hv), 0.0f));
  std::vector<float> u0(size_t(2 * W * V));
  for (size_t i = 0; i < u0.size(); ++i) u0[i] = float(i);
  test::Dev<float> log_u(u0);
  test::Dev<int32_t> d_entry(entry);
  ops::cuda::GdnAppendArgs a;
  a.rows = rows, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.v_in = d_vin.p, a.ldv = ldv, a.v = v.p;
  a.entry = d_entry.p, a.k = d_k.p, a.g = d_g.p, a.log_k = log_k.p, a.log_g = log_g.p;
  ASSERT_EQ(ops::cuda::gdn_append_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> hv = v.get(), hk = log_k.get();
  const std::vector<float> hg = log_g.get();
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < V; ++i) ASSERT_EQ(hv[size_t(r * V + i)], vin.bits[size_t(r * ldv + i)]);
    const int e = entry[size_t(r)];
    if (e < 0) continue;
    for (int i = 0; i < K; ++i) ASSERT_EQ(hk[size_t(e * K + i)], k.bits[size_t(r * K + i)]);
    for (int h = 0; h < Hv; ++h) ASSERT_EQ(hg[size_t(e * Hv + h)], gg[size_t(r * Hv + h)]);
  }
  // Sequence 0 moves 3 entries from 1 (overlapping [0, 3) and [1, 4)); sequence 1 none.
  test::Dev<int32_t> from(std::vector<int32_t>{1, 4}), count(std::vector<int32_t>{3, 0});
  ops::cuda::LogMoveArgs mv;
  mv.batch = 2, mv.W = W, mv.from = from.p, mv.count = count.p;
  mv.array[0] = log_k.p, mv.width[0] = K;
  mv.array[1] = log_u.p, mv.width[1] = 2 * V;
  mv.array[2] = log_g.p, mv.width[2] = 2 * Hv;
  ASSERT_EQ(ops::cuda::log_move_cuda(mv, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> hu = log_u.get();
  const std::vector<uint16_t> hk2 = log_k.get();
  // Nothing of the left-out row reached a log: entries other than 3 and W + 1 are still 0.
  for (int e = 0; e < 2 * W; ++e)
    if (e != 3 && e != W + 1)
      for (int i = 0; i < K; ++i) ASSERT_EQ(hk[size_t(e * K + i)], 0) << "entry " << e;
  for (int s = 0; s < 3; ++s)
    for (int i = 0; i < V; ++i) ASSERT_EQ(hu[size_t(s * V + i)], u0[size_t((1 + s) * V + i)]) << "entry " << s;
  for (int i = 0; i < K; ++i) ASSERT_EQ(hk2[size_t(2 * K + i)], hk[size_t(3 * K + i)]);  // entry 3 → 2
  for (size_t i = size_t(W * V); i < u0.size(); ++i) ASSERT_EQ(hu[i], u0[i]) << "sequence 1 moved nothing";
}

// A rewindable log's pre-conv rows: each row, whole, to its entry (odd
// width over two chunks, a padded source stride); other entries untouched.
TEST(SsmAppendCuda, LogRowsLandWholeOnTheirEntries) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int rows = 4, width = 1031, lds = 1040, entries = 8;
  std::mt19937 g(5);
  const test::Bf in = test::bf_rand(g, size_t(rows * lds), 1.0f);
  const std::vector<int32_t> entry = {5, 0, -1, 6};  // row 2 left out (a chunk scan's)
  test::Dev<uint16_t> d_in(in.bits), dst(std::vector<uint16_t>(size_t(entries * width), 0xabcd));
  test::Dev<int32_t> d_entry(entry);
  ops::cuda::LogRowsArgs a;
  a.rows = rows, a.width = width, a.src = d_in.p, a.lds = lds, a.entry = d_entry.p, a.dst = dst.p;
  ASSERT_EQ(ops::cuda::log_rows_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> h = dst.get();
  std::vector<uint16_t> want(size_t(entries * width), 0xabcd);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < width && entry[size_t(r)] >= 0; ++i)
      want[size_t(entry[size_t(r)] * width + i)] = in.bits[size_t(r * lds + i)];
  EXPECT_EQ(h, want);
  a.lds = width - 1;
  EXPECT_EQ(ops::cuda::log_rows_cuda(a, nullptr), cudaErrorInvalidValue);  // a stride under the width
}


// The gather form (a ragged step's last rows for the LM head): row r of
// dst is row src_row[r] of src, a row may be taken twice, dense output.
TEST(SsmAppendCuda, LogRowsGatherFromTheirSourceRows) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int src_rows = 9, width = 700, lds = 712;
  std::mt19937 g(6);
  const test::Bf in = test::bf_rand(g, size_t(src_rows * lds), 1.0f);
  const std::vector<int32_t> src_row = {8, 0, 3, 3, 5};
  const int rows = int(src_row.size());
  test::Dev<uint16_t> d_in(in.bits), dst(std::vector<uint16_t>(size_t(rows * width), 0xabcd));
  test::Dev<int32_t> d_src(src_row);
  ops::cuda::LogRowsArgs a;
  a.rows = rows, a.width = width, a.src = d_in.p, a.lds = lds, a.src_row = d_src.p, a.dst = dst.p;
  ASSERT_EQ(ops::cuda::log_rows_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> h = dst.get();
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < width; ++i)
      ASSERT_EQ(h[size_t(r * width + i)], in.bits[size_t(src_row[size_t(r)] * lds + i)]) << "row " << r;
}
// Three fills of n values: seeds 7, 7 and 8, through fill(p, n, seed).
template <typename T, typename Fill>
std::vector<std::vector<T>> three_fills(int64_t n, Fill&& fill) {
  const std::vector<T> zeros(static_cast<size_t>(n));
  test::Dev<T> a(zeros), b(zeros), c(zeros);
  EXPECT_EQ(fill(a.p, n, 7), cudaSuccess);
  EXPECT_EQ(fill(b.p, n, 7), cudaSuccess);
  EXPECT_EQ(fill(c.p, n, 8), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {a.get(), b.get(), c.get()};
}

TEST(DeviceFillCuda, UniformInRangeRepeatableAndSeeded) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 100003;
  const auto h = three_fills<uint16_t>(
      n, [](uint16_t* p, int64_t m, uint64_t seed) { return cuda::fill_uniform_bf16(p, m, 0.5f, seed, nullptr); });
  EXPECT_EQ(h[0], h[1]);
  EXPECT_NE(h[0], h[2]);
  double sum = 0.0, sq = 0.0;
  for (uint16_t v : h[0]) {
    const float f = bf16_to_f32(v);
    ASSERT_LE(std::abs(f), 0.5f);
    sum += f, sq += double(f) * f;
  }
  EXPECT_NEAR(sum / double(n), 0.0, 0.01);
  EXPECT_NEAR(sq / double(n), 0.25 / 3.0, 0.005);  // the variance of U(−0.5, 0.5)
}

TEST(DeviceFillCuda, UniformF32InRangeRepeatableAndSeeded) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int64_t n = 100003;
  const auto h = three_fills<float>(
      n, [](float* p, int64_t m, uint64_t seed) { return cuda::fill_uniform_f32(p, m, -3.0f, 1.0f, seed, nullptr); });
  EXPECT_EQ(h[0], h[1]);
  EXPECT_NE(h[0], h[2]);
  double sum = 0.0, sq = 0.0;
  for (float f : h[0]) {
    ASSERT_GE(f, -3.0f);
    ASSERT_LT(f, 1.0f);
    sum += f, sq += double(f + 1.0f) * (f + 1.0f);
  }
  EXPECT_NEAR(sum / double(n), -1.0, 0.02);
  EXPECT_NEAR(sq / double(n), 16.0 / 12.0, 0.03);  // the variance of U(−3, 1)
  test::Dev<float> one(std::vector<float>(1));
  EXPECT_EQ(cuda::fill_uniform_f32(one.p, 1, 1.0f, 0.0f, 7, nullptr), cudaErrorInvalidValue);  // lo > hi
}

TEST(SsmAppendCudaArgs, BadShapesAreRefused) {
  ops::cuda::Mamba2AppendArgs m;
  m.rows = 1, m.H = 4, m.P = 2, m.G = 3, m.N = 2, m.ldxbc = 100, m.lddt = 4;  // H % G != 0
  EXPECT_EQ(ops::cuda::mamba2_append_cuda(m, nullptr), cudaErrorInvalidValue);
  m.G = 2, m.ldxbc = 8;  // narrower than x | B | C
  EXPECT_EQ(ops::cuda::mamba2_append_cuda(m, nullptr), cudaErrorInvalidValue);
  m.ldxbc = 100;  // shapes fine, pointers missing
  EXPECT_EQ(ops::cuda::mamba2_append_cuda(m, nullptr), cudaErrorInvalidValue);
  ops::cuda::GdnAppendArgs g;
  g.rows = 1, g.Hk = 1, g.Hv = 2, g.dk = 4, g.dv = 4, g.ldv = 7;  // ldv < Hv·dv
  EXPECT_EQ(ops::cuda::gdn_append_cuda(g, nullptr), cudaErrorInvalidValue);
  ops::cuda::LogMoveArgs mv;
  mv.batch = 1, mv.W = 0;
  EXPECT_EQ(ops::cuda::log_move_cuda(mv, nullptr), cudaErrorInvalidValue);  // W = 0
  mv.W = 4, mv.array[0] = &mv;
  EXPECT_EQ(ops::cuda::log_move_cuda(mv, nullptr), cudaErrorInvalidValue);  // an array of width 0
  EXPECT_EQ(cuda::fill_uniform_bf16(nullptr, 4, 1.0f, 0, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace replayssm
