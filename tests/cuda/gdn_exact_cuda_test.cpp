// Gated DeltaNet exact replay (GdnDecodeArgs::exact) against the standard
// step on the same device, bit for bit. The replay is driven as the
// backend drives it: a log per sequence that grows by the step's tokens
// (1 to 3), its u written by the kernel, folds of every old entry or some
// of them (into the checkpoint or another slot), the rest moved to the
// log's front. Its outputs must have the bits of gdn_step_cuda stepping one
// token at a time, and every folded checkpoint the bits of the state
// stepping left at that position — for each kernel (streaming at several
// block shapes, column slices). Skipped where no CUDA device exists (CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cuda/gdn_decode.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;
using test::uniform;
using test::unit_rows;

struct Shape {
  int batch, Hk, Hv, dk, dv, W;
  int t_max = 3;  // the calls' tokens cycle 1 .. t_max
};
struct Kernel {
  int variant, slice_cols, tile_rows;
  bool early = false;  // GdnDecodeArgs::early, stepping and replay alike (every call follows a copy)
};

void PrintTo(const std::tuple<Shape, Kernel>& p, std::ostream* os) {
  const Shape s = std::get<0>(p);
  const Kernel k = std::get<1>(p);
  *os << "B" << s.batch << "_Hk" << s.Hk << "_Hv" << s.Hv << "_dk" << s.dk << "_dv" << s.dv << "_W" << s.W;
  if (s.t_max != 3) *os << "_T" << s.t_max;
  if (k.variant == 2) *os << "_sliced";
  else if (k.variant == 3) *os << "_warps";
  else *os << "_streaming" << k.slice_cols << "x" << k.tile_rows;
  if (k.early) *os << "_early";
}

using GdnExactCuda = test::GpuTestWithParam<std::tuple<Shape, Kernel>>;

template <typename T>
void put(T* dst, const std::vector<T>& src) {
  ASSERT_EQ(cudaMemcpy(dst, src.data(), sizeof(T) * src.size(), cudaMemcpyHostToDevice), cudaSuccess);
}

