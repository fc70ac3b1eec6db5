// CUDA paged attention decode (ops/cuda/attention_decode.h) against the CPU
// reference (ops/cpu/attention.h, T = 1) plus forward.cpp's output gate.
// Pages are laid out as the store lays them ([K | V] per row, here with
// padding), shuffled in the pool, and the new token's row is written by
// kv_append_cuda (checked bit for bit) before attention reads it. Lengths
// of one row, page boundaries and long contexts; GQA ratios 1, 2, 3, 4, 6,
// 8; each shape with one split, the default splits, small splits (many
// partials to combine), and the default splits under a bound 8 times the
// longest context (a server's max_context: each sequence's rows a split
// from its own length, most of the grid's splits empty), and by each of
// the kernels that takes it: by
// elements (any D: D = 100, D = 64 with an odd row stride), by 16-byte
// loads where D and the row stride are multiples of 8 (groups of 1–32
// lanes a row, lanes past D/8 idle at D = 40; GQA bounds 1, 2, 4, 8), on
// tensor cores where D is 32, 64, 96, 128 or 256 (pages of 7 rows: chunks
// across pages). Real sizes: Nemotron-H-8B (32 heads / 8 KV × 128) and
// Qwen3.5-27B (24 / 4 × 256, gated). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/attention.h"
#include "ops/cuda/attention_decode.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;

struct Shape {
  int Hq, Hkv, D, page_size;
  std::vector<int> len;  // per sequence, the new row included
  bool gate;
  int pad = 8;  // row stride − 2·Hkv·D
  // On tensor cores with one split, the launcher's blocks of 4 warps
  // (attention_decode_mma_warps, checked on the device at hand).
  bool four_warps = false;
};
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "Hq" << s.Hq << "_Hkv" << s.Hkv << "_D" << s.D << "_page" << s.page_size << "_len";
  if (s.len.size() > 24) {  // many sequences: their count and range
    const auto [lo, hi] = std::minmax_element(s.len.begin(), s.len.end());
    *os << "_" << s.len.size() << "_of_" << *lo << "_to_" << *hi;
  } else {
    for (int l : s.len) *os << "_" << l;
  }
  if (s.gate) *os << "_gated";
  if (s.pad != 8) *os << "_pad" << s.pad;
  if (s.four_warps) *os << "_four_warps";
}
// Splits: 0 none (no scratch), 1 the default split, 2 splits of 24 rows,
// 3 the default split with max_seq_len 8 times the longest context;
// then the kernel (AttentionDecodeArgs::variant: 1 by elements, 2 by
// 16-byte rows, 3 on tensor cores).
void PrintTo(const std::tuple<Shape, int, int>& p, std::ostream* os) {
  PrintTo(std::get<0>(p), os);
  const int s = std::get<1>(p), v = std::get<2>(p);
  *os << (s == 0 ? "_one_split" : s == 1 ? "_default_splits" : s == 2 ? "_splits24" : "_bound8x");
  *os << (v == 1 ? "_by_elements" : v == 2 ? "_by_rows" : "_tensor_cores");
}

class AttentionDecodeCuda : public ::testing::TestWithParam<std::tuple<Shape, int, int>> {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(AttentionDecodeCuda, MatchesCpuOverShuffledPages) {
  const Shape s = std::get<0>(GetParam());
  const int split_mode = std::get<1>(GetParam());
  const int B = int(s.len.size()), Hq = s.Hq, Hkv = s.Hkv, D = s.D, ps = s.page_size;
  const int64_t w = int64_t(Hkv) * D, row_stride = 2 * w + s.pad, page_elems = ps * row_stride;
  std::mt19937 g(61 + D + B);

