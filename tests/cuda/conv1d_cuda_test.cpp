// CUDA conv1d (ops/cuda/conv1d.h) against the CPU reference
// (ops/cpu/conv1d.h): decode steps over permuted window slots (several in
// a row, so the shift is exercised) and ragged prefill segments shorter
// than the window, across chunk boundaries and empty; post-conv outputs and
// the windows after (bit-exact: they hold bf16 pre-conv rows) checked, and
// the slots no sequence owns left untouched. Sizes: odd, K = 1..4, and the
// conv dimension 10240 of Nemotron-H-8B (8192 + 2·8·128) and of
// Qwen3.5-27B's GDN (2·16·128 + 48·128). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/conv1d.h"
#include "ops/cuda/conv1d.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;

struct Shape {
  int batch, C, K;
  bool bias;
  bool aligned = false;  // even strides: two channels a thread once the blocks fill the GPU
};
void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B" << s.batch << "_C" << s.C << "_K" << s.K << (s.bias ? "_bias" : "") << (s.aligned ? "_aligned" : "");
}

class Conv1dCuda : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(Conv1dCuda, DecodeStepsMatchCpuAndShiftTheWindow) {
  const Shape s = GetParam();
  const int B = s.batch, C = s.C, K = s.K, slots = 2 * B + 1, steps = 3;
  std::mt19937 g(21 + C);
  std::vector<int32_t> slot(B);
  for (int b = 0; b < B; ++b) slot[b] = 2 * (B - 1 - b) + 1;  // permuted, odd slots; even slots owned by none
  Bf win = test::bf_rand(g, size_t(slots) * (K - 1) * C, 1.0f);
  const std::vector<float> w = test::uniform(g, size_t(C) * K, -0.6f, 0.6f), bias = test::uniform(g, C, -0.5f, 0.5f);
  Dev<uint16_t> dwin(win.bits);
  Dev<float> dw(w), dbias(bias);
  Dev<int32_t> dslot(slot);
  std::vector<float> cpu_win = win.f;
  const ops::Conv1dParams cp{C, K, w.data(), s.bias ? bias.data() : nullptr};
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    const int64_t ldx = s.aligned ? C + 8 : C + 5, ldy = s.aligned ? C : C + 2;
    const Bf x = test::bf_rand(g, size_t(B) * ldx, 1.0f);
    Dev<uint16_t> dx(x.bits), dy(std::vector<uint16_t>(size_t(B) * ldy));
    ops::cuda::Conv1dArgs a;
    a.batch = B, a.C = C, a.K = K, a.weight = dw.p, a.bias = s.bias ? dbias.p : nullptr;
    a.window = K > 1 ? dwin.p : nullptr, a.slot = K > 1 ? dslot.p : nullptr, a.x = dx.p, a.ldx = ldx, a.y = dy.p, a.ldy = ldy;
    ASSERT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> want(size_t(B) * ldy, 0.0f);
    for (int b = 0; b < B; ++b)
      ops::cpu::conv1d_silu(cp, cpu_win.data() + size_t(slot[b]) * (K - 1) * C, x.f.data() + b * ldx, ldx, 1,
                            want.data() + b * ldy, ldy);
    EXPECT_TRUE(test::bf16_close(dy.get(), want));
    EXPECT_TRUE(test::bf16_close(dwin.get(), cpu_win, 0.0f)) << "windows (every slot)";
  }
}

