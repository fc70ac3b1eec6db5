// CUDA RoPE (ops/cuda/rope.h) against the CPU reference (ops/cpu/rope.h):
// partial rotary as Qwen3.5 applies it (a quarter of each head: 4 of 16 in
// the tiny fixture, 64 of 256 in Qwen3.5-27B) on q inside [query | gate]
// rows and on k inside [k | v] rows, full rotary at odd sizes, positions up
// to 262143; the rotated dims compared, every other element left bit for
// bit. Skipped without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/rope.h"
#include "ops/cuda/rope.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;

class RopeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

struct Case {
  int heads, head_dim, rot_dim;
  int64_t head_stride, ldx;
  float theta;
};

TEST_F(RopeCuda, PartialRotaryMatchesCpu) {
  const Case cases[] = {
      {4, 16, 4, 32, 4 * 32, 1e4f},             // tiny Qwen3.5: q in [query | gate] rows
      {2, 16, 4, 16, 2 * 2 * 16, 1e4f},         // its k in [k | v] rows
      {3, 38, 38, 38, 3 * 38 + 5, 1e4f},        // full rotary, odd
      {24, 256, 64, 512, 24 * 512, 1e7f},       // Qwen3.5-27B q
      {4, 256, 64, 256, 2 * 4 * 256, 1e7f},     // Qwen3.5-27B k
  };
  const std::vector<int32_t> pos = {0, 1, 17, 1000, 4095, 32767, 131071, 262143};
  const int64_t rows = int64_t(pos.size());
  std::mt19937 g(51);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "heads " << c.heads << " rot " << c.rot_dim << " of " << c.head_dim);
    const Bf x = test::bf_rand(g, size_t(rows) * c.ldx, 1.0f);
    const std::vector<float> inv = ops::cuda::rope_inv_freq(c.rot_dim, c.theta);
    Dev<uint16_t> dx(x.bits);
    Dev<float> dinv(inv);
    Dev<int32_t> dpos(pos);
    ASSERT_EQ(ops::cuda::rope_cuda(dx.p, c.ldx, c.head_stride, rows, c.heads, c.rot_dim, dinv.p, dpos.p, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> want = x.f;
    for (int64_t r = 0; r < rows; ++r)
      ops::cpu::rope(want.data() + r * c.ldx, c.ldx, 1, pos[r], c.heads, c.head_stride, c.rot_dim, c.theta);
    const std::vector<uint16_t> got = dx.get();
    EXPECT_TRUE(test::bf16_close(got, want));
    // Outside the rotated dims nothing moves.
    size_t moved = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < c.ldx; ++i) {
        const int64_t h = i / c.head_stride, d = i % c.head_stride;
        if ((h >= c.heads || d >= c.rot_dim) && got[r * c.ldx + i] != x.bits[r * c.ldx + i]) ++moved;
      }
    EXPECT_EQ(moved, 0u);
  }
}

// Runs without a GPU: every refusal comes before the device is touched.
TEST(RopeCudaArgs, BadShapesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(16);  // never dereferenced: refused first
  const float* f = reinterpret_cast<const float*>(16);
  const int32_t* i = reinterpret_cast<const int32_t*>(16);
  using ops::cuda::rope_cuda;
  EXPECT_EQ(rope_cuda(p, 64, 16, 2, 4, 5, f, i, nullptr), cudaErrorInvalidValue);     // odd rot_dim
  EXPECT_EQ(rope_cuda(p, 64, 16, 2, 4, 18, f, i, nullptr), cudaErrorInvalidValue);    // rot_dim > head stride
  EXPECT_EQ(rope_cuda(p, 60, 16, 2, 4, 4, f, i, nullptr), cudaErrorInvalidValue);     // ldx < heads·stride
  EXPECT_EQ(rope_cuda(p, 64, 16, 2, 0, 4, f, i, nullptr), cudaErrorInvalidValue);     // no heads
  EXPECT_EQ(rope_cuda(p, 64, 16, 2, 4, 4, nullptr, i, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(rope_cuda(p, 64, 16, 2, 4, 4, f, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(rope_cuda(p, 64, 16, 2, 4, 0, nullptr, nullptr, nullptr), cudaSuccess);   // nothing rotates
  EXPECT_EQ(ops::cuda::rope_inv_freq(6, 1e4f).size(), 3u);
}

}  // namespace
}  // namespace replayssm