  // Pages: a shuffled pool with spare pages; the table lists each sequence's pages in order.
  std::vector<int> n_pages(B);
  int max_pages = 1, total = 3;
  for (int b = 0; b < B; ++b) n_pages[b] = (s.len[b] + ps - 1) / ps, max_pages = std::max(max_pages, n_pages[b]),
                              total += n_pages[b];
  std::vector<int32_t> perm(total);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g);
  std::vector<int32_t> table(size_t(B) * max_pages, 0), seq_len(s.len.begin(), s.len.end()), pos(B);
  for (int b = 0, next = 0; b < B; ++b) {
    for (int i = 0; i < n_pages[b]; ++i) table[size_t(b) * max_pages + i] = perm[next++];
    pos[b] = s.len[b] - 1;
  }
  // The pool: every row random (bf16-exact); the new rows come separately.
  Bf pool = test::bf_rand(g, size_t(total) * page_elems, 1.0f);
  const Bf k_new = test::bf_rand(g, size_t(B) * (w + 2), 1.0f), v_new = test::bf_rand(g, size_t(B) * (w + 3), 1.0f);
  // q (and gate): [query | gate] per head when gated, as Qwen3.5's q_proj rows.
  const int64_t qhs = s.gate ? 2 * D : D, ldq = Hq * qhs;
  const Bf qg = test::bf_rand(g, size_t(B) * ldq, 1.0f);
  const int64_t ldo = int64_t(Hq) * D + 4;

  Dev<uint16_t> dpool(pool.bits), dk(k_new.bits), dv(v_new.bits), dq(qg.bits),
      dout(std::vector<uint16_t>(size_t(B) * ldo));
  std::vector<uint16_t*> kp(total), vp(total);
  for (int i = 0; i < total; ++i) kp[i] = dpool.p + i * page_elems, vp[i] = kp[i] + w;
  Dev<uint16_t*> dkp(kp), dvp(vp);
  Dev<int32_t> dtable(table), dlen(seq_len), dpos(pos);
  ops::cuda::PagedKv kv;
  kv.k_pages = dkp.p, kv.v_pages = dvp.p, kv.page_table = dtable.p, kv.max_pages = max_pages, kv.page_size = ps;
  kv.row_stride = row_stride;

  ops::cuda::KvAppendArgs ap;
  ap.batch = B, ap.width = int(w), ap.k = dk.p, ap.v = dv.p, ap.ldk = w + 2, ap.ldv = w + 3, ap.pos = dpos.p, ap.kv = kv;
  ASSERT_EQ(ops::cuda::kv_append_cuda(ap, nullptr), cudaSuccess);

