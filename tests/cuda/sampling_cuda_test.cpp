// CUDA embedding and argmax (ops/cuda/sampling.h): the gather bit-exact
// against the table (ids out of range give zeros), and argmax against the
// CPU's decode/sampler.h argmax on the vocabularies of Nemotron-H
// (131072) and Qwen3.5 (248320) and odd sizes, with planted ties (the
// lowest id wins), a maximum at the last id, all-equal and all −∞ rows,
// and a NaN at id 0 (the CPU answers 0); top log-probabilities and
// sampling (temperature, top-p) against the CPU's. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "cuda_test_util.h"
#include "workloads/beam_search.h"
#include "workloads/sampler.h"
#include "op_parity_util.h"
#include "ops/cuda/sampling.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;

class SamplingCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(SamplingCuda, EmbeddingGathersRowsIntoTheFp32Stream) {
  struct Case {
    int64_t V, H;
  };
  const Case cases[] = {{89, 40}, {1000, 4096}, {300, 5120}};
  std::mt19937 g(41);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "V " << c.V << " H " << c.H);
    const int64_t ldt = c.H + 8, ldh = c.H + 3;
    const Bf table = test::bf_rand(g, size_t(c.V) * ldt, 1.0f);
    std::vector<int32_t> tok = {0, int32_t(c.V - 1), 7, 7, -1, int32_t(c.V), int32_t(c.V / 2)};
    const int64_t rows = int64_t(tok.size());
    Dev<uint16_t> dt(table.bits);
    Dev<int32_t> dtok(tok);
    Dev<float> dh(std::vector<float>(size_t(rows) * ldh, 5.0f));
    ASSERT_EQ(ops::cuda::embedding_cuda(dtok.p, rows, dt.p, c.V, c.H, ldt, dh.p, ldh, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> want(size_t(rows) * ldh, 5.0f);  // padding untouched
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < c.H; ++i)
        want[r * ldh + i] = tok[r] >= 0 && tok[r] < c.V ? table.f[tok[r] * ldt + i] : 0.0f;
    EXPECT_TRUE(test::f32_close(dh.get(), want, 0.0f));
  }
}

