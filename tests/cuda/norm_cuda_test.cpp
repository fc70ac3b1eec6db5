// CUDA RMS norms (ops/cuda/norm.h) against the CPU reference
// (ops/cpu/norm.h): odd sizes on every reduction path (a warp per group up
// to 512 elements, a block beyond: 1024 threads when the groups are few,
// 256 from 256 groups; values held in registers, or the two-pass loop
// beyond 8192), strided and in-place rows, and the real
// sizes of Nemotron-H-8B (hidden 4096, Mamba2 norm over 8192 in 8 groups)
// and Qwen3.5-27B (hidden 5120 with (1 + w), q/k norms of 256 inside the
// [query | gate] rows, GDN output norm 48 heads × 128). Rows on 16 bytes
// take the 16-byte pieces (32–256 threads a group, up to 4 pieces a
// thread: a warp a group of up to 1024 only where the groups are
// thousands; the residual stream only at ≥ 256 groups), each case
// asserting the rule (norm_pieces_threads: 0 for the element kernels) and
// that the call took the pieces exactly where the rule and its strides
// allow (norm_pieces_launches). Skipped without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/norm.h"
#include "ops/cuda/norm.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;

// Runs one norm call and checks whether it took the 16-byte pieces.
template <typename Call>
void expect_pieces(bool want, Call&& call) {
  const int64_t before = ops::cuda::norm_pieces_launches();
  call();
  EXPECT_EQ(ops::cuda::norm_pieces_launches() - before, want ? 1 : 0)
      << (want ? "pieces expected" : "elements expected");
}

class NormCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// Weights near 1 (or near 0 for the (1 + w) convention).
std::vector<float> norm_weight(std::mt19937& g, size_t n, bool unit_offset) {
  std::vector<float> w = test::uniform(g, n, -0.2f, 0.2f);
  if (!unit_offset)
    for (float& v : w) v += 1.0f;
  return w;
}

struct Plain {
  int64_t rows, dim, ldx, ldy;
  bool unit_offset, in_place;
  int pieces_threads;  // norm_pieces_threads: the pieces' group, where every stride and pointer is on 16 bytes
};

TEST_F(NormCuda, RmsNormMatchesCpu) {
  const Plain cases[] = {
      {3, 37, 37, 40, false, false, 0},          // odd, strided output, warp path
      {5, 700, 703, 700, true, false, 0},        // odd, block path, (1 + w)
      {4, 4096, 4096, 4097, false, false, 256},  // Nemotron-H-8B hidden; an odd output stride: elements
      {3, 5120, 5120, 5121, true, false, 256},   // Qwen3.5-27B hidden; an odd output stride: elements
      {3 * 24, 256, 512, 512, true, true, 32},   // Qwen3.5-27B q norm: 24 heads of 256 in [query | gate] rows, in place
      {300, 4096, 4097, 4096, false, false, 256},  // batch 300, odd input stride: 256-thread blocks, 16 values held
      {260, 9000, 9001, 9000, true, false, 0},     // 256-thread blocks, too long to hold: the two-pass loop
      {2, 9000, 9000, 9003, false, false, 0},      // 1024-thread blocks, too long to hold: the two-pass loop
      // Rows on 16 bytes: pieces, a piece a thread by 32, 64, 128 (the last warp short) and 256 threads,
      // then 2 and 4 (short) by 256; 300 groups of 64 pieces by 64 threads; 2,048 by a warp, 2 a lane.
      {5, 128, 136, 128, false, false, 32},
      {3, 512, 512, 520, false, false, 64},
      {7, 1000, 1000, 1000, true, true, 128},
      {2, 2048, 2048, 2048, false, false, 256},
      {4, 4096, 4096, 4096, false, true, 256},
      {2, 8000, 8000, 8008, true, false, 256},
      {300, 512, 512, 512, true, false, 64},
      {2048, 512, 512, 512, false, false, 32},
      // Many groups past a piece a thread at 64 and 128 threads: 200 pieces by 64 (4 a thread, the last
      // short), 500 by 128.
      {1024, 1600, 1600, 1600, false, false, 64},
      {600, 4000, 4000, 4000, true, false, 128},
  };
  std::mt19937 g(11);
  for (const Plain& c : cases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " dim " << c.dim);
    EXPECT_EQ(ops::cuda::norm_pieces_threads(c.dim, c.rows, false), c.pieces_threads);
    const Bf x = test::bf_rand(g, size_t(c.rows) * c.ldx, 1.5f);
    const std::vector<float> w = norm_weight(g, c.dim, c.unit_offset);
    Dev<uint16_t> dx(x.bits), dy(std::vector<uint16_t>(size_t(c.rows) * c.ldy));
    Dev<float> dw(w);
    uint16_t* y = c.in_place ? dx.p : dy.p;
    expect_pieces(c.pieces_threads > 0 && c.ldx % 8 == 0 && c.ldy % 8 == 0, [&] {
      ASSERT_EQ(ops::cuda::rmsnorm_cuda(dx.p, c.ldx, c.rows, c.dim, dw.p, 1e-6f, c.unit_offset, y, c.ldy, nullptr),
                cudaSuccess);
    });
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // The reference over the same buffer: untouched columns keep their input (in place) or zero.
    std::vector<float> want = c.in_place ? x.f : std::vector<float>(size_t(c.rows) * c.ldy, 0.0f);
    ops::cpu::rmsnorm(x.f.data(), c.ldx, c.rows, c.dim, w.data(), 1e-6f, c.unit_offset, want.data(), c.ldy);
    EXPECT_TRUE(test::bf16_close(c.in_place ? dx.get() : dy.get(), want));
  }
}

