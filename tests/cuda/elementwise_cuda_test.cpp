// CUDA elementwise ops (ops/cuda/elementwise.h) against the CPU: the MLP
// activations as forward.cpp applies them (relu² ungated for NemotronH,
// SiLU-gated for Qwen3.5, and the other two the config accepts) at odd
// sizes and the real intermediates (Nemotron-H-8B 21504, Qwen3.5-27B
// 17408), also on the backend's packed rows (gate | up, in place: eight
// columns a thread), and GDN's prepare against ops/cpu/gdn_scan.h
// gdn_prepare, reading q and k from inside post-conv qkv rows as the model
// lays them out.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/gdn_scan.h"
#include "ops/cuda/elementwise.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;

class ElementwiseCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(ElementwiseCuda, MlpActivationMatchesForward) {
  struct Case {
    Activation act;
    bool gated, in_place;
    int64_t rows, n;
    bool packed = false;  // the backend's rows: gate | up in one row of 2n (or up alone, dense), out over up:
                          // 16-byte aligned, so eight columns a thread
  };
  const Case cases[] = {
      {Activation::kRelu2, false, false, 5, 37},    {Activation::kSilu, true, false, 5, 37},
      {Activation::kGeluTanh, true, true, 3, 45},   {Activation::kRelu, false, true, 3, 45},
      {Activation::kRelu2, false, true, 3, 21504},  // Nemotron-H-8B MLP
      {Activation::kSilu, true, true, 3, 17408},    // Qwen3.5-27B MLP
      {Activation::kRelu2, false, true, 7, 21504, true},
      {Activation::kSilu, true, true, 7, 17408, true},
      {Activation::kGeluTanh, true, true, 4, 24, true},     // a partial block of columns
      {Activation::kRelu2, false, true, 65537, 16, true},   // more rows than the grid's 65535
  };
  std::mt19937 g(31);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "act " << int(c.act) << " gated " << c.gated << " n " << c.n << " rows "
                                    << c.rows << " packed " << c.packed);
    // Packed: gate and up share one buffer (gate at column 0, up at n) of
    // row stride 2n, or up alone of stride n.
    const int64_t ldg = c.packed ? 2 * c.n : c.n + 1, ldu = c.packed ? (c.gated ? 2 * c.n : c.n) : c.n + 2;
    const int64_t ldo = c.in_place ? ldu : c.n, up_at = c.packed && c.gated ? c.n : 0;
    const Bf gate = test::bf_rand(g, size_t(c.rows) * ldg, 2.0f);
    Bf up = test::bf_rand(g, size_t(c.rows) * ldu, 2.0f);
    if (c.packed && c.gated) up = gate;  // one buffer
    Dev<uint16_t> dg(gate.bits), du(up.bits), dout(std::vector<uint16_t>(size_t(c.rows) * ldo));
    const uint16_t* gate_p = c.packed ? du.p : dg.p;
    uint16_t* out = c.in_place ? du.p + up_at : dout.p;
    ASSERT_EQ(ops::cuda::mlp_activation_cuda(c.act, c.gated ? gate_p : nullptr, ldg, du.p + up_at, ldu, c.rows, c.n,
                                             out, ldo, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> want = c.in_place ? up.f : std::vector<float>(size_t(c.rows) * ldo, 0.0f);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t i = 0; i < c.n; ++i) {
        const float u = up.f[r * ldu + up_at + i];
        const float gv = gate.f[r * ldg + i];  // packed: up's buffer is a copy of gate's
        want[r * ldo + (c.in_place ? up_at : 0) + i] = c.gated ? u * ops::activate(c.act, gv) : ops::activate(c.act, u);
      }
    EXPECT_TRUE(test::bf16_close(c.in_place ? du.get() : dout.get(), want));
  }
}

