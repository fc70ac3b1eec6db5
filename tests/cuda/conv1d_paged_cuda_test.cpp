// The conv over a paged window (Conv1dArgs::log_rows) against the window
// buffer holding the same rows: a decode step, ragged prefill segments and
// the fused Mamba2 conv + append, bit for bit; and the window gathered at a
// position (conv1d_gather_window_cuda) against the window the buffer path
// leaves after the same rows. Each sequence's rows before its new ones come
// from its log (page sizes 1, 4, 16, random offsets and slots) and, past
// its start, from its checkpoint's window or (no checkpoint) zeros: logs of
// none, fewer than K − 1 and more rows. Odd and real sizes, K = 1..4, a
// padded log row stride, and batches of two channels a thread. Skipped
// where no CUDA device exists; the refusals run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/ssm_append.h"
#include "paged_log_util.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;
using test::PagedLayout;

struct Shape {
  int batch, C, K;
  bool bias;
  bool aligned = false;  // even strides: two channels a thread once the blocks fill the GPU
};
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B" << s.batch << "_C" << s.C << "_K" << s.K << (s.bias ? "_bias" : "") << (s.aligned ? "_aligned" : "");
}

// B sequences' sources: checkpoint windows (some sequences at position 0:
// none), logs of n_logged[b] pre-conv rows (row stride ld), and the window
// buffer of the same rows, each sequence's at slot[b].
struct Sources {
  int B, C, K, W, ld, slots;
  std::vector<int32_t> n_logged, ckpt_slot, slot;
  Bf ckpt, log;                  // (B + 2, K−1, C), (B, W, ld)
  std::vector<uint16_t> window;  // (slots, K−1, C)

  Sources(std::mt19937& g, int batch, int channels, int k, bool aligned)
      : B(batch), C(channels), K(k), ld(aligned ? channels + 2 : channels + 3), slots(2 * batch + 1) {
    const int spread[] = {0, 1, std::max(0, K - 2), K - 1, K, 7, 20};
    for (int b = 0; b < B; ++b) n_logged.push_back(spread[b % 7]);
    W = *std::max_element(n_logged.begin(), n_logged.end()) + 1;
    std::vector<int32_t> ck(B + 2);
    std::iota(ck.begin(), ck.end(), 0);
    std::shuffle(ck.begin(), ck.end(), g);
    for (int b = 0; b < B; ++b) ckpt_slot.push_back(b % 4 == 1 ? -1 : ck[b]), slot.push_back(2 * (B - 1 - b) + 1);
    ckpt = test::bf_rand(g, size_t(B + 2) * (K - 1) * C, 1.0f);
    log = test::bf_rand(g, size_t(B) * W * ld, 1.0f);
    window.assign(size_t(slots) * (K - 1) * C, test::kBf16Garbage);
    for (int b = 0; b < B; ++b) {
      const std::vector<uint16_t> w = window_at(b, n_logged[b]);
      std::copy(w.begin(), w.end(), window.begin() + size_t(slot[b]) * (K - 1) * C);
    }
  }
  // The K−1 rows before position base + n of sequence b (oldest first), as
  // a conv window holds them.
  std::vector<uint16_t> window_at(int b, int n) const {
    std::vector<uint16_t> w(size_t(K - 1) * C, 0);
    for (int j = 0; j < K - 1; ++j) {
      const int d = n - (K - 1) + j;  // offset from the base
      const uint16_t* row = d >= 0              ? log.bits.data() + (size_t(b) * W + d) * ld
                            : ckpt_slot[b] >= 0 ? ckpt.bits.data() + (size_t(ckpt_slot[b]) * (K - 1) + d + K - 1) * C
                                                : nullptr;
      if (row != nullptr) std::copy(row, row + C, w.begin() + size_t(j) * C);
    }
    return w;
  }
};