TEST_F(NormCuda, ResidualRmsNormAddsThenNormalisesTheFp32Stream) {
  struct Case {
    int64_t rows, dim;
    bool add, unit_offset, aligned;
    int pieces_threads;  // norm_pieces_threads
  };
  // At ≥ 256 rows 256-thread blocks: 16 and 20 values a thread held (the 16
  // and 32 instances), then the two-pass loop; with rows on 16 bytes the
  // 16-byte pieces there (32–256 threads a group by norm_pieces_threads),
  // and the element kernels below 256 rows (the GEMV's fused norm keeps
  // their order).
  const Case cases[] = {
      {3, 37, true, false, false, 0},      {2, 600, false, true, false, 0},      {4, 4096, true, false, false, 0},
      {3, 5120, true, true, false, 0},     {256, 4096, true, false, false, 256}, {270, 5120, true, true, false, 256},
      {257, 8500, true, false, false, 0},  {4, 4096, true, false, true, 0},      {256, 4096, true, false, true, 256},
      {300, 5120, false, true, true, 256}, {260, 1000, true, false, true, 128},  {258, 8000, true, true, true, 256},
      {512, 4096, true, false, true, 128}};  // 128 threads, 4 pieces each (the write-back too)
  std::mt19937 g(12);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " dim " << c.dim << (c.aligned ? " aligned" : ""));
    EXPECT_EQ(ops::cuda::norm_pieces_threads(c.dim, c.rows, true), c.pieces_threads);
    const int64_t ldh = c.aligned ? c.dim : c.dim + 1, ldd = c.aligned ? c.dim + 8 : c.dim + 2, ldy = c.dim;
    std::vector<float> h = test::uniform(g, size_t(c.rows) * ldh, -3.0f, 3.0f);
    const Bf d = test::bf_rand(g, size_t(c.rows) * ldd, 0.5f);
    const std::vector<float> w = norm_weight(g, c.dim, c.unit_offset);
    Dev<float> dh(h), dw(w);
    Dev<uint16_t> dd(d.bits), dy(std::vector<uint16_t>(size_t(c.rows) * ldy));
    expect_pieces(c.pieces_threads > 0 && c.aligned, [&] {
      ASSERT_EQ(ops::cuda::residual_rmsnorm_cuda(dh.p, ldh, c.add ? dd.p : nullptr, ldd, c.rows, c.dim, dw.p, 1e-5f,
                                                 c.unit_offset, dy.p, ldy, nullptr),
                cudaSuccess);
    });
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (c.add)
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t i = 0; i < c.dim; ++i) h[r * ldh + i] += d.f[r * ldd + i];
    std::vector<float> want(size_t(c.rows) * ldy);
    ops::cpu::rmsnorm(h.data(), ldh, c.rows, c.dim, w.data(), 1e-5f, c.unit_offset, want.data(), ldy);
    EXPECT_TRUE(test::f32_close(dh.get(), h, 1e-6f)) << "the stream after the add";
    EXPECT_TRUE(test::bf16_close(dy.get(), want));
  }
}