TEST_F(ElementwiseCuda, GdnPrepareMatchesCpu) {
  struct Case {
    int64_t rows;
    int Hk, Hv, dk, dv;
    bool in_place;
  };
  // tiny Qwen3.5; odd; Qwen3.5-27B (16 key heads × 128, 48 value heads); Qwen3-Next, prepared in place.
  const Case cases[] = {{3, 2, 6, 8, 10, false}, {5, 3, 6, 40, 24, false}, {4, 16, 48, 128, 128, false},
                        {2, 16, 32, 128, 128, true}};
  std::mt19937 g(32);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " Hk " << c.Hk << " Hv " << c.Hv << " dk " << c.dk);
    const int64_t dqk = int64_t(c.Hk) * c.dk, C = 2 * dqk + int64_t(c.Hv) * c.dv, T = c.rows;
    // q | k | v post-conv rows (or dense q and k for the in-place case), a | b rows.
    const int64_t ld = c.in_place ? dqk : C;
    const Bf q = test::bf_rand(g, size_t(T) * ld, 0.7f), k = test::bf_rand(g, size_t(T) * ld, 0.7f);
    const Bf ab = test::bf_rand(g, size_t(T) * 2 * c.Hv, 1.5f);
    std::vector<float> A_log(c.Hv), dt_bias = test::uniform(g, c.Hv, -1.0f, 1.0f);
    for (float& v : A_log) v = std::log(std::uniform_real_distribution<float>(1.0f, 16.0f)(g));
    Dev<uint16_t> dq(q.bits), dk_(k.bits), dab(ab.bits), dqo(std::vector<uint16_t>(size_t(T) * dqk)),
        dko(std::vector<uint16_t>(size_t(T) * dqk));
    Dev<float> dA(A_log), ddt(dt_bias), dgg(std::vector<float>(size_t(T) * c.Hv)),
        dbeta(std::vector<float>(size_t(T) * c.Hv));
    ops::cuda::GdnPrepareArgs a;
    a.rows = T, a.Hk = c.Hk, a.Hv = c.Hv, a.dk = c.dk, a.A_log = dA.p, a.dt_bias = ddt.p, a.l2_eps = 1e-6f;
    a.q = dq.p, a.k = dk_.p, a.ldq = ld, a.ldk = ld, a.a = dab.p, a.lda = 2 * c.Hv, a.b = dab.p + c.Hv, a.ldb = 2 * c.Hv;
    a.q_out = c.in_place ? dq.p : dqo.p, a.k_out = c.in_place ? dk_.p : dko.p, a.g = dgg.p, a.beta = dbeta.p;
    ASSERT_EQ(ops::cuda::gdn_prepare_cuda(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    // The CPU prepares q and k in place inside one qk row buffer (stride ldqk): copy them side by side.
    std::vector<float> qk(size_t(T) * 2 * dqk), gg(size_t(T) * c.Hv), beta(size_t(T) * c.Hv);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < dqk; ++i) qk[t * 2 * dqk + i] = q.f[t * ld + i], qk[t * 2 * dqk + dqk + i] = k.f[t * ld + i];
    ops::GdnParams p{c.Hk, c.Hv, c.dk, c.dv, A_log.data(), dt_bias.data(), 1e-6f};
    ops::cpu::gdn_prepare(p, qk.data(), qk.data() + dqk, 2 * dqk, ab.f.data(), 2 * c.Hv, ab.f.data() + c.Hv,
                          2 * c.Hv, T, gg.data(), beta.data());
    std::vector<float> want_q(size_t(T) * dqk), want_k(size_t(T) * dqk);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < dqk; ++i) want_q[t * dqk + i] = qk[t * 2 * dqk + i], want_k[t * dqk + i] = qk[t * 2 * dqk + dqk + i];
    EXPECT_TRUE(test::bf16_close(c.in_place ? dq.get() : dqo.get(), want_q)) << "q";
    EXPECT_TRUE(test::bf16_close(c.in_place ? dk_.get() : dko.get(), want_k)) << "k";
    EXPECT_TRUE(test::f32_close(dgg.get(), gg, 2e-6f)) << "g";
    EXPECT_TRUE(test::f32_close(dbeta.get(), beta, 2e-6f)) << "beta";
  }
}

// Runs without a GPU: every refusal comes before the device is touched.
TEST(ElementwiseCudaArgs, BadShapesAreRefused) {
  uint16_t* p = reinterpret_cast<uint16_t*>(16);  // never dereferenced: refused first
  float* f = reinterpret_cast<float*>(16);
  using ops::cuda::mlp_activation_cuda;
  EXPECT_EQ(mlp_activation_cuda(static_cast<Activation>(9), nullptr, 0, p, 8, 2, 8, p, 8, nullptr),
            cudaErrorInvalidValue);  // no such activation
  EXPECT_EQ(mlp_activation_cuda(Activation::kSilu, p, 7, p, 8, 2, 8, p, 8, nullptr), cudaErrorInvalidValue);  // ldg
  EXPECT_EQ(mlp_activation_cuda(Activation::kSilu, nullptr, 0, p, 8, 2, 8, p, 7, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(mlp_activation_cuda(Activation::kRelu2, nullptr, 0, nullptr, 8, 2, 8, p, 8, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(mlp_activation_cuda(Activation::kRelu2, nullptr, 0, p, 8, 0, 8, p, 8, nullptr), cudaSuccess);  // no rows

  ops::cuda::GdnPrepareArgs a;
  a.rows = 2, a.Hk = 2, a.Hv = 6, a.dk = 8, a.A_log = f, a.dt_bias = f, a.q = p, a.k = p, a.ldq = 40, a.ldk = 40;
  a.a = p, a.b = p, a.lda = 12, a.ldb = 12, a.q_out = p + 100, a.k_out = p + 200, a.g = f, a.beta = f;
  a.Hv = 5;  // not a multiple of Hk
  EXPECT_EQ(ops::cuda::gdn_prepare_cuda(a, nullptr), cudaErrorInvalidValue);
  a.Hv = 6, a.ldq = 15;  // ldq < Hk·dk
  EXPECT_EQ(ops::cuda::gdn_prepare_cuda(a, nullptr), cudaErrorInvalidValue);
  a.ldq = 40, a.q_out = p;  // in place needs dense rows
  EXPECT_EQ(ops::cuda::gdn_prepare_cuda(a, nullptr), cudaErrorInvalidValue);
  a.q_out = p + 100, a.beta = nullptr;
  EXPECT_EQ(ops::cuda::gdn_prepare_cuda(a, nullptr), cudaErrorInvalidValue);
  a.beta = f, a.lda = 5;
  EXPECT_EQ(ops::cuda::gdn_prepare_cuda(a, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace replayssm