  const int max_len = *std::max_element(s.len.begin(), s.len.end()), bound = split_mode == 3 ? 8 * max_len : max_len;
  ops::cuda::AttentionDecodeArgs a;
  a.batch = B, a.Hq = Hq, a.Hkv = Hkv, a.D = D, a.scale = 1.0f / std::sqrt(float(D));
  a.q = dq.p, a.ldq = ldq, a.q_head_stride = qhs;
  if (s.gate) a.gate = dq.p + D, a.ldg = ldq, a.g_head_stride = qhs;
  a.out = dout.p, a.ldo = ldo, a.kv = kv, a.seq_len = dlen.p, a.max_seq_len = bound;
  a.split_rows = split_mode == 2 ? 24 : 0;
  a.variant = std::get<2>(GetParam());
  std::vector<float> scratch_init;
  if (split_mode != 0)
    scratch_init.assign(size_t(ops::cuda::attention_decode_scratch_floats(B, Hq, Hkv, D, bound, a.split_rows)), NAN);
  Dev<float> dscratch(scratch_init);
  if (split_mode != 0) a.scratch = dscratch.p;
  if (s.four_warps && a.variant == 3 && split_mode <= 1) {  // the shape still reaches the 4-warp kernels
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    const int n_splits = split_mode == 0 ? 1 : ops::cuda::attention_decode_splits(B, Hkv, max_len, 0);
    ASSERT_EQ(n_splits, 1);
    EXPECT_EQ(ops::cuda::attention_decode_mma_warps(D, int64_t(Hkv) * B, max_len, sms), 4);
  }
  ASSERT_EQ(ops::cuda::attention_decode_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  // The CPU side: the same pool with the new rows written in, read through KvView.
  std::vector<float> fpool = pool.f;
  for (int b = 0; b < B; ++b) {
    float* row = fpool.data() + table[size_t(b) * max_pages + pos[b] / ps] * page_elems + (pos[b] % ps) * row_stride;
    for (int64_t i = 0; i < w; ++i) row[i] = k_new.f[b * (w + 2) + i], row[w + i] = v_new.f[b * (w + 3) + i];
  }
  std::vector<uint16_t> pool_after = dpool.get();
  EXPECT_TRUE(test::bf16_close(pool_after, fpool, 0.0f)) << "pages after the append";

  std::vector<float> q(size_t(Hq) * D), want(size_t(B) * ldo, 0.0f);
  const ops::AttentionParams p{Hq, Hkv, D, 1.0f / std::sqrt(float(D))};
  for (int b = 0; b < B; ++b) {
    std::vector<const float*> kpf(n_pages[b]), vpf(n_pages[b]);
    for (int i = 0; i < n_pages[b]; ++i)
      kpf[i] = fpool.data() + table[size_t(b) * max_pages + i] * page_elems, vpf[i] = kpf[i] + w;
    const ops::KvView view{kpf.data(), vpf.data(), ps, row_stride};
    for (int h = 0; h < Hq; ++h)
      for (int d = 0; d < D; ++d) q[h * D + d] = qg.f[b * ldq + h * qhs + d];
    float* o = want.data() + b * ldo;
    ops::cpu::attention(p, q.data(), int64_t(Hq) * D, pos[b], 1, view, o, ldo);
    if (s.gate)
      for (int h = 0; h < Hq; ++h)
        for (int d = 0; d < D; ++d) o[h * D + d] *= ops::sigmoid(qg.f[b * ldq + h * qhs + D + d]);
  }
  EXPECT_TRUE(test::bf16_close(dout.get(), want));
}

// 24 sequences about page and pass boundaries (a pass of the 16-byte path
// is 32 rows at D = 128).
const std::vector<int> kManyLengths = {1,  2,  3,  4,   5,   8,   9,   15,  16,  17,  31,  33,
                                       63, 64, 65, 100, 127, 128, 129, 191, 200, 255, 256, 257};
// 200 sequences of 256–319 rows: 1,600 blocks of one split each, past
// six a SM on any device of ≤ 266 SMs — the tensor-core kernel's 4-warp
// blocks.
std::vector<int> many_long_lengths() {
  std::vector<int> v(200);
  for (int i = 0; i < 200; ++i) v[i] = 256 + (i * 37) % 64;
  return v;
}
const std::vector<Shape> kShapes = {
    Shape{6, 2, 40, 5, {1, 5, 23}, false},                        // odd: one row, a full page, a partial page
    Shape{3, 3, 16, 4, {9, 2}, true},                             // no sharing (rep 1), tiny Qwen3.5 head, gated
    Shape{8, 1, 100, 7, {50, 3, 71}, false},                      // rep 8, odd D
    Shape{32, 8, 128, 16, {1, 300, 1000}, false},                 // Nemotron-H-8B
    Shape{24, 4, 256, 16, {513, 2048}, true},                     // Qwen3.5-27B, gated
    Shape{32, 8, 128, 64, {5000}, false},                         // one long context
    Shape{4, 2, 64, 3, {7, 130, 64}, false},                      // rep 2, 8 lanes a row
    Shape{4, 2, 64, 3, {7, 130, 64}, false, 3},                   // an odd row stride: by elements
    Shape{32, 8, 128, 64, kManyLengths, false},                   // many sequences, the 8B model's heads
    Shape{12, 2, 96, 7, {1, 40, 77}, true},                       // tensor cores: rep 6, D 96, chunks across pages
    Shape{8, 4, 32, 16, {17, 33, 2}, false},                      // D 32: half the lanes' V dims past D
    Shape{16, 2, 128, 64, {260, 31}, false},                      // rep 8: every row of A's top half
    Shape{4, 4, 64, 16, {20, 1}, true},                           // rep 1, gated
    Shape{16, 2, 256, 16, {40, 100}, false},                      // rep 8 at D 256: the widest rows, every head of A
    Shape{32, 8, 128, 64, many_long_lengths(), false, 8, true}};  // 4 warps a block
// The default split (host arithmetic, no GPU): few heads get short splits
// so the blocks reach kAttnTargetBlocks; many heads keep whole contexts up
// to kAttnMaxSplitRows; an explicit split_rows is kept.
TEST(AttentionDecodeSplits, ShortSplitsWhenHeadsAreFew) {
  using ops::cuda::attention_decode_split_rows, ops::cuda::attention_decode_splits;
  EXPECT_EQ(attention_decode_split_rows(1, 8, 256, 0), 64);  // Nemotron-H-8B at batch 1: 4 splits, not 16 of 16
  EXPECT_EQ(attention_decode_splits(1, 8, 256, 0), 4);
  EXPECT_EQ(attention_decode_split_rows(1, 8, 8192, 0), 128);  // 64 splits
  EXPECT_EQ(attention_decode_splits(1, 8, 8192, 0), 64);
  EXPECT_EQ(attention_decode_split_rows(8, 8, 1024, 0), 128);
  EXPECT_EQ(attention_decode_splits(8, 8, 1024, 0), 8);
  EXPECT_EQ(attention_decode_splits(64, 8, 256, 0), 1);
  EXPECT_EQ(attention_decode_split_rows(1, 8, 100000, 0), ops::cuda::kAttnMaxSplitRows);
  EXPECT_EQ(attention_decode_split_rows(1, 1, 5, 0), ops::cuda::kAttnMinSplitRows);
  EXPECT_EQ(attention_decode_splits(1, 1, 5, 0), 1);
  EXPECT_EQ(attention_decode_split_rows(1, 8, 256, 24), 24);
  EXPECT_EQ(attention_decode_splits(1, 8, 256, 24), 11);
}

// A sequence's own rows a split (host arithmetic, as the kernels compute
// it): from its length and the splits a sequence aims for, not the bound's.
TEST(AttentionDecodeSplits, EachSequenceSplitsItsOwnLength) {
  using ops::cuda::attention_decode_split_want, ops::cuda::attention_split_rows_for;
  EXPECT_EQ(attention_decode_split_want(1, 8), 64);  // 512 blocks over 8 heads
  EXPECT_EQ(attention_decode_split_want(64, 8), 1);
  EXPECT_EQ(attention_decode_split_want(3, 5), 35);
  // Batch 1 at 8B under a 32,768-row bound: 512-row splits (64 of them) for
  // the bound, 64-row ones for 200 rows (4 splits) and for 4,096 (64), then
  // steps of 16.
  EXPECT_EQ(ops::cuda::attention_decode_splits(1, 8, 32768, 0), 64);
  EXPECT_EQ(attention_split_rows_for(200, 64), ops::cuda::kAttnMinSplitRows);
  EXPECT_EQ(attention_split_rows_for(4096, 64), 64);
  EXPECT_EQ(attention_split_rows_for(4097, 64), 80);
  EXPECT_EQ(attention_split_rows_for(1, 1), ops::cuda::kAttnMinSplitRows);
  EXPECT_EQ(attention_split_rows_for(1 << 20, 1), ops::cuda::kAttnMaxSplitRows);
}

// The launch's plan (host arithmetic, as the kernels compute it): under any
// bound every sequence's splits fit the grid's, so the last split is never
// longer than the others, and a block leaves early only where its split is
// empty — the bound's rows round up, and at a bound of
// 4,097 a sequence aiming for the target's 64 splits would have left 832
// rows to the last of 52.
TEST(AttentionDecodeSplits, EverySequenceFitsTheGridsSplits) {
  using ops::cuda::attention_decode_plan, ops::cuda::attention_split_rows_of;
  for (int batch : {1, 3, 8, 64})
    for (int Hkv : {1, 4, 8})
      for (int bound = 1; bound <= 40000; bound += bound < 300 ? 1 : bound < 9000 ? 37 : 997) {
        const ops::cuda::AttentionSplits s = attention_decode_plan(batch, Hkv, bound, 0);
        for (int L = 1; L <= bound; L += L < 300 ? 1 : 61) {
          const int rows = attention_split_rows_of(s, L);
          ASSERT_GE(rows, ops::cuda::kAttnMinSplitRows);
          ASSERT_LE(int64_t(s.n) * rows, int64_t(bound) + rows) << "batch " << batch << " Hkv " << Hkv;
          ASSERT_LE((L - 1) / rows + 1, s.n) << "batch " << batch << " Hkv " << Hkv << " bound " << bound << " L " << L;
          // The kernels' early exit: only splits without rows, and from
          // split `want` on every such split.
          for (int sp = 0; sp < s.n; ++sp) {
            const bool empty = int64_t(sp) * rows >= L;
            if (ops::cuda::attention_split_past_end(s, sp, L))
              ASSERT_TRUE(empty) << "bound " << bound << " L " << L << " sp " << sp;
            if (sp >= s.want)
              ASSERT_EQ(ops::cuda::attention_split_past_end(s, sp, L), empty) << "bound " << bound << " L " << L;
          }
        }
      }
  const ops::cuda::AttentionSplits s = attention_decode_plan(1, 8, 4097, 0);
  EXPECT_EQ(s.n, 52);
  EXPECT_EQ(attention_split_rows_of(s, 4096), 80);  // 52 splits of 80, not 64 of 64 in 52
  EXPECT_EQ(attention_split_rows_of(attention_decode_plan(1, 8, 4097, 24), 100), 24);  // fixed rows kept
}

// Which rows go by 16-byte loads (host arithmetic): the shapes above take
// both ways.
TEST(AttentionDecodeSplits, SixteenByteRowsWhereDimsAndStrideAlign) {
  using ops::cuda::attention_decode_vec_ok;
  EXPECT_TRUE(attention_decode_vec_ok(128, 2 * 8 * 128));  // the backend's rows, K beside V
  EXPECT_TRUE(attention_decode_vec_ok(40, 2 * 2 * 40 + 8));
  EXPECT_FALSE(attention_decode_vec_ok(100, 2 * 100 + 8));
  EXPECT_FALSE(attention_decode_vec_ok(64, 2 * 2 * 64 + 3));
}

// Which rows go on tensor cores (host arithmetic): D of 32, 64, 96, 128, 256.
TEST(AttentionDecodeSplits, TensorCoresWhereDimsAreWholeGroupsOf32) {
  using ops::cuda::attention_decode_mma_ok;
  EXPECT_TRUE(attention_decode_mma_ok(128, 2 * 8 * 128));
  EXPECT_TRUE(attention_decode_mma_ok(96, 2 * 2 * 96 + 8));
  EXPECT_TRUE(attention_decode_mma_ok(32, 2 * 4 * 32));
  EXPECT_TRUE(attention_decode_mma_ok(256, 2 * 4 * 256));  // Qwen3.5
  EXPECT_FALSE(attention_decode_mma_ok(160, 2 * 160));
  EXPECT_FALSE(attention_decode_mma_ok(40, 2 * 2 * 40 + 8));
  EXPECT_FALSE(attention_decode_mma_ok(64, 2 * 2 * 64 + 3));
}

// The tensor-core kernel's block (host arithmetic): 4 warps only for two
// waves of blocks with ≥ 256 rows each, at D ≤ 128.
TEST(AttentionDecodeSplits, FourWarpsOnlyForLongBlocksInSeveralWaves) {
  using ops::cuda::attention_decode_mma_warps;
  EXPECT_EQ(attention_decode_mma_warps(128, 8 * 256 * 2, 512, 132), 4);  // 8B, batch 256, 1,024 rows
  EXPECT_EQ(attention_decode_mma_warps(128, 8 * 8 * 8, 512, 132), 2);    // batch 8: under two waves
  EXPECT_EQ(attention_decode_mma_warps(128, 8 * 256, 129, 132), 2);      // short contexts
  EXPECT_EQ(attention_decode_mma_warps(256, 4 * 256 * 8, 512, 132), 2);  // D 256: registers
}

// Every shape by each kernel that takes it, with each way of splitting.
std::vector<std::tuple<Shape, int, int>> shape_cases() {
  std::vector<std::tuple<Shape, int, int>> v;
  for (const Shape& s : kShapes)
    for (int split = 0; split < 4; ++split) {
      const int64_t stride = 2 * int64_t(s.Hkv) * s.D + s.pad;
      v.emplace_back(s, split, 1);
      if (ops::cuda::attention_decode_vec_ok(s.D, stride)) v.emplace_back(s, split, 2);
      if (ops::cuda::attention_decode_mma_ok(s.D, stride)) v.emplace_back(s, split, 3);
    }
  return v;
}
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionDecodeCuda, ::testing::ValuesIn(shape_cases()));

