// The GEMV's fused epilogues (gemv.h, GemvEpilogue; Gemm::linear_act, and
// the residual norm as gemv_epilogue_cuda runs it for
// Gemm::linear_residual_norm) against the two-kernel path they replace
// (the projection, then mlp_activation_cuda or residual_rmsnorm_cuda, each
// tested against the CPU elsewhere): bit for bit, for 1–2 rows (the fused
// GEMV) and 3 (cuBLAS then the kernel). Widths cover both of the norm's
// summation orders (a warp per row up to 512, a 1024-thread row above),
// rows that do not fill the last block, the scalar GEMV path, and the
// last-block counter across back-to-back calls. (Under REPLAYSSM_FUSE=0
// Gemm::linear_act would compare the two-kernel path with itself: that
// test refuses to run so.)
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/gemv.h"
#include "ops/cuda/norm.h"

namespace replayssm {
namespace {

using ops::cuda::Gemm;

struct NormCase {
  int64_t rows, n_out, n_in;
  bool bias, weight, unit_offset;
};

TEST(GemmEpilogueCuda, ResidualNormHasTheBitsOfTheTwoKernels) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<NormCase> cases = {
      {1, 4096, 4096, false, true, false}, {2, 4096, 1024, true, true, true}, {1, 300, 256, true, true, false},
      {2, 512, 100, false, false, false},  {1, 513, 64, true, true, true},    {2, 1000, 8192, false, true, false},
      {3, 700, 136, true, true, false},    {1, 37, 13, true, true, false},    {1, 9000, 64, true, true, false},
  };
  Gemm fused, plain;
  ASSERT_EQ(fused.init(nullptr), cudaSuccess);
  ASSERT_EQ(plain.init(nullptr), cudaSuccess);
  test::Dev<int> counter(std::vector<int>{0});
  for (const NormCase& c : cases) {
    std::mt19937 g(unsigned(c.rows * 17 + c.n_out * 3 + c.n_in));
    const test::Bf x = test::bf_rand(g, size_t(c.rows * c.n_in), 1.0f);
    const test::Bf w = test::bf_rand(g, size_t(c.n_out * c.n_in), 0.05f);
    const std::vector<float> bias = test::uniform(g, size_t(c.n_out), -0.5f, 0.5f);
    const std::vector<float> nw = test::uniform(g, size_t(c.n_out), 0.5f, 1.5f);
    const std::vector<float> h0 = test::uniform(g, size_t(c.rows * c.n_out), -3.0f, 3.0f);
    test::Dev<uint16_t> dx(x.bits), dw(w.bits);
    test::Dev<float> db(bias), dnw(nw), h_fused(h0), h_plain(h0);
    test::Dev<uint16_t> xn_fused(std::vector<uint16_t>(size_t(c.rows * c.n_out), 0)),
        xn_plain(std::vector<uint16_t>(size_t(c.rows * c.n_out), 1)),
        d(std::vector<uint16_t>(size_t(c.rows * c.n_out), 0));
    const float* b = c.bias ? db.p : nullptr;
    const float* wn = c.weight ? dnw.p : nullptr;
    // Three blocks in a row, as a step chains them: the counter must come back to 0 each time.
    for (int step = 0; step < 3; ++step) {
      if (c.rows <= ops::cuda::kGemvMaxFusedRows) {  // the fused GEMV itself (Gemm fuses it at REPLAYSSM_FUSE=2)
        ops::cuda::GemvEpilogue e;
        e.residual = h_fused.p, e.ld_residual = c.n_out, e.norm_w = wn, e.eps = 1e-5f, e.unit_offset = c.unit_offset;
        e.norm_y = xn_fused.p, e.ld_norm_y = c.n_out, e.counter = counter.p;
        ASSERT_EQ(ops::cuda::gemv_epilogue_cuda(dx.p, c.n_in, int(c.rows), dw.p, c.n_out, c.n_in, b, nullptr, c.n_out,
                                                e, nullptr),
                  cudaSuccess);
      } else {
        ASSERT_EQ(fused.linear_residual_norm(dx.p, c.n_in, c.rows, dw.p, c.n_out, c.n_in, b, h_fused.p, c.n_out, wn,
                                             1e-5f, c.unit_offset, xn_fused.p, c.n_out, d.p, c.n_out),
                  cudaSuccess);
      }
      ASSERT_EQ(plain.linear(dx.p, c.n_in, c.rows, dw.p, c.n_out, c.n_in, b, d.p, c.n_out, false), cudaSuccess);
      ASSERT_EQ(ops::cuda::residual_rmsnorm_cuda(h_plain.p, c.n_out, d.p, c.n_out, c.rows, c.n_out, wn, 1e-5f,
                                                 c.unit_offset, xn_plain.p, c.n_out, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::string what = "rows " + std::to_string(c.rows) + " n_out " + std::to_string(c.n_out) + " n_in " +
                               std::to_string(c.n_in) + " step " + std::to_string(step);
      EXPECT_EQ(h_fused.get(), h_plain.get()) << what;
      EXPECT_EQ(xn_fused.get(), xn_plain.get()) << what;
      EXPECT_EQ(counter.get()[0], 0) << what << ": the last block resets the count";
    }
  }
}

TEST(GemmEpilogueCuda, ActivationHasTheBitsOfTheTwoKernels) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(ops::cuda::fusion_enabled()) << "REPLAYSSM_FUSE=0: there is no fused path to compare";
  Gemm gemm;
  ASSERT_EQ(gemm.init(nullptr), cudaSuccess);
  for (Activation act : {Activation::kRelu2, Activation::kSilu, Activation::kRelu, Activation::kGeluTanh})
    for (int64_t rows : {1, 2, 3}) {
      const int64_t n_out = 777, n_in = 264, ldy = 800;
      std::mt19937 g(unsigned(rows * 5 + int(act)));
      const test::Bf x = test::bf_rand(g, size_t(rows * n_in), 1.0f);
      const test::Bf w = test::bf_rand(g, size_t(n_out * n_in), 0.1f);
      const std::vector<float> bias = test::uniform(g, size_t(n_out), -0.5f, 0.5f);
      test::Dev<uint16_t> dx(x.bits), dw(w.bits);
      test::Dev<float> db(bias);
      test::Dev<uint16_t> fused(std::vector<uint16_t>(size_t(rows * ldy), 7)),
          plain(std::vector<uint16_t>(size_t(rows * ldy), 7));
      ASSERT_EQ(gemm.linear_act(dx.p, n_in, rows, dw.p, n_out, n_in, db.p, act, fused.p, ldy), cudaSuccess);
      ASSERT_EQ(gemm.linear(dx.p, n_in, rows, dw.p, n_out, n_in, db.p, plain.p, ldy, false), cudaSuccess);
      ASSERT_EQ(ops::cuda::mlp_activation_cuda(act, nullptr, 0, plain.p, ldy, rows, n_out, plain.p, ldy, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(fused.get(), plain.get()) << "act " << int(act) << " rows " << rows;
    }
}

TEST(GemmEpilogueCudaArgs, BadEpiloguesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(0x100);
  float* f = reinterpret_cast<float*>(0x200);
  int* counter = reinterpret_cast<int*>(0x300);
  using ops::cuda::gemv_epilogue_cuda;
  ops::cuda::GemvEpilogue e;
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 1, p, 4, 4, nullptr, p, 4, e, nullptr), cudaErrorInvalidValue);  // neither
  e.has_act = true, e.residual = f, e.ld_residual = 4;
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 1, p, 4, 4, nullptr, p, 4, e, nullptr), cudaErrorInvalidValue);  // both
  e.residual = nullptr, e.act = static_cast<Activation>(9);
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 1, p, 4, 4, nullptr, p, 4, e, nullptr), cudaErrorInvalidValue);  // unknown act
  e.act = Activation::kRelu2;
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 1, p, 4, 4, nullptr, nullptr, 4, e, nullptr), cudaErrorInvalidValue);  // no y
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 3, p, 4, 4, nullptr, p, 4, e, nullptr), cudaErrorInvalidValue);  // 3 rows
  ops::cuda::GemvEpilogue r;
  r.residual = f, r.ld_residual = 3;
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 1, p, 4, 4, nullptr, nullptr, 4, r, nullptr), cudaErrorInvalidValue);  // ld
  r.ld_residual = 4, r.norm_y = p, r.ld_norm_y = 4;
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 1, p, 4, 4, nullptr, nullptr, 4, r, nullptr), cudaErrorInvalidValue);  // counter
  r.counter = counter, r.ld_norm_y = 3;
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 1, p, 4, 4, nullptr, nullptr, 4, r, nullptr), cudaErrorInvalidValue);  // ld
  r.ld_norm_y = 4;
  EXPECT_EQ(gemv_epilogue_cuda(p, 4, 0, p, 4, 4, nullptr, nullptr, 4, r, nullptr), cudaSuccess);  // no rows
  Gemm uninitialised;
  EXPECT_EQ(uninitialised.linear_act(p, 4, 1, p, 4, 4, nullptr, Activation::kRelu2, p, 4), cudaErrorInvalidValue);
  EXPECT_EQ(uninitialised.linear_residual_norm(p, 4, 1, p, 4, 4, nullptr, f, 4, f, 1e-6f, false, p, 4, p, 4),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace replayssm