// The paged sources on the device, set into a's paged fields.
struct PagedDev {
  Dev<uint16_t> log, ckpt;
  Dev<int32_t> page, first, n_logged, ckpt_slot;
  PagedDev(const Sources& s, const PagedLayout& L)
      : log(L.scatter(s.log.bits, s.W, s.ld, test::kBf16Garbage)),
        ckpt(s.ckpt.bits),
        page(L.page),
        first(L.first),
        n_logged(s.n_logged),
        ckpt_slot(s.ckpt_slot) {}
  void set(ops::cuda::Conv1dArgs& a, const Sources& s, const PagedLayout& L) const {
    a.log_rows = log.p, a.ldlog = s.ld, a.pages = {page.p, L.page_stride, first.p, L.page_size};
    a.n_logged = n_logged.p, a.ckpt_window = ckpt.p, a.ckpt_slot = ckpt_slot.p;
  }
};

using Conv1dPaged = test::GpuTestWithParam<Shape>;

TEST_P(Conv1dPaged, DecodeStepIsBitIdenticalToTheWindowBuffer) {
  const Shape sh = GetParam();
  std::mt19937 g(61 + sh.C);
  const Sources s(g, sh.batch, sh.C, sh.K, sh.aligned);
  const int B = s.B, C = s.C, K = s.K;
  const int64_t ldx = sh.aligned ? C + 8 : C + 5, ldy = sh.aligned ? C : C + 2;
  const Bf x = test::bf_rand(g, size_t(B) * ldx, 1.0f);
  const std::vector<float> w = test::uniform(g, size_t(C) * K, -0.6f, 0.6f), bias = test::uniform(g, C, -0.5f, 0.5f);
  Dev<float> dw(w), dbias(bias);
  Dev<uint16_t> dx(x.bits), dwin(s.window), dy(std::vector<uint16_t>(size_t(B) * ldy, test::kBf16Garbage));
  Dev<int32_t> dslot(s.slot);
  ops::cuda::Conv1dArgs a;
  a.batch = B, a.C = C, a.K = K, a.weight = dw.p, a.bias = sh.bias ? dbias.p : nullptr, a.x = dx.p, a.ldx = ldx;
  a.y = dy.p, a.ldy = ldy, a.window = dwin.p, a.slot = dslot.p;
  ASSERT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> y_ref = dy.get();
  for (const int page_size : {1, 4, 16}) {
    SCOPED_TRACE(testing::Message() << "pages of " << page_size);
    const PagedLayout L(g, B, s.W, page_size);
    const PagedDev pd(s, L);
    const std::vector<uint16_t> garbage(s.window.size(), test::kBf16Garbage);
    Dev<uint16_t> dgarbage(garbage), dyp(std::vector<uint16_t>(size_t(B) * ldy, test::kBf16Garbage));
    ops::cuda::Conv1dArgs p = a;
    pd.set(p, s, L);
    p.window = dgarbage.p, p.y = dyp.p;  // neither read nor written
    ASSERT_EQ(ops::cuda::conv1d_step_cuda(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(test::same_bits(dyp.get(), y_ref, "outputs"));
    EXPECT_TRUE(test::same_bits(dgarbage.get(), garbage, "the window (untouched)"));
    p.window = nullptr, p.slot = nullptr;  // and need not be there
    ASSERT_EQ(ops::cuda::conv1d_step_cuda(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(test::same_bits(dyp.get(), y_ref, "outputs without a window buffer"));
  }
}

TEST_P(Conv1dPaged, PrefillSegmentsAreBitIdenticalToTheWindowBuffer) {
  const Shape sh = GetParam();
  std::mt19937 g(67 + sh.C);
  const Sources s(g, std::max(sh.batch, 5), sh.C, sh.K, sh.aligned);
  const int B = s.B, C = s.C, K = s.K;
  // Segments shorter than the window, empty, one row, across the 16-row chunks.
  const int lens[] = {2, 0, 1, 17, 40};
  std::vector<int32_t> cu_rows{0};
  for (int b = 0; b < B; ++b) cu_rows.push_back(cu_rows.back() + lens[b % 5]);
  const int rows = cu_rows.back(), max_rows = 40;
  const int64_t ldx = C + 3, ldy = C;
  const Bf x = test::bf_rand(g, size_t(rows) * ldx, 1.0f);
  const std::vector<float> w = test::uniform(g, size_t(C) * K, -0.6f, 0.6f), bias = test::uniform(g, C, -0.5f, 0.5f);
  Dev<float> dw(w), dbias(bias);
  Dev<uint16_t> dx(x.bits), dwin(s.window), dy(std::vector<uint16_t>(size_t(rows) * ldy, test::kBf16Garbage));
  Dev<int32_t> dslot(s.slot), dcu(cu_rows);
  ops::cuda::Conv1dArgs a;
  a.batch = B, a.C = C, a.K = K, a.weight = dw.p, a.bias = sh.bias ? dbias.p : nullptr, a.x = dx.p, a.ldx = ldx;
  a.y = dy.p, a.ldy = ldy, a.window = dwin.p, a.slot = dslot.p, a.cu_rows = dcu.p, a.max_rows = max_rows;
  ASSERT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> y_ref = dy.get();
  for (const int page_size : {1, 4, 16}) {
    SCOPED_TRACE(testing::Message() << "pages of " << page_size);
    const PagedLayout L(g, B, s.W, page_size);
    const PagedDev pd(s, L);
    const std::vector<uint16_t> garbage(s.window.size(), test::kBf16Garbage);
    Dev<uint16_t> dgarbage(garbage), dyp(std::vector<uint16_t>(size_t(rows) * ldy, test::kBf16Garbage));
    ops::cuda::Conv1dArgs p = a;
    pd.set(p, s, L);
    p.window = dgarbage.p, p.y = dyp.p;  // neither read nor updated after
    ASSERT_EQ(ops::cuda::conv1d_prefill_cuda(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(test::same_bits(dyp.get(), y_ref, "outputs"));
    EXPECT_TRUE(test::same_bits(dgarbage.get(), garbage, "the window (untouched)"));
  }
}

// The window at position base + n_upto[b] (n_upto ≤ n_logged: the whole
// log, part of it, none), gathered into shuffled output slots (some
// sequences none), against the window the buffer path's prefill leaves
// after the same n_upto rows from the checkpoint's window.
TEST_P(Conv1dPaged, GatheredWindowIsTheWindowTheBufferPathLeaves) {
  const Shape sh = GetParam();
  std::mt19937 g(71 + sh.C);
  const Sources s(g, std::max(sh.batch, 7), sh.C, sh.K, sh.aligned);
  const int B = s.B, C = s.C, K = s.K;
  std::vector<int32_t> n_upto(B), out_slot(B), cu_rows{0};
  std::vector<uint16_t> rows_x, start(size_t(s.slots) * (K - 1) * C, test::kBf16Garbage);
  for (int b = 0; b < B; ++b) {
    n_upto[b] = std::max(0, s.n_logged[b] - b % 3);
    out_slot[b] = b % 5 == 2 ? -1 : (b * 7 + 3) % (B + 1);
    const std::vector<uint16_t> w0 = s.window_at(b, 0);  // the checkpoint's window
    std::copy(w0.begin(), w0.end(), start.begin() + size_t(s.slot[b]) * (K - 1) * C);
    for (int r = 0; r < n_upto[b]; ++r)
      rows_x.insert(rows_x.end(), s.log.bits.begin() + (int64_t(b) * s.W + r) * s.ld,
                    s.log.bits.begin() + (int64_t(b) * s.W + r) * s.ld + C);
    cu_rows.push_back(cu_rows.back() + n_upto[b]);
  }
  const std::vector<float> w = test::uniform(g, size_t(C) * K, -0.6f, 0.6f);
  // The buffer path: the checkpoint's window, then the rows through prefill.
  Dev<float> dw(w);
  Dev<uint16_t> dwin(start), dx(rows_x), dy(std::vector<uint16_t>(std::max<size_t>(rows_x.size(), 1)));
  Dev<int32_t> dslot(s.slot), dcu(cu_rows);
  ops::cuda::Conv1dArgs a;
  a.batch = B, a.C = C, a.K = K, a.weight = dw.p, a.x = dx.p, a.ldx = C, a.y = dy.p, a.ldy = C;
  a.window = dwin.p, a.slot = dslot.p, a.cu_rows = dcu.p, a.max_rows = *std::max_element(n_upto.begin(), n_upto.end());
  ASSERT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> after = dwin.get();
  Dev<int32_t> dn(n_upto), dout_slot(out_slot);
  for (const int page_size : {1, 4, 16}) {
    SCOPED_TRACE(testing::Message() << "pages of " << page_size);
    const PagedLayout L(g, B, s.W, page_size);
    const PagedDev pd(s, L);
    const std::vector<uint16_t> init((size_t(B) + 1) * std::max(K - 1, 0) * C, test::kBf16Garbage);
    Dev<uint16_t> out(init);
    ops::cuda::Conv1dArgs p;
    p.batch = B, p.C = C, p.K = K;
    pd.set(p, s, L);
    ASSERT_EQ(ops::cuda::conv1d_gather_window_cuda(p, dn.p, out.p, dout_slot.p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> want = init;
    for (int b = 0; b < B; ++b)
      if (out_slot[b] >= 0)
        std::copy_n(after.begin() + size_t(s.slot[b]) * (K - 1) * C, size_t(K - 1) * C,
                    want.begin() + size_t(out_slot[b]) * (K - 1) * C);
    EXPECT_TRUE(test::same_bits(out.get(), want, "gathered windows"));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv1dPaged,
                         ::testing::Values(Shape{3, 37, 4, false},           // odd, no bias
                                           Shape{2, 50, 2, true},            // window of one row
                                           Shape{7, 45, 3, true},            // odd K, every log length
                                           Shape{2, 33, 1, true},            // no window at all
                                           Shape{7, 10240, 4, true},         // Nemotron-H-8B xBC
                                           Shape{140, 64, 4, true, true},    // two channels a thread
                                           Shape{140, 24, 3, true, true}));  // a partial block, odd K

// The fused Mamba2 conv + append over a paged window: the conv's output
// rows, the log entries and C rows and dt, bit for bit the buffer path's.
TEST(Conv1dPagedAppend, FusedConvAndAppendMatchTheWindowBuffer) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const int B : {5, 140}) {  // one channel a thread; two, once the blocks fill the GPU
    SCOPED_TRACE(testing::Message() << "batch " << B);
    const int H = 4, P = 8, G = 2, N = 16, K = 4, HP = H * P, GN = G * N, C = HP + 2 * GN, W = 6;
    const int64_t width = C + H + 2;  // a projection row: x | B | C, dt, padding
    std::mt19937 g(73 + B);
    const Sources s(g, B, C, K, true);
    const Bf proj = test::bf_rand(g, size_t(B) * width, 1.0f);
    const std::vector<float> cw = test::uniform(g, size_t(C) * K, -0.5f, 0.5f), cb = test::uniform(g, C, -0.2f, 0.2f),
                             dtb = test::uniform(g, H, -1.0f, 1.0f);
    std::vector<int32_t> entry(B);
    for (int b = 0; b < B; ++b) entry[b] = b * W + (b * 3 + 4) % W;
    Dev<float> dcw(cw), dcb(cb), ddtb(dtb);
    Dev<int32_t> dslot(s.slot), dentry(entry);
    struct Out {
      Dev<uint16_t> proj, x, Bm, Cm;
      Dev<float> dt;
    };
    auto make = [&] {
      return Out{Dev<uint16_t>(proj.bits), Dev<uint16_t>(std::vector<uint16_t>(size_t(B) * W * HP, 0xffff)),
                 Dev<uint16_t>(std::vector<uint16_t>(size_t(B) * W * GN, 0xffff)),
                 Dev<uint16_t>(std::vector<uint16_t>(size_t(B) * GN, 0xffff)),
                 Dev<float>(std::vector<float>(size_t(B) * W * H, -1.0f))};
    };
    Dev<uint16_t> dwin(s.window);
    auto run = [&](Out& o, ops::cuda::Conv1dArgs cv) {
      cv.batch = B, cv.C = C, cv.K = K, cv.weight = dcw.p, cv.bias = dcb.p, cv.x = o.proj.p, cv.ldx = width;
      cv.y = o.proj.p, cv.ldy = width;
      ops::cuda::Mamba2AppendArgs a;
      a.rows = B, a.H = H, a.P = P, a.G = G, a.N = N, a.dt_raw = o.proj.p + C, a.lddt = width, a.dt_bias = ddtb.p;
      a.dt_min = 0.01f, a.dt_max = 2.0f, a.entry = dentry.p, a.x = o.x.p, a.Bm = o.Bm.p, a.dt = o.dt.p, a.Cm = o.Cm.p;
      EXPECT_EQ(ops::cuda::mamba2_conv_append_cuda(cv, a, nullptr), cudaSuccess);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    };
    Out ref = make();
    ops::cuda::Conv1dArgs buffer;
    buffer.window = dwin.p, buffer.slot = dslot.p;
    run(ref, buffer);
    for (const int page_size : {1, 4, 16}) {
      SCOPED_TRACE(testing::Message() << "pages of " << page_size);
      const PagedLayout L(g, B, s.W, page_size);
      const PagedDev pd(s, L);
      Out got = make();
      ops::cuda::Conv1dArgs paged;
      pd.set(paged, s, L);
      run(got, paged);
      EXPECT_TRUE(test::same_bits(got.proj.get(), ref.proj.get(), "conv outputs"));
      EXPECT_TRUE(test::same_bits(got.x.get(), ref.x.get(), "log x"));
      EXPECT_TRUE(test::same_bits(got.Bm.get(), ref.Bm.get(), "log B"));
      EXPECT_TRUE(test::same_bits(got.Cm.get(), ref.Cm.get(), "C rows"));
      EXPECT_TRUE(test::same_bits(got.dt.get(), ref.dt.get(), "log dt"));
    }
    EXPECT_NE(ref.proj.get(), proj.bits) << "the conv ran";
  }
}

// Runs without a GPU: every refusal comes before the device is touched.
TEST(Conv1dPagedArgs, BadPagedSourcesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(16);  // never dereferenced: refused first
  const float* f = reinterpret_cast<const float*>(16);
  const int32_t* i = reinterpret_cast<const int32_t*>(16);
  const int32_t table[2] = {0, 1};
  ops::cuda::Conv1dArgs a;
  a.batch = 2, a.C = 64, a.K = 4, a.weight = f, a.x = p, a.ldx = 64, a.y = p + 64, a.ldy = 64;
  a.log_rows = p, a.pages = {table, 2, table, 4}, a.n_logged = i, a.ckpt_window = p, a.ckpt_slot = i;
  a.cu_rows = i, a.max_rows = 8;
  a.pages.page_size = 3;  // not a power of two
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::conv1d_gather_window_cuda(a, i, p, i, nullptr), cudaErrorInvalidValue);
  a.pages.page_size = 4, a.pages.page = nullptr;  // log rows without a table
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.pages.page = table, a.n_logged = nullptr;
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.n_logged = i, a.ckpt_slot = nullptr;
  EXPECT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::conv1d_gather_window_cuda(a, i, p, i, nullptr), cudaErrorInvalidValue);
  a.ckpt_slot = i, a.ldlog = 63;  // a row stride under C
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.ldlog = 0;
  EXPECT_EQ(ops::cuda::conv1d_window_cuda(a, nullptr), cudaErrorInvalidValue);  // no window to update
  EXPECT_EQ(ops::cuda::conv1d_gather_window_cuda(a, nullptr, p, i, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::conv1d_gather_window_cuda(a, i, nullptr, i, nullptr), cudaErrorInvalidValue);
  a.log_rows = nullptr;
  EXPECT_EQ(ops::cuda::conv1d_gather_window_cuda(a, i, p, i, nullptr), cudaErrorInvalidValue);
  a.K = 1;  // no window: nothing to gather
  EXPECT_EQ(ops::cuda::conv1d_gather_window_cuda(a, i, p, i, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace replayssm