// Rows of an odd stride are scanned one float at a time, 16-byte aligned
// rows four at a time (then the tail one at a time): both strides.
TEST_F(SamplingCuda, ArgmaxMatchesCpuLowestIdOnTies) {
  for (const int64_t V : {37L, 1000L, 131072L, 248320L}) {
    for (const int64_t ld : {V + 1, (V + 3) / 4 * 4 + 4}) {
      SCOPED_TRACE(testing::Message() << "V " << V << " ld " << ld);
      std::mt19937 g(42 + V);
      const int64_t rows = 8;
      std::vector<float> logits = test::uniform(g, size_t(rows) * ld, -4.0f, 4.0f);
      auto row = [&](int64_t r) { return logits.data() + r * ld; };
      // row 0: random; 1: a tie of the maximum at two ids; 2: at three ids incl. 0;
      // 3: maximum at the last id; 4: all equal; 5: all −∞; 6: NaN at id 0; 7: NaNs elsewhere.
      row(1)[V / 3] = 10.0f, row(1)[V - 2] = 10.0f;
      row(2)[0] = 9.0f, row(2)[V / 2] = 9.0f, row(2)[V - 1] = 9.0f;
      row(3)[V - 1] = 50.0f;
      std::fill(row(4), row(4) + V, 1.25f);
      std::fill(row(5), row(5) + V, -std::numeric_limits<float>::infinity());
      row(6)[0] = std::nanf("");
      row(7)[1] = std::nanf(""), row(7)[V - 1] = std::nanf("");
      Dev<float> dl(logits);
      Dev<int32_t> dout(std::vector<int32_t>(rows, -7));
      ASSERT_EQ(ops::cuda::argmax_cuda(dl.p, ld, rows, V, dout.p, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<int32_t> got = dout.get();
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_EQ(got[r], ops::cpu::argmax(std::span<const float>(row(r), size_t(V)))) << "row " << r;
    }
  }
}

// Ids equal to the CPU's top_logprobs (ties: lower id first), log-probs
// within fp64 rounding (the device sums exp in another order).
TEST_F(SamplingCuda, TopLogprobsMatchCpu) {
  for (const int64_t V : {37L, 1000L, 131072L}) {
    for (const int k : {1, 7, 16, 37}) {
      if (k > V) continue;
      SCOPED_TRACE(testing::Message() << "V " << V << " k " << k);
      std::mt19937 g(7 + V + k);
      const int64_t ld = V + 3, rows = 4;
      std::vector<float> logits = test::uniform(g, size_t(rows) * ld, -4.0f, 4.0f);
      auto row = [&](int64_t r) { return logits.data() + r * ld; };
      // row 1: values on a coarse grid, so many ties among the top; row 2:
      // the maximum at the last id; row 3: all equal.
      for (int64_t i = 0; i < V; ++i) row(1)[i] = std::round(row(1)[i] * 2.0f) / 2.0f;
      row(2)[V - 1] = 20.0f;
      std::fill(row(3), row(3) + V, -0.5f);
      Dev<float> dl(logits);
      Dev<int32_t> ids(std::vector<int32_t>(size_t(rows * k), -7));
      Dev<double> lp(std::vector<double>(size_t(rows * k), 0.0));
      ASSERT_EQ(ops::cuda::top_logprobs_cuda(dl.p, ld, rows, V, k, ids.p, lp.p, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<int32_t> gi = ids.get();
      const std::vector<double> gl = lp.get();
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<TokenLogprob> want = ops::cpu::top_logprobs(std::span<const float>(row(r), size_t(V)), k);
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(gi[size_t(r * k + j)], want[size_t(j)].token) << "row " << r << " rank " << j;
          EXPECT_NEAR(gl[size_t(r * k + j)], want[size_t(j)].logprob, 1e-9) << "row " << r << " rank " << j;
        }
      }
    }
  }
}

// sample_cuda against decode/sampler.h sample_at: the same token for the
// same uniform, and log_prob's log-probability, over temperatures and
// top-p cuts (the nucleus' edge inside a group of tied values among them)
// on rows of random, tied, equal and peaked logits. No top-p here puts
// the cut exactly on a whole number of an equal row's tokens (0.5 of an
// even vocabulary): there the exact mass ties the cut, and the CPU's
// summation order decides whether one more token is in — an order the
// device does not reproduce (it takes the exact count).
TEST_F(SamplingCuda, SampleMatchesCpuSampleAt) {
  struct Params {
    float temperature, top_p;
  };
  const Params params[] = {{0.0f, 1.0f},    {1.0f, 1.0f},      {0.7f, 0.9013f},
                           {1.3f, 0.5371f}, {1.0f, 0.0503f}, {2.0f, 0.9991f}};
  for (const int64_t V : {37L, 1000L, 131072L, 248320L}) {
    std::mt19937 g(11 + V);
    const int64_t ld = V + 5, rows = 4, per_row = 24, n = rows * per_row;
    std::vector<float> logits = test::uniform(g, size_t(rows) * ld, -6.0f, 6.0f);
    auto row = [&](int64_t r) { return logits.data() + r * ld; };
    for (int64_t i = 0; i < V; ++i) row(1)[i] = std::round(row(1)[i]);  // 13 values: large tie groups
    std::fill(row(2), row(2) + V, 0.25f);
    row(3)[V / 3] = 30.0f, row(3)[V - 1] = 29.0f;  // nearly all the mass on two ids
    std::vector<int32_t> which(static_cast<size_t>(n));
    std::vector<double> u(static_cast<size_t>(n));
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    for (int64_t i = 0; i < n; ++i) which[size_t(i)] = int32_t(i / per_row), u[size_t(i)] = unif(g);
    u[0] = 0.0, u[1] = 0.9999999999;
    Dev<float> dl(logits);
    Dev<int32_t> drow(which), out(std::vector<int32_t>(size_t(n), -1));
    Dev<double> dr(u), lp(std::vector<double>(size_t(n), 0.0));
    for (const Params& pr : params) {
      SCOPED_TRACE(testing::Message() << "V " << V << " T " << pr.temperature << " top_p " << pr.top_p);
      ops::cuda::SampleArgs a;
      a.logits = dl.p, a.ld = ld, a.V = V, a.n = n, a.row = drow.p, a.r = dr.p;
      a.temperature = pr.temperature, a.top_p = pr.top_p, a.out = out.p, a.lp = lp.p;
      ASSERT_EQ(ops::cuda::sample_cuda(a, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<int32_t> got = out.get();
      const std::vector<double> glp = lp.get();
      SamplingParams sp;
      sp.temperature = pr.temperature, sp.top_p = pr.top_p;
      for (int64_t i = 0; i < n; ++i) {
        const std::span<const float> x(row(which[size_t(i)]), size_t(V));
        const int32_t want = ops::cpu::sample_at(x, sp, u[size_t(i)]);
        ASSERT_EQ(got[size_t(i)], want) << "row " << which[size_t(i)] << " u " << u[size_t(i)];
        EXPECT_NEAR(glp[size_t(i)], ops::cpu::log_prob(x, want), 1e-9) << "row " << which[size_t(i)];
      }
    }
  }
}

// Runs without a GPU: every refusal comes before the device is touched.
TEST(SamplingCudaArgs, BadShapesAreRefused) {
  const uint16_t* t = reinterpret_cast<const uint16_t*>(16);  // never dereferenced: refused first
  const int32_t* i = reinterpret_cast<const int32_t*>(16);
  float* f = reinterpret_cast<float*>(16);
  int32_t* o = reinterpret_cast<int32_t*>(16);
  using ops::cuda::argmax_cuda;
  using ops::cuda::embedding_cuda;
  EXPECT_EQ(embedding_cuda(i, 2, t, 10, 8, 7, f, 8, nullptr), cudaErrorInvalidValue);  // ldt < H
  EXPECT_EQ(embedding_cuda(i, 2, t, 10, 8, 8, f, 7, nullptr), cudaErrorInvalidValue);  // ldh < H
  EXPECT_EQ(embedding_cuda(i, 2, t, 0, 8, 8, f, 8, nullptr), cudaErrorInvalidValue);   // V = 0
  EXPECT_EQ(embedding_cuda(nullptr, 2, t, 10, 8, 8, f, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(embedding_cuda(i, 0, t, 10, 8, 8, f, 8, nullptr), cudaSuccess);  // no rows
  EXPECT_EQ(argmax_cuda(f, 9, 2, 10, o, nullptr), cudaErrorInvalidValue);  // ld < V
  EXPECT_EQ(argmax_cuda(f, 10, 2, 0, o, nullptr), cudaErrorInvalidValue);  // V = 0
  EXPECT_EQ(argmax_cuda(f, 10, -1, 10, o, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(argmax_cuda(f, 10, 2, 10, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(argmax_cuda(f, 10, 0, 10, o, nullptr), cudaSuccess);
  using ops::cuda::top_logprobs_cuda;
  double* d = reinterpret_cast<double*>(16);
  EXPECT_EQ(top_logprobs_cuda(f, 10, 2, 10, 0, o, d, nullptr), cudaErrorInvalidValue);   // k = 0
  EXPECT_EQ(top_logprobs_cuda(f, 10, 2, 10, 11, o, d, nullptr), cudaErrorInvalidValue);  // k > V
  EXPECT_EQ(top_logprobs_cuda(f, 9, 2, 10, 3, o, d, nullptr), cudaErrorInvalidValue);    // ld < V
  EXPECT_EQ(top_logprobs_cuda(f, 10, 2, 10, 3, o, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(top_logprobs_cuda(f, 10, 0, 10, 3, o, d, nullptr), cudaSuccess);
  ops::cuda::SampleArgs sa;
  sa.logits = f, sa.ld = 10, sa.V = 10, sa.n = 2, sa.row = i, sa.r = d, sa.out = o, sa.lp = d;
  sa.top_p = 0.0f;
  EXPECT_EQ(ops::cuda::sample_cuda(sa, nullptr), cudaErrorInvalidValue);  // top_p must be > 0
  sa.top_p = 1.0f, sa.ld = 9;
  EXPECT_EQ(ops::cuda::sample_cuda(sa, nullptr), cudaErrorInvalidValue);  // ld < V
  sa.ld = 10, sa.r = nullptr;
  EXPECT_EQ(ops::cuda::sample_cuda(sa, nullptr), cudaErrorInvalidValue);
  sa.n = 0;
  EXPECT_EQ(ops::cuda::sample_cuda(sa, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace replayssm