TEST_F(NormCuda, GatedGroupNormGatesBeforeTheNorm) {
  struct Case {
    int64_t rows, dim, group;
    bool aligned;
    int pieces_threads;  // norm_pieces_threads
  };
  // odd groups on the warp path; 3 groups of 700 on the block path; Nemotron-H-8B: 128·64 in 8 groups (320
  // groups: 256 threads each); with rows on 16 bytes the pieces: 8B's groups at batch 3 and 40 by 128
  // threads, at 256 by a warp, 4 a lane; groups of 600 (75 pieces) by 128 threads, and 2,048 of them by a
  // warp (3 a lane in the first lanes, 2 after); a group of 4096 by 256 threads.
  const Case cases[] = {{5, 60, 20, false, 0},       {3, 2100, 700, false, 0},     {3, 8192, 1024, false, 128},
                        {3, 8192, 1024, true, 128},  {40, 8192, 1024, false, 128}, {40, 8192, 1024, true, 128},
                        {256, 8192, 1024, true, 32}, {6, 4800, 600, true, 128},    {256, 4800, 600, true, 32},
                        {3, 8192, 4096, true, 256},  {128, 8192, 1024, true, 64}};  // 64 threads, 2 pieces each
  std::mt19937 g(13);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " dim " << c.dim << " group " << c.group
                                    << (c.aligned ? " aligned" : ""));
    EXPECT_EQ(ops::cuda::norm_pieces_threads(c.group, c.rows * (c.dim / c.group), false), c.pieces_threads);
    // z inside wider in_proj rows
    const int64_t ldx = c.aligned ? c.dim : c.dim + 3, ldz = c.aligned ? 2 * c.dim + 8 : 2 * c.dim + 1, ldy = c.dim;
    const Bf x = test::bf_rand(g, size_t(c.rows) * ldx, 1.0f), z = test::bf_rand(g, size_t(c.rows) * ldz, 2.0f);
    const std::vector<float> w = norm_weight(g, c.dim, false);
    Dev<uint16_t> dx(x.bits), dz(z.bits), dy(std::vector<uint16_t>(size_t(c.rows) * ldy));
    Dev<float> dw(w);
    expect_pieces(c.pieces_threads > 0 && c.aligned, [&] {
      ASSERT_EQ(ops::cuda::rmsnorm_gated_group_cuda(dx.p, ldx, dz.p, ldz, c.rows, c.dim, c.group, dw.p, 1e-5f, dy.p,
                                                    ldy, nullptr),
                cudaSuccess);
    });
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> want(size_t(c.rows) * ldy);
    ops::cpu::rmsnorm_gated_group(x.f.data(), ldx, z.f.data(), ldz, c.rows, c.dim, c.group, w.data(), 1e-5f,
                                  want.data(), ldy);
    EXPECT_TRUE(test::bf16_close(dy.get(), want));
  }
}

