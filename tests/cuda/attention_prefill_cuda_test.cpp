// CUDA paged attention prefill (ops/cuda/attention_prefill.h) against the
// CPU reference (ops/cpu/attention.h, T rows per sequence, causal) plus
// forward.cpp's output gate. Pages are laid out as the store lays them
// ([K | V] per row, here with padding), shuffled in the pool; the new rows
// are written by kv_append_rows_cuda (checked bit for bit) before attention
// reads them. Ragged batches (T differs per sequence, some with a context
// before the new rows, some without), odd head dims and page sizes, long
// contexts (> 2000 rows), GQA ratios 1, 2, 3, 4, 6, 8, D 16..256; where
// every T is 1 the output must also match attention_decode_cuda. Real
// sizes: Nemotron-H-8B (32 heads / 8 KV × 128) and Qwen3.5-27B (24 / 4 ×
// 256, gated). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/attention.h"
#include "ops/cuda/attention_decode.h"
#include "ops/cuda/attention_prefill.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;

struct Shape {
  int Hq, Hkv, D, page_size;
  std::vector<int> T;    // new rows per sequence
  std::vector<int> pos;  // rows already in the cache before them
  bool gate;
};
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "Hq" << s.Hq << "_Hkv" << s.Hkv << "_D" << s.D << "_page" << s.page_size;
  for (size_t b = 0; b < s.T.size(); ++b) *os << "_" << s.pos[b] << "+" << s.T[b];
  if (s.gate) *os << "_gated";
}

class AttentionPrefillCuda : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(AttentionPrefillCuda, MatchesCpuOverShuffledPages) {
  const Shape& s = GetParam();
  const int B = int(s.T.size()), Hq = s.Hq, Hkv = s.Hkv, D = s.D, ps = s.page_size;
  const int64_t w = int64_t(Hkv) * D, row_stride = 2 * w + 8, page_elems = ps * row_stride;
  std::mt19937 g(67 + D + B);

