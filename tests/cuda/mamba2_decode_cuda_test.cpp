// CUDA Mamba2 decode kernels against the CPU reference (one parity test per
// kernel): odd and real sizes, valid-domain inputs (A < 0, dt > 0),
// permuted state slots; outputs (bf16) and states (fp32) both checked.
// Skipped where no CUDA device exists (CI); run on the H200 by
// scripts/gpu_check.sh.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/dtype.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/mamba2_scan.h"
#include "ops/cuda/mamba2_decode.h"

namespace replayssm {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(T) * std::max<size_t>(n, 1)), cudaSuccess);
    if (n) EXPECT_EQ(cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// Values that bf16 represents exactly, as fp32 and as bf16 bits.
struct Bf {
  std::vector<float> f;
  std::vector<uint16_t> bits;
};
Bf bf_rand(std::mt19937& g, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  Bf r;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t b = f32_to_bf16(d(g));
    r.bits.push_back(b);
    r.f.push_back(bf16_to_f32(b));
  }
  return r;
}

struct Shape {
  int batch, H, P, N, G, W;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << "B" << s.batch << "_H" << s.H << "_P" << s.P << "_N" << s.N << "_G" << s.G << "_W" << s.W;
}

class Mamba2Cuda : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// One sequence's data on the host: checkpoint, log of n_log tokens, a new token.
TEST_P(Mamba2Cuda, StepReplayAndFlushMatchTheCpuReference) {
  const Shape s = GetParam();
  const int B = s.batch, H = s.H, P = s.P, N = s.N, G = s.G, W = s.W;
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A_log(H), Dv(H), dt_bias(H);
  for (int h = 0; h < H; ++h) A_log[h] = 0.5f * u(g), Dv[h] = u(g), dt_bias[h] = u(g) - 1.0f;
  const int slots = 2 * B + 1;
  std::vector<int32_t> slot(B), n_log(B);
  for (int b = 0; b < B; ++b) slot[b] = (b * 3 + 1) % slots, n_log[b] = b % (W + 1);  // permuted, distinct
  std::vector<float> state(static_cast<size_t>(slots) * H * P * N);
  for (float& x : state) x = 0.3f * u(g);
  Bf x = bf_rand(g, size_t(B) * H * P, 1.0f), Bm = bf_rand(g, size_t(B) * G * N, 1.0f),
     Cm = bf_rand(g, size_t(B) * G * N, 1.0f), lx = bf_rand(g, size_t(B) * W * H * P, 1.0f),
     lB = bf_rand(g, size_t(B) * W * G * N, 1.0f);
  std::vector<float> dt_raw(size_t(B) * H), log_dt(size_t(B) * W * H);
  for (float& v : dt_raw) v = u(g);
  for (float& v : log_dt) v = ops::softplus(u(g) - 1.0f);  // post-softplus, as logged

  Dev<float> dA(A_log), dD(Dv), dbias(dt_bias), dstate(state), ddt(dt_raw), dlogdt(log_dt);
  Dev<int32_t> dslot(slot), dn(n_log);
  Dev<uint16_t> dx(x.bits), dB(Bm.bits), dC(Cm.bits), dlx(lx.bits), dlB(lB.bits), dy(std::vector<uint16_t>(size_t(B) * H * P));
  ops::cuda::Mamba2DecodeArgs a;
  a.batch = B, a.H = H, a.P = P, a.N = N, a.G = G, a.W = W;
  a.A_log = dA.p, a.D = dD.p, a.dt_bias = dbias.p, a.state = dstate.p, a.slot = dslot.p;
  a.x = dx.p, a.Bm = dB.p, a.Cm = dC.p, a.dt_raw = ddt.p, a.y = dy.p;
  a.n_log = dn.p, a.log_x = dlx.p, a.log_B = dlB.p, a.log_dt = dlogdt.p;

  const ops::Mamba2Params cp{H, P, N, G, A_log.data(), Dv.data(), dt_bias.data(), 0.0f, INFINITY};
  auto close = [](float got, float want, float tol) { return std::abs(got - want) <= tol * (1.0f + std::abs(want)); };

  // Replay: y from checkpoint + log + new token, state untouched.
  ASSERT_EQ(ops::cuda::mamba2_replay_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> y_replay = dy.get();
  EXPECT_EQ(dstate.get(), state) << "replay must not write the checkpoint";
  // Flush: fold the log into the checkpoint.
  ASSERT_EQ(ops::cuda::mamba2_flush_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> flushed = dstate.get();
  // Standard step on the flushed states: y must equal replay's y.
  ASSERT_EQ(ops::cuda::mamba2_step_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> y_step = dy.get();
  std::vector<float> stepped = dstate.get();

  for (int b = 0; b < B; ++b) {
    // CPU: the log as raw scan inputs. A logged dt is post-softplus; feed
    // the scan a raw dt whose softplus(raw + bias) is it: use bias 0 rows.
    const size_t ss = size_t(slot[b]) * H * P * N;
    std::vector<float> S(state.begin() + ss, state.begin() + ss + size_t(H) * P * N);
    std::vector<float> zero_bias(H, 0.0f), yy(size_t(H) * P);
    const ops::Mamba2Params raw{H, P, N, G, A_log.data(), Dv.data(), zero_bias.data(), 0.0f, INFINITY};
    for (int e = 0; e < n_log[b]; ++e) {
      std::vector<float> dtr(H);
      for (int h = 0; h < H; ++h) {
        const float d = log_dt[(size_t(b) * W + e) * H + h];
        dtr[h] = std::log(std::expm1(d));  // softplus⁻¹
      }
      ops::cpu::mamba2_scan(raw, S.data(), lx.f.data() + (size_t(b) * W + e) * H * P, H * P,
                            lB.f.data() + (size_t(b) * W + e) * G * N, lB.f.data() + (size_t(b) * W + e) * G * N,
                            G * N, dtr.data(), H, 1, yy.data(), H * P);
    }
    for (size_t i = 0; i < S.size(); ++i)
      ASSERT_TRUE(close(flushed[ss + i], S[i], 2e-4f)) << "flush b " << b << " i " << i << ": " << flushed[ss + i] << " vs " << S[i];
    ops::cpu::mamba2_scan(cp, S.data(), x.f.data() + size_t(b) * H * P, H * P, Bm.f.data() + size_t(b) * G * N,
                          Cm.f.data() + size_t(b) * G * N, G * N, dt_raw.data() + size_t(b) * H, H, 1, yy.data(), H * P);
    for (size_t i = 0; i < S.size(); ++i)
      ASSERT_TRUE(close(stepped[ss + i], S[i], 2e-4f)) << "step state b " << b << " i " << i;
    for (int i = 0; i < H * P; ++i) {
      const float want = yy[i];
      ASSERT_TRUE(close(bf16_to_f32(y_step[size_t(b) * H * P + i]), want, 1.6e-2f)) << "step y b " << b << " i " << i;
      ASSERT_TRUE(close(bf16_to_f32(y_replay[size_t(b) * H * P + i]), want, 1.6e-2f))
          << "replay y b " << b << " i " << i << ": " << bf16_to_f32(y_replay[size_t(b) * H * P + i]) << " vs " << want;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba2Cuda,
                         ::testing::Values(Shape{3, 6, 5, 11, 3, 4},        // odd sizes, scalar path
                                           Shape{5, 8, 16, 128, 2, 16},     // vector path
                                           Shape{2, 128, 64, 128, 8, 16})); // Nemotron-H-8B

}  // namespace
}  // namespace replayssm