TEST_F(NormCuda, NormThenGatePerHeadWithSharedWeight) {
  struct Case {
    int64_t rows, heads, head_dim;
  };
  // tiny Qwen3.5 (10: elements), 600 (75 pieces by 128 threads), Qwen3.5-27B (16 pieces: half a warp), 64
  // (8 pieces) — all but the first in 16-byte pieces.
  struct CaseWant {
    Case c;
    int pieces_threads;
  };
  const CaseWant cases[] = {{{3, 6, 10}, 0}, {{2, 3, 600}, 128}, {{3, 48, 128}, 32}, {{5, 32, 64}, 32}};
  std::mt19937 g(14);
  for (const auto& [c, pieces_threads] : cases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " heads " << c.heads << " head_dim " << c.head_dim);
    EXPECT_EQ(ops::cuda::norm_pieces_threads(c.head_dim, c.rows * c.heads, false), pieces_threads);
    const int64_t width = c.heads * c.head_dim, ld = width;
    const Bf x = test::bf_rand(g, size_t(c.rows) * ld, 1.0f), z = test::bf_rand(g, size_t(c.rows) * ld, 2.0f);
    const std::vector<float> w = norm_weight(g, c.head_dim, false);
    Dev<uint16_t> dx(x.bits), dz(z.bits);
    Dev<float> dw(w);
    // In place, as forward.cpp calls it.
    expect_pieces(pieces_threads > 0, [&] {
      ASSERT_EQ(ops::cuda::rmsnorm_then_gate_cuda(dx.p, ld, dz.p, ld, c.rows, c.heads, c.head_dim, dw.p, 1e-6f, dx.p,
                                                  ld, nullptr),
                cudaSuccess);
    });
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> want(size_t(c.rows) * ld);
    ops::cpu::rmsnorm_then_gate(x.f.data(), ld, z.f.data(), ld, c.rows, c.heads, c.head_dim, w.data(), 1e-6f,
                                want.data(), ld);
    EXPECT_TRUE(test::bf16_close(dx.get(), want));
  }
}

// Runs without a GPU: which groups take the 16-byte pieces, and by how many threads.
TEST(NormCudaArgs, PiecesTakeWholePiecesUpTo8192) {
  using ops::cuda::norm_pieces_threads;
  // Few groups: a piece a thread where 256 threads reach.
  EXPECT_EQ(norm_pieces_threads(8, 1, false), 32);
  EXPECT_EQ(norm_pieces_threads(264, 8, false), 64);
  EXPECT_EQ(norm_pieces_threads(1024, 8, false), 128);  // Nemotron-H-8B's gated norm at batch 1
  EXPECT_EQ(norm_pieces_threads(1032, 255, false), 256);
  EXPECT_EQ(norm_pieces_threads(8192, 1, false), 256);  // 4 a thread
  // More groups: fewer threads each, down to a warp's 4 pieces a lane where the launch still has 65,536.
  EXPECT_EQ(norm_pieces_threads(1024, 512, false), 128);  // 8B at batch 64
  EXPECT_EQ(norm_pieces_threads(1024, 1024, false), 64);
  EXPECT_EQ(norm_pieces_threads(1024, 2048, false), 32);  // 8B at batch 256
  EXPECT_EQ(norm_pieces_threads(1032, 4096, false), 64);  // 129 pieces: no more than 4 a thread
  EXPECT_EQ(norm_pieces_threads(1600, 1024, false), 64);  // 200 pieces, 4 a thread
  EXPECT_EQ(norm_pieces_threads(4000, 600, false), 128);  // 500 pieces, 4 a thread
  EXPECT_EQ(norm_pieces_threads(8200, 1000, false), 0);  // more: the element kernels
  EXPECT_EQ(norm_pieces_threads(1020, 1000, false), 0);  // not whole pieces
  EXPECT_EQ(norm_pieces_threads(4, 1000, false), 0);
  // The residual stream keeps the warp and 1024-thread orders (the GEMV's fused norm).
  EXPECT_EQ(norm_pieces_threads(4096, 255, true), 0);
  EXPECT_EQ(norm_pieces_threads(4096, 256, true), 256);
  EXPECT_EQ(norm_pieces_threads(512, 4096, true), 0);
  EXPECT_EQ(norm_pieces_threads(520, 256, true), 128);  // 65 pieces: 128 threads give 32,768, 256 would idle
}