// Runs without a GPU: every refusal comes before the device is touched.
TEST(AttentionDecodeCudaArgs, BadShapesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(16);  // never dereferenced: refused first
  uint16_t* const* pp = reinterpret_cast<uint16_t* const*>(16);
  const int32_t* i = reinterpret_cast<const int32_t*>(16);
  float* f = reinterpret_cast<float*>(16);
  ops::cuda::PagedKv kv;
  kv.k_pages = pp, kv.v_pages = pp, kv.page_table = i, kv.max_pages = 4, kv.page_size = 16, kv.row_stride = 256;
  ops::cuda::AttentionDecodeArgs a;
  a.batch = 2, a.Hq = 8, a.Hkv = 2, a.D = 64, a.scale = 0.125f, a.q = p, a.ldq = 512, a.q_head_stride = 64;
  a.out = p, a.ldo = 512, a.kv = kv, a.seq_len = i, a.max_seq_len = 64;
  using ops::cuda::attention_decode_cuda;
  auto refused = [&](ops::cuda::AttentionDecodeArgs b) { return attention_decode_cuda(b, nullptr) == cudaErrorInvalidValue; };
  {
    auto b = a;
    b.Hq = 36, b.Hkv = 2, b.ldq = 36 * 64, b.ldo = 36 * 64;  // 18 query heads per KV head > 8
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
    b.gate = p, b.ldg = 512, b.g_head_stride = 32;  // gate head stride < D
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.scratch = f, b.max_seq_len = 0;  // splits need the bound
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.seq_len = nullptr;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.kv.page_size = 0;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.scale = NAN;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.kv.row_stride = 257;  // by elements only
    b.variant = 2;
    EXPECT_TRUE(refused(b));
    b.variant = 3;
    EXPECT_TRUE(refused(b));
    b.variant = 1;
    b.batch = 0;
    EXPECT_EQ(attention_decode_cuda(b, nullptr), cudaSuccess);
  }
  {
    auto b = a;
    b.D = 40, b.q_head_stride = 40, b.ldq = 8 * 40, b.ldo = 8 * 40;  // by rows, not on tensor cores
    b.variant = 3;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.variant = ops::cuda::kAttnDecodeVariants;
    EXPECT_TRUE(refused(b));
    b.variant = -1;
    EXPECT_TRUE(refused(b));
  }
  {
    auto b = a;
    b.batch = 0;  // nothing to do
    EXPECT_EQ(attention_decode_cuda(b, nullptr), cudaSuccess);
  }
  ops::cuda::KvAppendArgs ap;
  ap.batch = 2, ap.width = 128, ap.k = p, ap.v = p, ap.ldk = 128, ap.ldv = 128, ap.pos = i, ap.kv = kv;
  ap.ldv = 100;
  EXPECT_EQ(ops::cuda::kv_append_cuda(ap, nullptr), cudaErrorInvalidValue);
  ap.ldv = 128, ap.width = 300;  // wider than a row
  EXPECT_EQ(ops::cuda::kv_append_cuda(ap, nullptr), cudaErrorInvalidValue);
  ap.width = 128, ap.pos = nullptr;
  EXPECT_EQ(ops::cuda::kv_append_cuda(ap, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace replayssm