  // Pages: a shuffled pool with spare pages; the table lists each sequence's pages in order.
  std::vector<int> n_pages(B);
  std::vector<int32_t> cu_rows(B + 1, 0), pos(s.pos.begin(), s.pos.end());
  int max_pages = 1, total = 3, max_rows = 0;
  for (int b = 0; b < B; ++b) {
    n_pages[b] = (s.pos[b] + s.T[b] + ps - 1) / ps, max_pages = std::max(max_pages, n_pages[b]);
    total += n_pages[b], cu_rows[b + 1] = cu_rows[b] + s.T[b], max_rows = std::max(max_rows, s.T[b]);
  }
  const int rows = cu_rows[B];
  std::vector<int32_t> perm(total);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g);
  std::vector<int32_t> table(size_t(B) * max_pages, 0), row_seq(rows), row_pos(rows);
  for (int b = 0, next = 0; b < B; ++b) {
    for (int i = 0; i < n_pages[b]; ++i) table[size_t(b) * max_pages + i] = perm[next++];
    for (int t = 0; t < s.T[b]; ++t) row_seq[cu_rows[b] + t] = b, row_pos[cu_rows[b] + t] = s.pos[b] + t;
  }
  // The pool: every row random (bf16-exact); the new rows come separately.
  Bf pool = test::bf_rand(g, size_t(total) * page_elems, 1.0f);
  const Bf k_new = test::bf_rand(g, size_t(rows) * (w + 2), 1.0f), v_new = test::bf_rand(g, size_t(rows) * (w + 3), 1.0f);
  // q (and gate): [query | gate] per head when gated, as Qwen3.5's q_proj rows.
  const int64_t qhs = s.gate ? 2 * D : D, ldq = Hq * qhs;
  const Bf qg = test::bf_rand(g, size_t(rows) * ldq, 1.0f);
  const int64_t ldo = int64_t(Hq) * D + 4;

  Dev<uint16_t> dpool(pool.bits), dk(k_new.bits), dv(v_new.bits), dq(qg.bits),
      dout(std::vector<uint16_t>(size_t(rows) * ldo));
  std::vector<uint16_t*> kp(total), vp(total);
  for (int i = 0; i < total; ++i) kp[i] = dpool.p + i * page_elems, vp[i] = kp[i] + w;
  Dev<uint16_t*> dkp(kp), dvp(vp);
  Dev<int32_t> dtable(table), dcu(cu_rows), dpos(pos), drow_seq(row_seq), drow_pos(row_pos);
  ops::cuda::PagedKv kv;
  kv.k_pages = dkp.p, kv.v_pages = dvp.p, kv.page_table = dtable.p, kv.max_pages = max_pages, kv.page_size = ps;
  kv.row_stride = row_stride;

  ops::cuda::KvAppendRowsArgs ap;
  ap.rows = rows, ap.width = int(w), ap.k = dk.p, ap.v = dv.p, ap.ldk = w + 2, ap.ldv = w + 3;
  ap.seq = drow_seq.p, ap.pos = drow_pos.p, ap.kv = kv;
  ASSERT_EQ(ops::cuda::kv_append_rows_cuda(ap, nullptr), cudaSuccess);

  ops::cuda::AttentionPrefillArgs a;
  a.batch = B, a.Hq = Hq, a.Hkv = Hkv, a.D = D, a.scale = 1.0f / std::sqrt(float(D));
  a.q = dq.p, a.ldq = ldq, a.q_head_stride = qhs;
  if (s.gate) a.gate = dq.p + D, a.ldg = ldq, a.g_head_stride = qhs;
  a.out = dout.p, a.ldo = ldo, a.kv = kv, a.cu_rows = dcu.p, a.pos = dpos.p, a.max_rows = max_rows;
  ASSERT_EQ(ops::cuda::attention_prefill_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> got = dout.get();

  // The CPU side: the same pool with the new rows written in, read through KvView.
  std::vector<float> fpool = pool.f;
  for (int i = 0; i < rows; ++i) {
    const int b = row_seq[i], p = row_pos[i];
    float* row = fpool.data() + table[size_t(b) * max_pages + p / ps] * page_elems + (p % ps) * row_stride;
    for (int64_t x = 0; x < w; ++x) row[x] = k_new.f[i * (w + 2) + x], row[w + x] = v_new.f[i * (w + 3) + x];
  }
  EXPECT_TRUE(test::bf16_close(dpool.get(), fpool, 0.0f)) << "pages after the append";

  std::vector<float> q(size_t(max_rows) * Hq * D), want(size_t(rows) * ldo, 0.0f);
  const ops::AttentionParams p{Hq, Hkv, D, a.scale};
  for (int b = 0; b < B; ++b) {
    std::vector<const float*> kpf(n_pages[b]), vpf(n_pages[b]);
    for (int i = 0; i < n_pages[b]; ++i)
      kpf[i] = fpool.data() + table[size_t(b) * max_pages + i] * page_elems, vpf[i] = kpf[i] + w;
    const ops::KvView view{kpf.data(), vpf.data(), ps, row_stride};
    const float* qb = qg.f.data() + cu_rows[b] * ldq;
    for (int t = 0; t < s.T[b]; ++t)
      for (int h = 0; h < Hq; ++h)
        for (int d = 0; d < D; ++d) q[(size_t(t) * Hq + h) * D + d] = qb[t * ldq + h * qhs + d];
    float* o = want.data() + cu_rows[b] * ldo;
    ops::cpu::attention(p, q.data(), int64_t(Hq) * D, s.pos[b], s.T[b], view, o, ldo);
    if (s.gate)
      for (int t = 0; t < s.T[b]; ++t)
        for (int h = 0; h < Hq; ++h)
          for (int d = 0; d < D; ++d) o[t * ldo + h * D + d] *= ops::sigmoid(qb[t * ldq + h * qhs + D + d]);
  }
  EXPECT_TRUE(test::bf16_close(got, want));

  // One row per sequence is a decode step: attention_decode_cuda (its
  // default context splits) must agree.
  if (std::all_of(s.T.begin(), s.T.end(), [](int t) { return t == 1; })) {
    std::vector<int32_t> seq_len(B);
    for (int b = 0; b < B; ++b) seq_len[b] = s.pos[b] + 1;
    const int max_len = *std::max_element(seq_len.begin(), seq_len.end());
    Dev<int32_t> dlen(seq_len);
    Dev<float> dscratch(std::vector<float>(size_t(ops::cuda::attention_decode_scratch_floats(B, Hq, Hkv, D, max_len)), NAN));
    Dev<uint16_t> ddec(std::vector<uint16_t>(size_t(rows) * ldo));
    ops::cuda::AttentionDecodeArgs da;
    da.batch = B, da.Hq = Hq, da.Hkv = Hkv, da.D = D, da.scale = a.scale;
    da.q = a.q, da.ldq = a.ldq, da.q_head_stride = a.q_head_stride;
    da.gate = a.gate, da.ldg = a.ldg, da.g_head_stride = a.g_head_stride;
    da.out = ddec.p, da.ldo = ldo, da.kv = kv, da.seq_len = dlen.p, da.max_seq_len = max_len, da.scratch = dscratch.p;
    ASSERT_EQ(ops::cuda::attention_decode_cuda(da, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got_f(got.size());
    for (size_t i = 0; i < got.size(); ++i) got_f[i] = bf16_to_f32(got[i]);
    EXPECT_TRUE(test::bf16_close(ddec.get(), got_f)) << "attention_decode_cuda against the prefill output";
  }
}

const auto kShapes = ::testing::Values(
    Shape{6, 2, 40, 5, {1, 7, 23}, {0, 4, 30}, false},          // odd: rep 3, D not a multiple of 16
    Shape{3, 3, 16, 4, {9, 2}, {0, 13}, true},                  // no sharing (rep 1), tiny head, gated
    Shape{8, 1, 100, 7, {50, 3, 71}, {17, 0, 64}, false},       // rep 8, odd D (no 16-byte loads)
    Shape{8, 4, 64, 16, {8, 8, 8}, {100, 2500, 0}, true},       // verify of 8 drafts, rep 2, gated
    Shape{32, 8, 128, 16, {1, 300, 5}, {999, 0, 2100}, false},  // Nemotron-H-8B: a chunk, a long context
    Shape{24, 4, 256, 16, {130, 8}, {2000, 513}, true},         // Qwen3.5-27B, gated, long context
    Shape{16, 2, 256, 32, {33, 200}, {1990, 40}, false},        // rep 8, D 256
    Shape{4, 2, 64, 64, {2100}, {0}, false},                    // a whole 2100-row prompt
    Shape{16, 2, 128, 16, {1, 1, 1, 1}, {0, 63, 64, 2047}, false},  // T = 1: decode
    Shape{24, 4, 256, 16, {1, 1}, {5, 3000}, true},                 // T = 1, Qwen3.5 sizes
    Shape{32, 2, 128, 16, {1, 40, 1}, {700, 3, 0}, false},          // rep 16 (Nemotron 3 Nano), decode rows too
    Shape{48, 1, 40, 5, {9, 1}, {0, 21}, true});                    // rep 48, odd D, gated
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionPrefillCuda, kShapes);

// Runs without a GPU: every refusal comes before the device is touched.
TEST(AttentionPrefillCudaArgs, BadShapesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(16);  // never dereferenced: refused first
  uint16_t* const* pp = reinterpret_cast<uint16_t* const*>(16);
  const int32_t* i = reinterpret_cast<const int32_t*>(16);
  ops::cuda::PagedKv kv;
  kv.k_pages = pp, kv.v_pages = pp, kv.page_table = i, kv.max_pages = 4, kv.page_size = 16, kv.row_stride = 256;
  ops::cuda::AttentionPrefillArgs a;
  a.batch = 2, a.Hq = 8, a.Hkv = 2, a.D = 64, a.scale = 0.125f, a.q = p, a.ldq = 512, a.q_head_stride = 64;
  a.out = p, a.ldo = 512, a.kv = kv, a.cu_rows = i, a.pos = i, a.max_rows = 64;
  using ops::cuda::attention_prefill_cuda;
  auto refused = [&](ops::cuda::AttentionPrefillArgs b) {
    return attention_prefill_cuda(b, nullptr) == cudaErrorInvalidValue;
  };
  {
    auto b = a;
    b.Hq = 130, b.ldq = 130 * 64, b.ldo = 130 * 64;  // 65 query heads per KV head > kAttnPrefillMaxRep
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.Hq = 7;  // not a multiple of Hkv
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.D = 300, b.q_head_stride = 300, b.ldq = 8 * 300, b.ldo = 8 * 300;  // D > 256
    b.kv.row_stride = 600;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.D = 0;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.kv.row_stride = 127;  // < Hkv·D
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.ldq = 511;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.ldo = 511;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.gate = p, b.ldg = 512, b.g_head_stride = 32;  // gate head stride < D
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.cu_rows = nullptr;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.pos = nullptr;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.max_rows = -1;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.max_rows = 2000000;  // 2e6·4 query-head rows: more 64-row tiles than a grid holds
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.batch = 70000;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.kv.page_table = nullptr;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.scale = INFINITY;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.batch = 0;  // nothing to do
    EXPECT_EQ(attention_prefill_cuda(b, nullptr), cudaSuccess);
  }
  {
    auto b = a;
    b.max_rows = 0;  // no new rows anywhere
    EXPECT_EQ(attention_prefill_cuda(b, nullptr), cudaSuccess);
  }

  ops::cuda::KvAppendRowsArgs ap;
  ap.rows = 3, ap.width = 128, ap.k = p, ap.v = p, ap.ldk = 128, ap.ldv = 128, ap.seq = i, ap.pos = i, ap.kv = kv;
  using ops::cuda::kv_append_rows_cuda;
  {
    auto b = ap;
    b.ldv = 100;
    EXPECT_EQ(kv_append_rows_cuda(b, nullptr), cudaErrorInvalidValue);
  }
  {
    auto b = ap;
    b.width = 300;  // wider than a row
    EXPECT_EQ(kv_append_rows_cuda(b, nullptr), cudaErrorInvalidValue);
  }
  {
    auto b = ap;
    b.seq = nullptr;
    EXPECT_EQ(kv_append_rows_cuda(b, nullptr), cudaErrorInvalidValue);
  }
  {
    auto b = ap;
    b.rows = -1;
    EXPECT_EQ(kv_append_rows_cuda(b, nullptr), cudaErrorInvalidValue);
  }
  {
    auto b = ap;
    b.rows = 0;
    EXPECT_EQ(kv_append_rows_cuda(b, nullptr), cudaSuccess);
  }
}

}  // namespace
}  // namespace replayssm