// Runs without a GPU: wherever the rule takes pieces, its threads hold
// every piece of the group at no more than 4 a thread (the largest
// instance), for every width up to 8192 and group counts from 1 to 2^20.
TEST(NormCudaArgs, PiecesThreadsHoldTheWholeGroup) {
  for (int64_t n = 8; n <= 8200; n += 8)
    for (int64_t groups = 1; groups <= (int64_t(1) << 20); groups *= 2)
      for (bool residual : {false, true}) {
        const int t = ops::cuda::norm_pieces_threads(n, groups + (groups > 2 ? groups / 3 : 0), residual);
        if (t == 0) continue;
        ASSERT_TRUE(t == 32 || t == 64 || t == 128 || t == 256) << n << " " << groups;
        ASSERT_GE(int64_t(t) * 4 * 8, n) << "n " << n << " groups " << groups;
      }
}

// Runs without a GPU: every refusal comes before the device is touched.
TEST(NormCudaArgs, BadShapesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(16);  // never dereferenced: refused first
  float* f = reinterpret_cast<float*>(16);
  using ops::cuda::rmsnorm_cuda;
  EXPECT_EQ(rmsnorm_cuda(p, 8, 2, 16, f, 1e-6f, false, p, 16, nullptr), cudaErrorInvalidValue);   // ldx < dim
  EXPECT_EQ(rmsnorm_cuda(p, 16, 2, 16, f, 1e-6f, false, p, 15, nullptr), cudaErrorInvalidValue);  // ldy < dim
  EXPECT_EQ(rmsnorm_cuda(p, 16, 2, 0, f, 1e-6f, false, p, 16, nullptr), cudaErrorInvalidValue);   // dim 0
  EXPECT_EQ(rmsnorm_cuda(p, 16, -1, 16, f, 1e-6f, false, p, 16, nullptr), cudaErrorInvalidValue); // rows < 0
  EXPECT_EQ(rmsnorm_cuda(nullptr, 16, 2, 16, f, 1e-6f, false, p, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(rmsnorm_cuda(p, 16, 2, 16, f, 1e-6f, false, nullptr, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::residual_rmsnorm_cuda(nullptr, 16, p, 16, 2, 16, f, 1e-6f, false, p, 16, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::residual_rmsnorm_cuda(f, 16, p, 8, 2, 16, f, 1e-6f, false, p, 16, nullptr),
            cudaErrorInvalidValue);  // ldd < dim
  EXPECT_EQ(ops::cuda::rmsnorm_gated_group_cuda(p, 60, p, 60, 2, 60, 7, f, 1e-5f, p, 60, nullptr),
            cudaErrorInvalidValue);  // 7 does not divide 60
  EXPECT_EQ(ops::cuda::rmsnorm_gated_group_cuda(p, 60, nullptr, 60, 2, 60, 20, f, 1e-5f, p, 60, nullptr),
            cudaErrorInvalidValue);  // no gate
  EXPECT_EQ(ops::cuda::rmsnorm_then_gate_cuda(p, 60, p, 60, 2, 6, 10, nullptr, 1e-6f, p, 60, nullptr),
            cudaErrorInvalidValue);  // no weight
  EXPECT_EQ(ops::cuda::rmsnorm_then_gate_cuda(p, 60, p, 50, 2, 6, 10, f, 1e-6f, p, 60, nullptr),
            cudaErrorInvalidValue);  // ldz < width
  // Zero rows is a no-op, not an error.
  EXPECT_EQ(rmsnorm_cuda(p, 16, 0, 16, f, 1e-6f, false, p, 16, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace replayssm