TEST_P(GdnExactCuda, ReplayHasSteppingsBits) {
  const auto [s, kern] = GetParam();
  const int B = s.batch, Hk = s.Hk, Hv = s.Hv, dk = s.dk, dv = s.dv, W = s.W, N = 3 * W;
  const size_t hs = size_t(Hv) * dk * dv;  // one sequence's state
  std::mt19937 g(31 + dk);
  // Every token's inputs, (B, N, ·).
  Bf k = unit_rows(g, size_t(B) * N * Hk, dk, 1.0f), q = unit_rows(g, size_t(B) * N * Hk, dk, 1.0f / std::sqrt(dk)),
     v = test::bf_of(uniform(g, size_t(B) * N * Hv * dv, -1.0f, 1.0f));
  const std::vector<float> gg = uniform(g, size_t(B) * N * Hv, -1.0f, -0.01f);
  const std::vector<float> beta = uniform(g, size_t(B) * N * Hv, 0.05f, 0.95f);
  const std::vector<float> state0 = uniform(g, size_t(B) * hs, -0.3f, 0.3f);
  auto set_kernel = [&](ops::cuda::GdnDecodeArgs& a) {
    a.variant = kern.variant, a.slice_cols = kern.slice_cols, a.tile_rows = kern.tile_rows, a.early = kern.early;
  };

  // The reference: one token a step for the whole batch, in place; the
  // outputs and the state after every token.
  std::vector<uint16_t> o_ref(size_t(B) * N * Hv * dv);
  std::vector<std::vector<float>> state_at(size_t(N) + 1);  // (B, hs) after p tokens
  {
    Dev<float> st(state0), dg(std::vector<float>(size_t(B) * Hv)), db(std::vector<float>(size_t(B) * Hv));
    std::vector<int32_t> slots(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) slots[size_t(b)] = b;
    Dev<int32_t> dslot(slots);
    Dev<uint16_t> dk_(std::vector<uint16_t>(size_t(B) * Hk * dk)), dq(std::vector<uint16_t>(size_t(B) * Hk * dk)),
        dv_(std::vector<uint16_t>(size_t(B) * Hv * dv)), dout(std::vector<uint16_t>(size_t(B) * Hv * dv));
    state_at[0] = state0;
    for (int p = 0; p < N; ++p) {
      std::vector<uint16_t> kk, qq, vv;
      std::vector<float> g1, b1;
      for (int b = 0; b < B; ++b) {
        const size_t r = size_t(b) * N + p;
        kk.insert(kk.end(), k.bits.begin() + r * Hk * dk, k.bits.begin() + (r + 1) * Hk * dk);
        qq.insert(qq.end(), q.bits.begin() + r * Hk * dk, q.bits.begin() + (r + 1) * Hk * dk);
        vv.insert(vv.end(), v.bits.begin() + r * Hv * dv, v.bits.begin() + (r + 1) * Hv * dv);
        g1.insert(g1.end(), gg.begin() + r * Hv, gg.begin() + (r + 1) * Hv);
        b1.insert(b1.end(), beta.begin() + r * Hv, beta.begin() + (r + 1) * Hv);
      }
      put(dk_.p, kk), put(dq.p, qq), put(dv_.p, vv), put(dg.p, g1), put(db.p, b1);
      ops::cuda::GdnDecodeArgs a;
      a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = 1;
      a.state = st.p, a.slot = dslot.p, a.out_slot = dslot.p, a.q = dq.p, a.k = dk_.p, a.v = dv_.p, a.g = dg.p;
      a.beta = db.p, a.o = dout.p;
      set_kernel(a);
      ASSERT_EQ(ops::cuda::gdn_step_cuda(a, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<uint16_t> o = dout.get();
      for (int b = 0; b < B; ++b)
        std::copy(o.begin() + size_t(b) * Hv * dv, o.begin() + size_t(b + 1) * Hv * dv,
                  o_ref.begin() + (size_t(b) * N + p) * Hv * dv);
      state_at[size_t(p) + 1] = st.get();
    }
  }

  // Exact replay: checkpoints in slots 2b and 2b + 1, logs mirrored here.
  std::vector<float> ck(size_t(2 * B) * hs);
  for (int b = 0; b < B; ++b) std::copy(state0.begin() + b * hs, state0.begin() + (b + 1) * hs, ck.begin() + 2 * b * hs);
  Dev<float> dstate(ck), du(std::vector<float>(size_t(B) * W * Hv * dv)), dlg(std::vector<float>(size_t(B) * W * Hv));
  Dev<uint16_t> dlk(std::vector<uint16_t>(size_t(B) * W * Hk * dk));
  std::vector<uint16_t> log_k(size_t(B) * W * Hk * dk);
  std::vector<float> log_g(size_t(B) * W * Hv), log_u(size_t(B) * W * Hv * dv);
  std::vector<int> count(static_cast<size_t>(B), 0), ck_pos(static_cast<size_t>(B), 0), slot(static_cast<size_t>(B));
  for (int b = 0; b < B; ++b) slot[size_t(b)] = 2 * b;
  int pos = 0, folds = 0, partial = 0, calls = 0;
  while (pos < N) {
    const int T = std::min(N - pos, 1 + calls % s.t_max);
    std::vector<int32_t> n_log(static_cast<size_t>(B)), fold(static_cast<size_t>(B)), fold_slot(static_cast<size_t>(B)), slots(static_cast<size_t>(B));
    std::vector<uint16_t> qq, vv;
    std::vector<float> b1;
    for (int b = 0; b < B; ++b) {
      const int c = count[size_t(b)];
      ASSERT_LE(c + T, W);
      for (int t = 0; t < T; ++t) {  // the new tokens' k and g go on the log, as the append does
        const size_t r = size_t(b) * N + pos + t, e = size_t(b) * W + c + t;
        std::copy(k.bits.begin() + r * Hk * dk, k.bits.begin() + (r + 1) * Hk * dk, log_k.begin() + e * Hk * dk);
        std::copy(gg.begin() + r * Hv, gg.begin() + (r + 1) * Hv, log_g.begin() + e * Hv);
        qq.insert(qq.end(), q.bits.begin() + r * Hk * dk, q.bits.begin() + (r + 1) * Hk * dk);
        vv.insert(vv.end(), v.bits.begin() + r * Hv * dv, v.bits.begin() + (r + 1) * Hv * dv);
        b1.insert(b1.end(), beta.begin() + r * Hv, beta.begin() + (r + 1) * Hv);
      }
      n_log[size_t(b)] = c + T;
      // Fold every old entry where the next step (up to t_max tokens) would
      // not fit; sequence 1, every other call, only what it must or half.
      const int need = c + T + s.t_max - W;
      fold[size_t(b)] = b == 1 && calls % 2 == 1 && c >= 2 ? std::max(need, c / 2) : need > 0 ? c : 0;
      slots[size_t(b)] = slot[size_t(b)];
      fold_slot[size_t(b)] = b % 2 == 0 ? slot[size_t(b)] : slot[size_t(b)] ^ 1;  // in place, or the other slot
    }
    put(dlk.p, log_k), put(dlg.p, log_g), put(du.p, log_u);
    Dev<int32_t> dn(n_log), dfold(fold), dfs(fold_slot), dslot(slots);
    Dev<uint16_t> dq(qq), dv_(vv), dout(std::vector<uint16_t>(size_t(B) * T * Hv * dv));
    Dev<float> db(b1);
    ops::cuda::GdnDecodeArgs a;
    a.batch = B, a.Hk = Hk, a.Hv = Hv, a.dk = dk, a.dv = dv, a.T = T, a.W = W, a.exact = true;
    a.state = dstate.p, a.slot = dslot.p, a.q = dq.p, a.v = dv_.p, a.beta = db.p, a.o = dout.p;
    a.n_log = dn.p, a.log_k = dlk.p, a.log_u = du.p, a.log_g = dlg.p;
    a.fold = dfold.p, a.fold_slot = dfs.p, a.max_fold = W;
    set_kernel(a);
    ASSERT_EQ(ops::cuda::gdn_replay_cuda(a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint16_t> o = dout.get();
    const std::vector<float> now = dstate.get();
    log_u = du.get();
    for (int b = 0; b < B; ++b) {
      const size_t n = size_t(Hv) * dv;
      for (int t = 0; t < T; ++t)
        ASSERT_EQ(std::memcmp(o.data() + (size_t(b) * T + t) * n, o_ref.data() + (size_t(b) * N + pos + t) * n, n * 2), 0)
            << "outputs of sequence " << b << " at position " << pos + t << " differ from stepping";
      const int f = fold[size_t(b)];
      if (f == 0) continue;
      ck_pos[size_t(b)] += f;
      ASSERT_EQ(std::memcmp(now.data() + size_t(fold_slot[size_t(b)]) * hs,
                            state_at[size_t(ck_pos[size_t(b)])].data() + size_t(b) * hs, hs * 4),
                0)
          << "sequence " << b << "'s fold of " << f << " (checkpoint at " << ck_pos[size_t(b)]
          << ") differs from stepping";
      ++folds, partial += f < count[size_t(b)];
      slot[size_t(b)] = fold_slot[size_t(b)];
      // The entries after the fold move to the log's front.
      const int rest = count[size_t(b)] + T - f;
      auto move = [&](auto& arr, size_t width) {
        const size_t e0 = size_t(b) * W;
        std::copy(arr.begin() + (e0 + f) * width, arr.begin() + (e0 + f + rest) * width, arr.begin() + e0 * width);
      };
      move(log_k, size_t(Hk) * dk), move(log_g, size_t(Hv)), move(log_u, size_t(Hv) * dv);
      count[size_t(b)] = rest - T;  // the step's own entries are added below
    }
    for (int b = 0; b < B; ++b) count[size_t(b)] += T;
    pos += T, ++calls;
  }
  EXPECT_GT(folds, B);
  EXPECT_GT(partial, 0);
}

const auto kShapes = ::testing::Values(Shape{3, 2, 6, 12, 10, 8},        // odd sizes, generic tile
                                       Shape{3, 1, 3, 24, 40, 9},        // odd sizes
                                       Shape{2, 2, 2, 200, 70, 6},       // tall keys, partial slice
                                       Shape{2, 16, 32, 128, 128, 16});  // Qwen3-Next
INSTANTIATE_TEST_SUITE_P(Shapes, GdnExactCuda,
                         ::testing::Combine(kShapes, ::testing::Values(Kernel{1, 0, 0}, Kernel{1, 64, 4},
                                                                       Kernel{1, 128, 8}, Kernel{2, 0, 0})));
// The register-resident warps (variant 3) where they apply, dk ≤ 128: odd
// values (the scalar path), dk % 8 ≠ 0 at 8 and 16 rows a lane, verifies
// of up to 8 tokens, and a batch of several waves.
INSTANTIATE_TEST_SUITE_P(Warps, GdnExactCuda,
                         ::testing::Combine(::testing::Values(Shape{3, 2, 6, 12, 10, 8}, Shape{3, 1, 3, 24, 40, 9},
                                                              Shape{2, 1, 2, 37, 52, 7}, Shape{2, 1, 2, 100, 36, 24, 8},
                                                              Shape{2, 16, 32, 128, 128, 16},
                                                              Shape{2, 16, 32, 128, 128, 24, 8},
                                                              Shape{12, 16, 32, 128, 128, 16}),
                                            ::testing::Values(Kernel{3, 0, 0}, Kernel{3, 0, 0, true})));

}  // namespace
}  // namespace replayssm