TEST_P(Conv1dCuda, PrefillOfRaggedSegmentsMatchesCpu) {
  const Shape s = GetParam();
  const int C = s.C, K = s.K;
  // Lengths: shorter than the window, empty, one, across the 16-row chunks.
  std::vector<int> len = {2, 0, 1, 17, 40};
  len.resize(std::max(1, std::min<int>(s.batch + 2, len.size())));
  const int B = static_cast<int>(len.size()), slots = B + 2;
  std::mt19937 g(23 + C);
  std::vector<int32_t> slot(B), cu_rows(B + 1, 0);
  for (int b = 0; b < B; ++b) slot[b] = B + 1 - b, cu_rows[b + 1] = cu_rows[b] + len[b];  // slots 0, 1 owned by none
  const int rows = cu_rows[B], max_rows = *std::max_element(len.begin(), len.end());
  const int64_t ldx = C + 3, ldy = C;
  Bf win = test::bf_rand(g, size_t(slots) * (K - 1) * C, 1.0f), x = test::bf_rand(g, size_t(rows) * ldx, 1.0f);
  const std::vector<float> w = test::uniform(g, size_t(C) * K, -0.6f, 0.6f), bias = test::uniform(g, C, -0.5f, 0.5f);
  Dev<uint16_t> dwin(win.bits), dx(x.bits), dy(std::vector<uint16_t>(size_t(rows) * ldy));
  Dev<float> dw(w), dbias(bias);
  Dev<int32_t> dslot(slot), dcu(cu_rows);
  ops::cuda::Conv1dArgs a;
  a.batch = B, a.C = C, a.K = K, a.weight = dw.p, a.bias = s.bias ? dbias.p : nullptr;
  a.window = K > 1 ? dwin.p : nullptr, a.slot = K > 1 ? dslot.p : nullptr, a.x = dx.p, a.ldx = ldx, a.y = dy.p, a.ldy = ldy;
  a.cu_rows = dcu.p, a.max_rows = max_rows;
  ASSERT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> want(size_t(rows) * ldy, 0.0f), cpu_win = win.f;
  const ops::Conv1dParams cp{C, K, w.data(), s.bias ? bias.data() : nullptr};
  for (int b = 0; b < B; ++b)
    ops::cpu::conv1d_silu(cp, cpu_win.data() + size_t(slot[b]) * (K - 1) * C, x.f.data() + cu_rows[b] * ldx, ldx,
                          len[b], want.data() + cu_rows[b] * ldy, ldy);
  EXPECT_TRUE(test::bf16_close(dy.get(), want));
  EXPECT_TRUE(test::bf16_close(dwin.get(), cpu_win, 0.0f)) << "windows (every slot)";
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv1dCuda,
                         ::testing::Values(Shape{3, 37, 4, false},     // odd, no bias
                                           Shape{2, 50, 2, true},      // window of one row
                                           Shape{3, 45, 3, true},      // odd K
                                           Shape{1, 33, 1, true},      // no window at all (nullptr)
                                           Shape{3, 10240, 4, true},   // Nemotron-H-8B xBC
                                           Shape{2, 10240, 4, false},  // Qwen3.5-27B qkv (no conv bias)
                                           // More blocks than the H200's 132 SMs at two channels a thread:
                                           Shape{140, 64, 4, true, true},     // one block a sequence
                                           Shape{133, 10240, 4, false, true},  // Nemotron-H-8B xBC
                                           Shape{140, 24, 3, true, true},     // a partial block, odd K
                                           Shape{140, 40, 1, true, true})     // no window
);

// Runs without a GPU: every refusal comes before the device is touched.
TEST(Conv1dCudaArgs, BadShapesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(16);  // never dereferenced: refused first
  const float* f = reinterpret_cast<const float*>(16);
  const int32_t* i = reinterpret_cast<const int32_t*>(16);
  ops::cuda::Conv1dArgs a;
  a.batch = 2, a.C = 64, a.K = 4, a.weight = f, a.window = p, a.slot = i, a.x = p, a.ldx = 64, a.y = p + 64,
  a.ldy = 64;
  a.K = 9;  // > kConvMaxK
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.K = 0;
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.K = 4, a.ldx = 63;  // ldx < C
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.ldx = 64, a.window = nullptr;  // K > 1 needs a window
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.window = p, a.weight = nullptr;
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.weight = f, a.batch = -1;
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaErrorInvalidValue);
  a.batch = 2;  // prefill: needs cu_rows, and y must not alias x
  a.max_rows = 8;
  EXPECT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaErrorInvalidValue);
  a.cu_rows = i, a.y = p;
  EXPECT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaErrorInvalidValue);
  a.y = p + 64, a.max_rows = -1;
  EXPECT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaErrorInvalidValue);
  a.batch = 0, a.max_rows = 8;  // nothing to do
  EXPECT_EQ(ops::cuda::conv1d_step_cuda(a, nullptr), cudaSuccess);
  EXPECT_EQ(ops::cuda::conv1d_prefill_cuda(a, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace replayssm
