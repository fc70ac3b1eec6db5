// CUDA chunk scans (mamba2_scan_cuda, gdn_scan_cuda) against the CPU
// reference recurrences: odd and real sizes (every register tile), chunks
// shorter and longer than a shared-memory tile of tokens, strided rows as
// the backend passes them, permuted slots written in place and elsewhere,
// and replay's log applied before the chunk (none, some, a full window);
// ragged rows (cu_rows) bit for bit against each sequence's own scan.
// Outputs (bf16) and states (fp32) checked, the slot read left untouched
// where the state goes elsewhere; the Mamba2 scan also bit for bit against
// T one-token steps of mamba2_step_cuda. Skipped where no CUDA device
// exists (CI); the refusals run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/gdn_scan.h"
#include "ops/cpu/mamba2_scan.h"
#include "ops/cpu/ssm_step.h"
#include "ops/cuda/gdn_scan.h"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/mamba2_scan.h"

namespace replayssm {
namespace {

using test::Bf;
using test::close;
using test::Dev;
using test::uniform;
using test::unit_rows;


// Sequence b reads slot 2b + 1 and writes it in place (b % 3 == 0) or to 2b;
// its log holds a spread of lengths 0..W.
struct Slots {
  std::vector<int32_t> slot, out, n_log;
  Slots(int B, int W) {
    for (int b = 0; b < B; ++b) {
      slot.push_back(2 * b + 1), out.push_back(b % 3 == 0 ? 2 * b + 1 : 2 * b);
      n_log.push_back(b % 4 == 1 ? 0 : b % 4 == 2 ? W : (3 * b + 1) % (W + 1));
    }
  }
};

// A ragged step's rows: sequence b takes the first count[b] of its T rows
// (all, none, about half, one, by b % 4), packed one sequence after
// another from cu[b].
struct Ragged {
  std::vector<int32_t> count, cu{0};
  Ragged(int B, int T) {
    for (int b = 0; b < B; ++b) {
      count.push_back(b % 4 == 0 ? T : b % 4 == 1 ? 0 : b % 4 == 2 ? std::max(1, T / 2) : 1);
      cu.push_back(cu.back() + count.back());
    }
  }
  // The ragged tests' cases: without a log; replay's log first; and with
  // the one-row sequences left aside (n_rows, below).
  struct Case {
    bool with_log, aside;
    const char* name;
  };
  static constexpr Case kCases[] = {{false, false, "no log"},
                                    {true, false, "replay: the log first"},
                                    {true, true, "replay: the log first, one-row sequences left to the decode kernels"}};
  // The scan's rows of each sequence (Mamba2ScanArgs::n_rows): all of its
  // rows, or (aside) none for a sequence of one row — a ragged step's
  // decoding sequence, which the decode kernels take.
  std::vector<int32_t> taken(bool aside) const {
    std::vector<int32_t> n = count;
    for (int32_t& c : n)
      if (aside && c == 1) c = 0;
    return n;
  }
  // A sequence the scan took no rows of has both its slots as they were (hs floats a slot).
  void expect_untouched(const Slots& sl, const std::vector<float>& before, const std::vector<float>& after,
                        int64_t hs, const std::vector<int32_t>& n) const {
    for (size_t b = 0; b < count.size(); ++b)
      if (n[b] == 0)
        for (int32_t slot : {sl.slot[b], sl.out[b]})
          EXPECT_TRUE(std::equal(after.begin() + slot * hs, after.begin() + (slot + 1) * hs, before.begin() + slot * hs))
              << "sequence " << b << " took no rows but slot " << slot << " changed";
  }
  // Rows of width w (row stride ld) of the dense layout b·T + t, packed.
  template <typename E>
  std::vector<E> pack(const std::vector<E>& dense, int T, int64_t ld) const {
    std::vector<E> out;
    for (size_t b = 0; b < count.size(); ++b) {
      const auto from = dense.begin() + int64_t(b) * T * ld;
      out.insert(out.end(), from, from + int64_t(count[b]) * ld);
    }
    return out;
  }
};

// ---- Mamba2 ----

struct MShape {
  int batch, H, P, N, G, T, W, tile_rows = 0;
};
void PrintTo(const MShape& s, std::ostream* os) {
  *os << "B" << s.batch << "_H" << s.H << "_P" << s.P << "_N" << s.N << "_G" << s.G << "_T" << s.T << "_W" << s.W
      << (s.tile_rows ? "_rows" + std::to_string(s.tile_rows) : "");
}

// One random Mamba2 chunk in the backend's layout: rows of x | B | C (plus
// padding, so the row stride is not the width) and raw dt beside them.
struct MCase {
  MShape s;
  int64_t ld, lddt;
  std::vector<float> A_log, D, dt_bias, state, log_dt;
  Bf xbc, dt_raw, log_x, log_B;
  Slots sl;
  float dt_min = 0.01f, dt_max = 1.5f;
  explicit MCase(const MShape& sh) : s(sh), sl(sh.batch, sh.W) {
    std::mt19937 g(11 + s.T + s.N);
    const int64_t HP = int64_t(s.H) * s.P, GN = int64_t(s.G) * s.N, rows = int64_t(s.batch) * s.T;
    ld = HP + 2 * GN + 8, lddt = s.H + 3;
    A_log = uniform(g, size_t(s.H), -1.0f, 1.0f), D = uniform(g, size_t(s.H), -1.0f, 1.0f);
    dt_bias = uniform(g, size_t(s.H), -1.0f, 0.5f);
    state = uniform(g, size_t(2 * s.batch + 1) * HP * s.N, -0.3f, 0.3f);
    xbc = test::bf_rand(g, size_t(rows * ld), 1.0f);
    dt_raw = test::bf_of(uniform(g, size_t(rows * lddt), -4.0f, 3.0f));  // both clamps reached
    log_x = test::bf_rand(g, size_t(s.batch) * s.W * HP, 1.0f), log_B = test::bf_rand(g, size_t(s.batch) * s.W * GN, 1.0f);
    log_dt = uniform(g, size_t(s.batch) * s.W * s.H, 0.02f, 0.8f);
  }
};

struct MDev {
  Dev<float> A_log, D, bias, state, log_dt;
  Dev<uint16_t> xbc, dt_raw, log_x, log_B, y;
  Dev<int32_t> slot, out, n_log;
  ops::cuda::Mamba2ScanArgs a;
  MDev(const MCase& c, bool with_log)
      : A_log(c.A_log), D(c.D), bias(c.dt_bias), state(c.state), log_dt(c.log_dt), xbc(c.xbc.bits), dt_raw(c.dt_raw.bits),
        log_x(c.log_x.bits), log_B(c.log_B.bits),
        y(std::vector<uint16_t>(size_t(c.s.batch) * c.s.T * c.s.H * c.s.P)), slot(c.sl.slot), out(c.sl.out),
        n_log(c.sl.n_log) {
    const MShape& s = c.s;
    const int64_t HP = int64_t(s.H) * s.P, GN = int64_t(s.G) * s.N;
    a.batch = s.batch, a.H = s.H, a.P = s.P, a.N = s.N, a.G = s.G, a.T = s.T, a.tile_rows = s.tile_rows;
    a.A_log = A_log.p, a.D = D.p, a.dt_bias = bias.p, a.dt_min = c.dt_min, a.dt_max = c.dt_max;
    a.state = state.p, a.slot = slot.p, a.out_slot = out.p;
    a.x = xbc.p, a.ldx = c.ld, a.Bm = xbc.p + HP, a.Cm = xbc.p + HP + GN, a.ldbc = c.ld;
    a.dt_raw = dt_raw.p, a.lddt = c.lddt, a.y = y.p, a.ldy = HP;
    if (with_log) a.W = s.W, a.n_log = n_log.p, a.log_x = log_x.p, a.log_B = log_B.p, a.log_dt = log_dt.p;
  }
};

using Mamba2ScanCuda = test::GpuTestWithParam<MShape>;

TEST_P(Mamba2ScanCuda, MatchesTheCpuScanAfterTheLog) {
  const MCase c(GetParam());
  const MShape& s = c.s;
  for (bool with_log : {false, true}) {
    SCOPED_TRACE(with_log ? "replay: the log first" : "no log");
    MDev d(c, with_log);
    ASSERT_EQ(ops::cuda::mamba2_scan_cuda(d.a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint16_t> y = d.y.get();
    const std::vector<float> after = d.state.get();
    const int64_t HP = int64_t(s.H) * s.P, GN = int64_t(s.G) * s.N, hs = HP * s.N;
    ops::Mamba2Params p;
    p.n_heads = s.H, p.head_dim = s.P, p.state_size = s.N, p.n_groups = s.G;
    p.A_log = c.A_log.data(), p.D = c.D.data(), p.dt_bias = c.dt_bias.data(), p.dt_min = c.dt_min, p.dt_max = c.dt_max;
    size_t bad_y = 0, bad_s = 0;
    for (int b = 0; b < s.batch; ++b) {
      const size_t in = size_t(c.sl.slot[b]) * hs, out = size_t(c.sl.out[b]) * hs;
      std::vector<float> S(c.state.begin() + int64_t(in), c.state.begin() + int64_t(in + hs));
      if (c.sl.out[b] != c.sl.slot[b])
        ASSERT_TRUE(std::equal(S.begin(), S.end(), after.begin() + int64_t(in))) << "the slot read by " << b << " written";
      for (int e = 0; with_log && e < c.sl.n_log[b]; ++e) {
        const size_t le = size_t(b) * s.W + e;
        for (int h = 0; h < s.H; ++h) {
          const float dt = c.log_dt[le * s.H + h];
          ops::cpu::mamba2_update_head(S.data() + h * s.P * s.N, s.P, s.N, std::exp(dt * -std::exp(c.A_log[h])), dt,
                                       c.log_B.f.data() + le * GN + (h / (s.H / s.G)) * s.N,
                                       c.log_x.f.data() + le * HP + h * s.P);
        }
      }
      const size_t r0 = size_t(b) * s.T;
      std::vector<float> want(size_t(s.T) * HP);
      const float* rows = c.xbc.f.data() + r0 * c.ld;
      ops::cpu::mamba2_scan(p, S.data(), rows, c.ld, rows + HP, rows + HP + GN, c.ld, c.dt_raw.f.data() + r0 * c.lddt,
                            c.lddt, s.T, want.data(), HP);
      for (size_t i = 0; i < want.size(); ++i)
        bad_y += !close(bf16_to_f32(y[r0 * HP + i]), want[i], test::kBf16Tol);
      for (int64_t i = 0; i < hs; ++i) bad_s += !close(after[out + size_t(i)], S[size_t(i)], test::kStateTol);
    }
    EXPECT_EQ(bad_y, 0u) << "outputs off";
    EXPECT_EQ(bad_s, 0u) << "states off";
  }
}

// The scan's tokens are the step kernel's tokens: the same bits as T
// launches of mamba2_step_cuda, in place, on the same inputs — however
// many tokens' y a warp sums at once.
TEST_P(Mamba2ScanCuda, IsBitIdenticalToOneTokenSteps) {
  const MCase c(GetParam());
  const MShape& s = c.s;
  const int64_t HP = int64_t(s.H) * s.P, GN = int64_t(s.G) * s.N;
  // Token t of every sequence as a step's dense inputs.
  const MDev params(c, false);  // the steps' parameters and slots
  Dev<float> state(c.state);
  Dev<int32_t> out(c.sl.out);
  std::vector<uint16_t> y_steps(size_t(s.batch) * s.T * HP);
  for (int t = 0; t < s.T; ++t) {
    std::vector<uint16_t> x(size_t(s.batch) * HP), Bm(size_t(s.batch) * GN), Cm(size_t(s.batch) * GN);
    std::vector<float> dt(size_t(s.batch) * s.H);
    for (int b = 0; b < s.batch; ++b) {
      const uint16_t* row = c.xbc.bits.data() + (size_t(b) * s.T + t) * c.ld;
      std::copy(row, row + HP, x.begin() + b * HP);
      std::copy(row + HP, row + HP + GN, Bm.begin() + b * GN);
      std::copy(row + HP + GN, row + HP + 2 * GN, Cm.begin() + b * GN);
      for (int h = 0; h < s.H; ++h) dt[size_t(b) * s.H + h] = c.dt_raw.f[(size_t(b) * s.T + t) * c.lddt + h];
    }
    Dev<uint16_t> dx(x), dB(Bm), dC(Cm), dy(std::vector<uint16_t>(size_t(s.batch) * HP));
    Dev<float> ddt(dt);
    ops::cuda::Mamba2DecodeArgs a;
    a.batch = s.batch, a.H = s.H, a.P = s.P, a.N = s.N, a.G = s.G, a.T = 1;  // its own rows a warp: the same bits
    a.A_log = params.A_log.p, a.D = params.D.p, a.dt_bias = params.bias.p, a.dt_min = c.dt_min, a.dt_max = c.dt_max;
    a.state = state.p, a.slot = t == 0 ? params.slot.p : out.p, a.out_slot = out.p;
    a.x = dx.p, a.Bm = dB.p, a.Cm = dC.p, a.dt_raw = ddt.p, a.y = dy.p;
    ASSERT_EQ(ops::cuda::mamba2_step_cuda(a, nullptr), cudaSuccess);
    const std::vector<uint16_t> yt = dy.get();
    for (int b = 0; b < s.batch; ++b)
      std::copy(yt.begin() + b * HP, yt.begin() + (b + 1) * HP, y_steps.begin() + (int64_t(b) * s.T + t) * HP);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> stepped = state.get();
  const int64_t hs = HP * s.N;
  for (int per_sum : {1, 2}) {
    SCOPED_TRACE("tokens_per_sum " + std::to_string(per_sum));
    MDev d(c, false);
    d.a.tokens_per_sum = per_sum;
    ASSERT_EQ(ops::cuda::mamba2_scan_cuda(d.a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d.y.get(), y_steps);
    const std::vector<float> scanned = d.state.get();
    for (int b = 0; b < s.batch; ++b) {
      const int64_t o = int64_t(c.sl.out[b]) * hs;
      EXPECT_TRUE(std::equal(scanned.begin() + o, scanned.begin() + o + hs, stepped.begin() + o)) << "state of " << b;
    }
  }
}

// A ragged chunk (cu_rows) is each sequence's own chunk: the bits of a
// one-sequence scan of its rows, from its slot, after its log; a sequence
// with no rows leaves its slots untouched (its log unapplied).
TEST_P(Mamba2ScanCuda, RaggedRowsAreEachSequencesOwnChunk) {
  const MCase c(GetParam());
  const MShape& s = c.s;
  const Ragged rg(s.batch, s.T);
  const int64_t HP = int64_t(s.H) * s.P, GN = int64_t(s.G) * s.N, hs = HP * s.N, rows = rg.cu.back();
  Dev<uint16_t> xbc(rg.pack(c.xbc.bits, s.T, c.ld)), dt_raw(rg.pack(c.dt_raw.bits, s.T, c.lddt));
  Dev<int32_t> cu(rg.cu);
  for (const Ragged::Case& rc : Ragged::kCases) {
    const bool with_log = rc.with_log, aside = rc.aside;
    SCOPED_TRACE(rc.name);
    const std::vector<int32_t> n = rg.taken(aside);
    Dev<int32_t> n_rows(n);
    auto packed = [&](ops::cuda::Mamba2ScanArgs& a, int64_t r0, uint16_t* y) {
      a.x = xbc.p + r0 * c.ld, a.Bm = a.x + HP, a.Cm = a.x + HP + GN, a.dt_raw = dt_raw.p + r0 * c.lddt, a.y = y;
    };
    MDev d(c, with_log);
    Dev<uint16_t> y(std::vector<uint16_t>(size_t(rows * HP)));
    packed(d.a, 0, y.p);
    d.a.cu_rows = cu.p;
    if (aside) d.a.n_rows = n_rows.p;
    ASSERT_EQ(ops::cuda::mamba2_scan_cuda(d.a, nullptr), cudaSuccess);
    MDev ref(c, with_log);  // one sequence at a time
    Dev<uint16_t> y_ref(std::vector<uint16_t>(size_t(rows * HP)));
    for (int b = 0; b < s.batch; ++b) {
      if (n[size_t(b)] == 0) continue;
      ops::cuda::Mamba2ScanArgs a = ref.a;
      a.batch = 1, a.T = rg.count[size_t(b)], a.slot = ref.slot.p + b, a.out_slot = ref.out.p + b;
      packed(a, rg.cu[size_t(b)], y_ref.p + rg.cu[size_t(b)] * HP);
      if (with_log)
        a.n_log = ref.n_log.p + b, a.log_x = ref.log_x.p + b * s.W * HP, a.log_B = ref.log_B.p + b * s.W * GN,
        a.log_dt = ref.log_dt.p + b * s.W * s.H;
      ASSERT_EQ(ops::cuda::mamba2_scan_cuda(a, nullptr), cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(y.get(), y_ref.get());
    const std::vector<float> after = d.state.get();
    EXPECT_EQ(after, ref.state.get());
    rg.expect_untouched(c.sl, c.state, after, hs, n);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba2ScanCuda,
                         ::testing::Values(MShape{3, 4, 37, 16, 2, 45, 8},       // scalar tile, two token tiles
                                           MShape{2, 8, 64, 128, 1, 70, 16},     // 8B's tile, three token tiles
                                           MShape{5, 6, 20, 256, 3, 33, 5},      // the widest tile
                                           MShape{2, 4, 24, 128, 2, 9, 4, 2},    // two rows a warp
                                           MShape{4, 2, 5, 7, 1, 1, 3}),         // one token, tiny heads
                         [](const auto& i) {
                           std::ostringstream os;
                           PrintTo(i.param, &os);
                           return os.str();
                         });

// ---- Gated DeltaNet ----

struct GShape {
  int batch, Hk, Hv, dk, dv, T, W;
};
void PrintTo(const GShape& s, std::ostream* os) {
  *os << "B" << s.batch << "_Hk" << s.Hk << "_Hv" << s.Hv << "_dk" << s.dk << "_dv" << s.dv << "_T" << s.T << "_W" << s.W;
}


// One random Gated DeltaNet chunk (rows b·T + t, dense) and its logs.
struct GCase {
  GShape s;
  Slots sl;
  std::vector<float> state, g, beta, lu, lg;
  Bf q, k, v, lk;
  explicit GCase(const GShape& sh) : s(sh), sl(sh.batch, sh.W) {
    std::mt19937 gen(3 + s.T + s.dk);
    const int64_t hs = int64_t(s.dk) * s.dv, rows = int64_t(s.batch) * s.T;
    state = uniform(gen, size_t(2 * s.batch + 1) * s.Hv * hs, -0.3f, 0.3f);
    q = unit_rows(gen, size_t(rows) * s.Hk, s.dk, 1.0f / std::sqrt(float(s.dk))), k = unit_rows(gen, size_t(rows) * s.Hk, s.dk, 1.0f);
    v = test::bf_of(uniform(gen, size_t(rows) * s.Hv * s.dv, -1.0f, 1.0f));
    g = uniform(gen, size_t(rows) * s.Hv, -1.5f, -0.01f), beta = uniform(gen, size_t(rows) * s.Hv, 0.05f, 0.95f);
    lk = unit_rows(gen, size_t(s.batch) * s.W * s.Hk, s.dk, 1.0f);
    lu = uniform(gen, size_t(s.batch) * s.W * s.Hv * s.dv, -0.5f, 0.5f), lg = uniform(gen, size_t(s.batch) * s.W * s.Hv, -1.0f, -0.01f);
  }
};

// A GCase on the device, and the scan's arguments over it (rows as given:
// the dense ones, or packed by a Ragged).
struct GDev {
  Dev<float> state, g, beta, lu, lg;
  Dev<uint16_t> q, k, v, lk, o;
  Dev<int32_t> slot, out, n_log;
  ops::cuda::GdnScanArgs a;
  GDev(const GCase& c, bool with_log, const Ragged* rg = nullptr)
      : state(c.state), g(rg ? rg->pack(c.g, c.s.T, c.s.Hv) : c.g), beta(rg ? rg->pack(c.beta, c.s.T, c.s.Hv) : c.beta),
        lu(c.lu), lg(c.lg), q(rg ? rg->pack(c.q.bits, c.s.T, int64_t(c.s.Hk) * c.s.dk) : c.q.bits),
        k(rg ? rg->pack(c.k.bits, c.s.T, int64_t(c.s.Hk) * c.s.dk) : c.k.bits),
        v(rg ? rg->pack(c.v.bits, c.s.T, int64_t(c.s.Hv) * c.s.dv) : c.v.bits), lk(c.lk.bits),
        o(std::vector<uint16_t>(size_t(rg ? rg->cu.back() : int64_t(c.s.batch) * c.s.T) * c.s.Hv * c.s.dv)),
        slot(c.sl.slot), out(c.sl.out), n_log(c.sl.n_log) {
    const GShape& s = c.s;
    a.batch = s.batch, a.Hk = s.Hk, a.Hv = s.Hv, a.dk = s.dk, a.dv = s.dv, a.T = s.T;
    a.state = state.p, a.slot = slot.p, a.out_slot = out.p;
    a.q = q.p, a.k = k.p, a.v = v.p, a.g = g.p, a.beta = beta.p, a.o = o.p;
    if (with_log) a.W = s.W, a.n_log = n_log.p, a.log_k = lk.p, a.log_u = lu.p, a.log_g = lg.p;
  }
};

using GdnScanCuda = test::GpuTestWithParam<GShape>;

TEST_P(GdnScanCuda, MatchesTheCpuScanAfterTheLog) {
  const GCase c(GetParam());
  const GShape& s = c.s;
  const int B = s.batch, Hk = s.Hk, Hv = s.Hv, dk = s.dk, dv = s.dv, T = s.T, W = s.W, rep = Hv / Hk;
  const Slots& sl = c.sl;
  const int64_t hs = int64_t(dk) * dv;
  for (bool with_log : {false, true}) {
    SCOPED_TRACE(with_log ? "replay: the log first" : "no log");
    GDev d(c, with_log);
    ASSERT_EQ(ops::cuda::gdn_scan_cuda(d.a, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint16_t> o = d.o.get();
    const std::vector<float> after = d.state.get();
    ops::GdnParams p;
    p.n_k_heads = Hk, p.n_v_heads = Hv, p.k_dim = dk, p.v_dim = dv;
    size_t bad_o = 0, bad_s = 0;
    for (int b = 0; b < B; ++b) {
      const size_t in = size_t(sl.slot[b]) * Hv * hs, out = size_t(sl.out[b]) * Hv * hs;
      std::vector<float> S(c.state.begin() + int64_t(in), c.state.begin() + int64_t(in + Hv * hs));
      if (sl.out[b] != sl.slot[b])
        ASSERT_TRUE(std::equal(S.begin(), S.end(), after.begin() + int64_t(in))) << "the slot read by " << b << " written";
      for (int e = 0; with_log && e < sl.n_log[b]; ++e) {
        const size_t le = size_t(b) * W + e;
        for (int h = 0; h < Hv; ++h) {
          ops::cpu::gdn_decay_head(S.data() + h * hs, dk, dv, std::exp(c.lg[le * Hv + h]));
          ops::cpu::gdn_rank1_head(S.data() + h * hs, dk, dv, c.lk.f.data() + (le * Hk + h / rep) * dk,
                                   c.lu.data() + (le * Hv + h) * dv);
        }
      }
      const size_t r0 = size_t(b) * T;
      std::vector<float> want(size_t(T) * Hv * dv);
      ops::cpu::gdn_scan(p, S.data(), c.q.f.data() + r0 * Hk * dk, c.k.f.data() + r0 * Hk * dk, int64_t(Hk) * dk,
                         c.v.f.data() + r0 * Hv * dv, int64_t(Hv) * dv, c.g.data() + r0 * Hv, c.beta.data() + r0 * Hv, T,
                         want.data(), int64_t(Hv) * dv);
      for (size_t i = 0; i < want.size(); ++i)
        bad_o += !close(bf16_to_f32(o[r0 * Hv * dv + i]), want[i], test::kBf16Tol);
      for (int64_t i = 0; i < Hv * hs; ++i) bad_s += !close(after[out + size_t(i)], S[size_t(i)], test::kStateTol);
    }
    EXPECT_EQ(bad_o, 0u) << "outputs off";
    EXPECT_EQ(bad_s, 0u) << "states off";
  }
}

// A ragged chunk is each sequence's own chunk, bit for bit; a sequence
// with no rows leaves its slots untouched.
TEST_P(GdnScanCuda, RaggedRowsAreEachSequencesOwnChunk) {
  const GCase c(GetParam());
  const GShape& s = c.s;
  const Ragged rg(s.batch, s.T);
  const int64_t K = int64_t(s.Hk) * s.dk, V = int64_t(s.Hv) * s.dv, hs = V * s.dk;
  Dev<int32_t> cu(rg.cu);
  for (const Ragged::Case& rc : Ragged::kCases) {
    const bool with_log = rc.with_log, aside = rc.aside;
    SCOPED_TRACE(rc.name);
    const std::vector<int32_t> n = rg.taken(aside);
    Dev<int32_t> n_rows(n);
    GDev d(c, with_log, &rg);
    d.a.cu_rows = cu.p;
    if (aside) d.a.n_rows = n_rows.p;
    ASSERT_EQ(ops::cuda::gdn_scan_cuda(d.a, nullptr), cudaSuccess);
    GDev ref(c, with_log, &rg);  // one sequence at a time
    for (int b = 0; b < s.batch; ++b) {
      if (n[size_t(b)] == 0) continue;
      ops::cuda::GdnScanArgs a = ref.a;
      const int64_t r0 = rg.cu[size_t(b)];
      a.batch = 1, a.T = rg.count[size_t(b)], a.slot = ref.slot.p + b, a.out_slot = ref.out.p + b;
      a.q = ref.q.p + r0 * K, a.k = ref.k.p + r0 * K, a.v = ref.v.p + r0 * V, a.o = ref.o.p + r0 * V;
      a.g = ref.g.p + r0 * s.Hv, a.beta = ref.beta.p + r0 * s.Hv;
      if (with_log)
        a.n_log = ref.n_log.p + b, a.log_k = ref.lk.p + b * s.W * K, a.log_u = ref.lu.p + b * s.W * V,
        a.log_g = ref.lg.p + b * s.W * s.Hv;
      ASSERT_EQ(ops::cuda::gdn_scan_cuda(a, nullptr), cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d.o.get(), ref.o.get());
    const std::vector<float> after = d.state.get();
    EXPECT_EQ(after, ref.state.get());
    rg.expect_untouched(c.sl, c.state, after, hs, n);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GdnScanCuda,
                         ::testing::Values(GShape{2, 1, 2, 128, 128, 40, 8},   // Qwen3.5's heads, three token tiles
                                           GShape{3, 2, 4, 37, 45, 21, 5},     // odd sizes, a part slice
                                           GShape{2, 1, 1, 512, 33, 17, 4},    // the tallest keys
                                           GShape{5, 2, 2, 24, 32, 1, 3},      // one token
                                           GShape{1, 1, 3, 70, 64, 16, 16},    // a whole token tile, a full log
                                           GShape{2, 1, 2, 6, 40, 5, 3},       // a row a lane
                                           GShape{1, 1, 1, 200, 96, 19, 6}),   // 32 rows a lane
                         [](const auto& i) {
                           std::ostringstream os;
                           PrintTo(i.param, &os);
                           return os.str();
                         });

// Bad shapes are refused before the device is asked anything (CI too).
TEST(SsmScanCudaArgs, BadShapesAreRefused) {
  std::vector<float> f(64);
  std::vector<uint16_t> h(64);
  std::vector<int32_t> i(4);
  ops::cuda::Mamba2ScanArgs m;
  m.batch = 1, m.H = 2, m.P = 4, m.N = 8, m.G = 1, m.T = 3;
  m.A_log = m.D = m.dt_bias = f.data(), m.state = f.data(), m.slot = m.out_slot = i.data();
  m.x = m.Bm = m.Cm = m.dt_raw = h.data(), m.y = h.data();
  m.ldx = 8, m.ldbc = 8, m.lddt = 2, m.ldy = 8;
  for (auto bad : {+[](ops::cuda::Mamba2ScanArgs& a) { a.T = 0; }, +[](ops::cuda::Mamba2ScanArgs& a) { a.G = 3; },
                   +[](ops::cuda::Mamba2ScanArgs& a) { a.N = 257; }, +[](ops::cuda::Mamba2ScanArgs& a) { a.ldx = 7; },
                   +[](ops::cuda::Mamba2ScanArgs& a) { a.ldbc = 7; }, +[](ops::cuda::Mamba2ScanArgs& a) { a.y = nullptr; },
                   +[](ops::cuda::Mamba2ScanArgs& a) { a.tile_rows = 8; },
                   +[](ops::cuda::Mamba2ScanArgs& a) { a.tokens_per_sum = 4; },
                   +[](ops::cuda::Mamba2ScanArgs& a) { a.dt_min = 2.0f, a.dt_max = 1.0f; },
                   +[](ops::cuda::Mamba2ScanArgs& a) { a.n_log = a.slot; }}) {  // a log without its arrays
    ops::cuda::Mamba2ScanArgs a = m;
    bad(a);
    EXPECT_EQ(ops::cuda::mamba2_scan_cuda(a, nullptr), cudaErrorInvalidValue);
  }
  ops::cuda::GdnScanArgs g;
  g.batch = 1, g.Hk = 1, g.Hv = 2, g.dk = 4, g.dv = 4, g.T = 2;
  g.state = f.data(), g.slot = g.out_slot = i.data(), g.q = g.k = g.v = h.data(), g.g = g.beta = f.data(), g.o = h.data();
  for (auto bad : {+[](ops::cuda::GdnScanArgs& a) { a.T = 0; }, +[](ops::cuda::GdnScanArgs& a) { a.Hv = 3, a.Hk = 2; },
                   +[](ops::cuda::GdnScanArgs& a) { a.dk = 513; }, +[](ops::cuda::GdnScanArgs& a) { a.o = nullptr; },
                   +[](ops::cuda::GdnScanArgs& a) { a.n_log = a.slot; }}) {
    ops::cuda::GdnScanArgs a = g;
    bad(a);
    EXPECT_EQ(ops::cuda::gdn_scan_cuda(a, nullptr), cudaErrorInvalidValue);
  }
}

}  // namespace
}  // namespace replayssm
