// Gemm::linear (cuBLAS, and gemv_cuda for 1–2 rows) and gemv_cuda
// against the CPU's fp32 matmul on the same bf16 values: odd and real
// widths, every row count the GEMV takes, the 16-byte path and the scalar
// one (n_in not a multiple of 8), a strided x, bias, bf16 and fp32 outputs.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/gemm.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/gemv.h"

namespace replayssm {
namespace {

using ops::cuda::Gemm;

struct Case {
  int64_t rows, n_out, n_in, ldx;
  bool bias, fp32;
};

// y (rows, n_out) on the CPU from bf16-exact x and w.
std::vector<float> reference(const test::Bf& x, int64_t ldx, int64_t rows, const test::Bf& w, int64_t n_out,
                             int64_t n_in, const std::vector<float>& bias, bool with_bias) {
  std::vector<float> y(size_t(rows * n_out));
  ops::cpu::matmul(x.f.data(), ldx, rows, n_in, w.f.data(), n_out, with_bias ? bias.data() : nullptr, y.data(), n_out);
  return y;
}

void check(const Case& c, bool through_gemm, const ops::cuda::GemvTuning& tuning = {}) {
  std::mt19937 g(unsigned(c.rows * 131 + c.n_out * 7 + c.n_in));
  const test::Bf x = test::bf_rand(g, size_t(c.rows * c.ldx), 1.0f);
  const test::Bf w = test::bf_rand(g, size_t(c.n_out * c.n_in), 0.05f);
  const std::vector<float> bias = test::uniform(g, size_t(c.n_out), -1.0f, 1.0f);
  const std::vector<float> want = reference(x, c.ldx, c.rows, w, c.n_out, c.n_in, bias, c.bias);
  test::Dev<uint16_t> dx(x.bits), dw(w.bits);
  test::Dev<float> db(bias);
  test::Dev<float> yf(std::vector<float>(size_t(c.rows * c.n_out), -7.0f));
  test::Dev<uint16_t> yb(std::vector<uint16_t>(size_t(c.rows * c.n_out), 0));
  void* y = c.fp32 ? static_cast<void*>(yf.p) : static_cast<void*>(yb.p);
  if (through_gemm) {
    Gemm gemm;
    ASSERT_EQ(gemm.init(nullptr), cudaSuccess);
    ASSERT_EQ(gemm.linear(dx.p, c.ldx, c.rows, dw.p, c.n_out, c.n_in, c.bias ? db.p : nullptr, y, c.n_out, c.fp32),
              cudaSuccess);
  } else {
    ASSERT_EQ(ops::cuda::gemv_cuda(dx.p, c.ldx, int(c.rows), dw.p, c.n_out, c.n_in, c.bias ? db.p : nullptr, y, c.n_out,
                                   c.fp32, nullptr, tuning),
              cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got_f = c.fp32 ? yf.get() : std::vector<float>();
  const std::vector<uint16_t> got_b = c.fp32 ? std::vector<uint16_t>() : yb.get();
  // fp32 outputs: summation order only; bf16: one rounding more.
  const float tol = c.fp32 ? 1e-4f : test::kBf16Tol;
  EXPECT_TRUE(test::all_close(
      want.size(), [&](size_t i) { return c.fp32 ? got_f[i] : bf16_to_f32(got_b[i]); },
      [&](size_t i) { return want[i]; }, tol))
      << "rows " << c.rows << " n_out " << c.n_out << " n_in " << c.n_in << " ldx " << c.ldx << " split "
      << tuning.split << " unroll " << tuning.unroll;
}

const std::vector<Case> kCases = {
    {1, 37, 48, 48, false, false},    {1, 1000, 4096, 4096, true, false}, {2, 129, 100, 100, true, true},
    {3, 64, 72, 80, false, false},    {4, 511, 4096, 4104, false, true},  {5, 77, 256, 256, true, false},
    {8, 300, 1032, 1032, false, false}, {1, 96, 8192, 8192, false, true}, {7, 10, 13, 16, true, true},
};

TEST(GemvCuda, MatchesCpuForEveryRowCountAndBothPaths) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const Case& c : kCases) check(c, false);
}

// Every block shape the launcher may pick: warps per row 1–8 (rows split
// into slices that meet in shared memory), 4 or 8 loads in flight; row
// lengths with whole rounds, a partial last round (4104) and the scalar
// path (100, 13).
TEST(GemvCuda, EveryBlockShapeMatchesCpu) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<Case> cases = {{1, 37, 4104, 4104, true, false},  {2, 129, 100, 100, true, true},
                                   {1, 96, 8192, 8192, false, true},  {3, 21, 16392, 16400, false, false},
                                   {8, 9, 2056, 2056, true, true},    {1, 10, 13, 16, false, false}};
  for (int split : {1, 2, 4, 8})
    for (int unroll : {4, 8})
      for (const Case& c : cases) check(c, false, {split, unroll});
}

TEST(GemmCuda, LinearMatchesCpuThroughGemvAndCublas) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const Case& c : kCases) check(c, true);
  check({16, 200, 264, 264, true, false}, true);   // cuBLAS
  check({64, 96, 4096, 4096, false, true}, true);  // cuBLAS, fp32 out
}

TEST(GemmCudaArgs, BadShapesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(0x100);
  EXPECT_EQ(ops::cuda::gemv_cuda(p, 4, 9, p, 4, 4, nullptr, p, 4, false, nullptr), cudaErrorInvalidValue);  // rows > 8
  EXPECT_EQ(ops::cuda::gemv_cuda(p, 3, 1, p, 4, 4, nullptr, p, 4, false, nullptr), cudaErrorInvalidValue);  // ldx < n_in
  EXPECT_EQ(ops::cuda::gemv_cuda(p, 4, 1, p, 4, 4, nullptr, p, 3, false, nullptr), cudaErrorInvalidValue);  // ldy < n_out
  EXPECT_EQ(ops::cuda::gemv_cuda(nullptr, 4, 1, p, 4, 4, nullptr, p, 4, false, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::gemv_cuda(p, 4, 0, p, 4, 4, nullptr, p, 4, false, nullptr), cudaSuccess);  // nothing to do
  EXPECT_EQ(ops::cuda::gemv_cuda(p, 4, 1, p, 4, 4, nullptr, p, 4, false, nullptr, {3, 0}), cudaErrorInvalidValue);
  EXPECT_EQ(ops::cuda::gemv_cuda(p, 4, 1, p, 4, 4, nullptr, p, 4, false, nullptr, {0, 2}), cudaErrorInvalidValue);
  Gemm uninitialised;
  EXPECT_EQ(uninitialised.linear(p, 4, 1, p, 4, 4, nullptr, p, 4, false), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace replayssm
