// The CUDA MoE launches (ops/cuda/moe.h) against the CPU: the router
// against fp32 host dots; the routing against ops::cpu::moe_route exactly
// (sets; weights to fp32 rounding) for softmax and sigmoid scoring, one
// group and several, odd E, the real models' shapes and exact ties; the
// grouping against a host counting sort; the grouped linear against host
// sums of the same bf16 values at odd shapes (both of its block shapes, its
// cp.async path and its plain-load one) and at Nemotron 3 Nano's
// (E 128, K 6, D 2688, I 1856) from one row to prefill; and the whole chain
// router → route → group → up → activation → down → combine against
// ops::cpu::moe on the same bf16-rounded weights. Skipped without a GPU,
// but for the argument checks, which come before the device is touched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda_test_util.h"
#include "op_parity_util.h"
#include "ops/cpu/activation.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/moe.h"
#include "ops/cpu/moe_routing.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/moe.h"

namespace replayssm {
namespace {

using test::Bf;
using test::Dev;

class MoeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

// K distinct experts a row, ascending; never expert E − 1 where K < E (so
// some expert has no rows); skew: expert 0 in every row (so it has many).
std::vector<int32_t> random_routing(std::mt19937& g, int64_t rows, int64_t K, int64_t E, bool skew) {
  const int64_t pool = K < E ? E - 1 : E;
  std::vector<int32_t> all(static_cast<size_t>(pool)), out;
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(all.begin(), all.end(), 0);
    const int64_t lo = skew ? 1 : 0;
    for (int64_t i = lo; i < K; ++i)
      std::swap(all[size_t(i)], all[size_t(std::uniform_int_distribution<int64_t>(i, pool - 1)(g))]);
    std::sort(all.begin(), all.begin() + K);
    out.insert(out.end(), all.begin(), all.begin() + K);
  }
  return out;
}

// The CPU's counting sort (ops/cpu/moe.cpp), with each slot's expert.
struct Sorted {
  std::vector<int32_t> first, src_row, slot_of, expert;
};
Sorted host_sort(const std::vector<int32_t>& experts, int64_t K, int64_t E) {
  const size_t n = experts.size();
  Sorted s;
  s.first.assign(size_t(E + 1), 0);
  for (int32_t e : experts) ++s.first[size_t(e) + 1];
  for (int64_t e = 0; e < E; ++e) s.first[size_t(e) + 1] += s.first[size_t(e)];
  std::vector<int32_t> next(s.first.begin(), s.first.end() - 1);
  s.src_row.resize(n), s.slot_of.resize(n), s.expert.resize(n);
  for (size_t p = 0; p < n; ++p) {
    const int32_t slot = next[size_t(experts[p])]++;
    s.slot_of[p] = slot, s.src_row[size_t(slot)] = int32_t(p / size_t(K)), s.expert[size_t(slot)] = experts[p];
  }
  return s;
}

// The device grouping's buffers for rows·K pairs over E experts.
struct DevGroups {
  Dev<int32_t> first, src_row, slot_of, tiles, n_tiles;
  DevGroups(int64_t slots, int64_t E)
      : first(std::vector<int32_t>(size_t(E + 1), -1)),
        src_row(std::vector<int32_t>(size_t(slots), -1)),
        slot_of(std::vector<int32_t>(size_t(slots), -1)),
        tiles(std::vector<int32_t>(size_t(ops::cuda::moe_max_tiles(slots, E)), -1)),
        n_tiles(std::vector<int32_t>(1, -1)) {}
  ops::cuda::MoeGroups view() const { return {first.p, src_row.p, slot_of.p, tiles.p, n_tiles.p}; }
};

// ---- router ----

TEST_F(MoeCuda, RouterMatchesHostDots) {
  struct Case {
    int64_t rows, D, E, ldx, ldl;
  };
  // Odd widths (the scalar path), the four-column path at the real widths
  // and one, four and sixteen rows a warp (37 = 2·16 + 5: a partial tile).
  const Case cases[] = {{1, 40, 7, 40, 7},      {5, 45, 9, 48, 11},        {37, 2688, 128, 2688, 128},
                        {3, 2048, 256, 2056, 260}, {16, 64, 512, 64, 512}, {2, 7, 3, 9, 3}};
  std::mt19937 g(11);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " D " << c.D << " E " << c.E);
    const Bf x = test::bf_rand(g, size_t(c.rows * c.ldx), 1.0f);
    const std::vector<float> w = test::uniform(g, size_t(c.E * c.D), -0.1f, 0.1f);
    Dev<uint16_t> dx(x.bits);
    Dev<float> dw(w), dl(std::vector<float>(size_t(c.rows * c.ldl), NAN));
    ASSERT_EQ(ops::cuda::moe_router_cuda(dx.p, c.ldx, c.rows, c.D, dw.p, c.E, dl.p, c.ldl, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = dl.get();
    int bad = 0;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t e = 0; e < c.E; ++e) {
        double want = 0.0, mag = 0.0;
        for (int64_t d = 0; d < c.D; ++d) {
          const double t = double(x.f[size_t(r * c.ldx + d)]) * double(w[size_t(e * c.D + d)]);
          want += t, mag += std::abs(t);
        }
        const float v = got[size_t(r * c.ldl + e)];
        if (!(std::abs(v - want) <= 1e-5 * mag + 1e-7) && bad++ < 4)
          ADD_FAILURE() << "logit (" << r << ", " << e << ") " << v << " vs " << want;
      }
    EXPECT_EQ(bad, 0);
  }
}

// ---- route ----

struct RouteCase {
  const char* name;
  ops::MoeRoutingParams::Scoring scoring;
  int64_t E, K, G = 1, TG = 1;
  bool norm = true, bias = false;
  float scale = 1.0f;
  int64_t rows = 33;
  float tie_step = 0.0f;  // > 0: logits on a grid of this step in [0, 3] (exact ties)
};

void check_route(const RouteCase& c, std::mt19937& g) {
  SCOPED_TRACE(c.name);
  const int64_t ld = c.E + 3;
  std::vector<float> logits = test::uniform(g, size_t(c.rows * ld), -3.0f, 3.0f);
  // Non-negative on the grid: two groups' sums of two sigmoids are then
  // equal only where their values are (σ(x) + σ(−x) = 1 would make ties
  // that fp32 breaks either way).
  if (c.tie_step > 0.0f)
    for (float& v : logits) v = std::abs(std::round(v / c.tie_step) * c.tie_step);
  // The last row all equal: without a bias the K lowest indices win.
  for (int64_t e = 0; e < c.E; ++e) logits[size_t((c.rows - 1) * ld + e)] = 0.25f;
  std::vector<float> bias = test::uniform(g, size_t(c.E), -0.5f, 0.5f);
  ops::MoeRoutingParams p;
  p.scoring = c.scoring, p.n_experts = c.E, p.top_k = c.K, p.n_group = c.G, p.topk_group = c.TG;
  p.norm_topk_prob = c.norm, p.routed_scaling_factor = c.scale;
  p.correction_bias = c.bias ? bias.data() : nullptr;
  std::vector<int32_t> want_e(size_t(c.rows * c.K));
  std::vector<float> want_w(want_e.size());
  ops::cpu::moe_route(p, logits.data(), ld, c.rows, want_e.data(), want_w.data());

  Dev<float> dl(logits), db(bias), dw(std::vector<float>(want_w.size(), NAN));
  Dev<int32_t> de(std::vector<int32_t>(want_e.size(), -1));
  ops::MoeRoutingParams dp = p;
  dp.correction_bias = c.bias ? db.p : nullptr;
  ASSERT_EQ(ops::cuda::moe_route_cuda(dp, dl.p, ld, c.rows, de.p, dw.p, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<int32_t> got_e = de.get();
  const std::vector<float> got_w = dw.get();
  EXPECT_EQ(got_e, want_e);
  if (!c.bias)
    for (int64_t k = 0; k < c.K; ++k) EXPECT_EQ(got_e[size_t((c.rows - 1) * c.K + k)], k) << "the all-equal row";
  // expf against std::exp: a couple of ulp apart before the sums.
  int bad = 0;
  for (size_t i = 0; i < want_w.size(); ++i)
    if (!(std::abs(got_w[i] - want_w[i]) <= 2e-6f * std::abs(want_w[i]) + 1e-30f) && bad++ < 4)
      ADD_FAILURE() << "weight " << i << ": " << got_w[i] << " vs " << want_w[i];
  EXPECT_EQ(bad, 0);
}

TEST_F(MoeCuda, RouteMatchesCpu) {
  using S = ops::MoeRoutingParams;
  const RouteCase cases[] = {
      {"softmax E7 K2", S::kSoftmax, 7, 2},
      {"softmax E9 K3 unnormalised", S::kSoftmax, 9, 3, 1, 1, false},
      {"softmax E9 K9 (all)", S::kSoftmax, 9, 9},
      {"Qwen3.5-35B-A3B: softmax E256 K8", S::kSoftmax, 256, 8, 1, 1, true, false, 1.0f, 64},
      {"softmax E512 K16", S::kSoftmax, 512, 16, 1, 1, true, false, 1.0f, 9},
      {"softmax ties", S::kSoftmax, 64, 8, 1, 1, true, false, 1.0f, 40, 0.5f},
      {"sigmoid E7 K2 one group", S::kSigmoid, 7, 2, 1, 1, false, false, 1.0f},
      {"sigmoid E9 K3 three groups keep 2", S::kSigmoid, 9, 3, 3, 2, true, true, 2.0f},
      {"Nemotron 3 Nano: sigmoid E128 K6 bias x2.5", S::kSigmoid, 128, 6, 1, 1, true, true, 2.5f, 64},
      {"sigmoid E128 K6 8 groups keep 4", S::kSigmoid, 128, 6, 8, 4, true, true, 2.5f, 64},
      {"DeepSeek-V3: sigmoid E256 K8 8 groups keep 4", S::kSigmoid, 256, 8, 8, 4, true, true, 2.5f, 33},
      {"sigmoid E512 K16 256 groups keep 8", S::kSigmoid, 512, 16, 256, 8, true, true, 1.0f, 17},
      {"sigmoid ties, groups", S::kSigmoid, 64, 6, 8, 3, true, false, 1.0f, 40, 0.5f},
      {"sigmoid ties, one group", S::kSigmoid, 32, 4, 1, 1, false, false, 1.5f, 40, 1.0f},
  };
  std::mt19937 g(12);
  for (const RouteCase& c : cases) check_route(c, g);
}

// ---- group ----

TEST_F(MoeCuda, GroupMatchesCountingSort) {
  struct Case {
    int64_t rows, K, E;
    bool skew;
  };
  // One pair; decode; odd E; every expert taken; the largest call (2048 ×
  // 16 pairs over 512 experts); an expert of 2048 rows (32 tiles).
  const Case cases[] = {{1, 1, 1, false},     {1, 6, 128, false},   {5, 2, 7, false},   {3, 4, 4, false},
                        {64, 6, 128, false},  {77, 3, 9, true},     {2048, 16, 512, false},
                        {2048, 8, 256, true}, {1000, 1, 3, false}};
  std::mt19937 g(13);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " K " << c.K << " E " << c.E << " skew " << c.skew);
    const std::vector<int32_t> experts = random_routing(g, c.rows, c.K, c.E, c.skew);
    const Sorted want = host_sort(experts, c.K, c.E);
    const int64_t slots = c.rows * c.K;
    Dev<int32_t> de(experts);
    DevGroups dg(slots, c.E);
    ASSERT_EQ(ops::cuda::moe_group_cuda(de.p, c.rows, c.K, c.E, dg.view(), nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(dg.first.get(), want.first);
    EXPECT_EQ(dg.src_row.get(), want.src_row);
    EXPECT_EQ(dg.slot_of.get(), want.slot_of);
    int64_t tiles = 0;
    for (int64_t e = 0; e < c.E; ++e)
      tiles += (want.first[size_t(e) + 1] - want.first[size_t(e)] + ops::cuda::kMoeTileRows - 1) /
               ops::cuda::kMoeTileRows;
    EXPECT_EQ(dg.n_tiles.get()[0], tiles);
    EXPECT_LE(tiles, ops::cuda::moe_max_tiles(slots, c.E));
  }
}

// ---- grouped linear ----

// bf16-exact values from an index (a hash): small multiples of `step`, so
// large matrices are made without storing them on the host, and their
// products' fp32 sums are exact (multiples of step_x·step_w far below 2^24).
float hashed(uint64_t i, float step) {
  uint64_t h = (i + 0x632be59bd9b4e019ull) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 32;
  return float(int(h % 17) - 8) * step;
}

struct LinearCase {
  const char* name;
  int64_t E, K, rows, N, Kd;
  bool gather, f32, skew;
  int64_t ldx_pad = 0, ldo_pad = 0;
  int x_shift = 0;  // elements x starts past a 16-byte boundary
  bool hashed = false;
};

// Weights (E, N, Kd): random bf16 for small cases, hashed for large ones
// (uploaded in pieces; the reference recomputes them).
struct Weights {
  bool is_hashed;
  Bf small;
  uint16_t* dev = nullptr;
  Weights(const LinearCase& c, std::mt19937& g) : is_hashed(c.hashed) {
    const size_t n = size_t(c.E * c.N * c.Kd);
    if (!is_hashed) {
      small = test::bf_rand(g, n, 1.0f / std::sqrt(float(c.Kd)));
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), n * 2), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(dev, small.bits.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
      return;
    }
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), n * 2), cudaSuccess);
    std::vector<uint16_t> piece(size_t(1) << 24);
    for (size_t at = 0; at < n; at += piece.size()) {
      const size_t m = std::min(piece.size(), n - at);
      for (size_t i = 0; i < m; ++i) piece[i] = f32_to_bf16(hashed(at + i, 1.0f / 64));
      EXPECT_EQ(cudaMemcpy(dev + at, piece.data(), m * 2, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ~Weights() { cudaFree(dev); }
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;
  float at(size_t i) const { return is_hashed ? hashed(i, 1.0f / 64) : small.f[i]; }
};

void check_linear(const LinearCase& c, const Weights& w, std::mt19937& g) {
  SCOPED_TRACE(c.name);
  const int64_t slots = c.rows * c.K, ldx = c.Kd + c.ldx_pad, ldo = c.N + c.ldo_pad;
  const int64_t x_rows = c.gather ? c.rows : slots;
  const std::vector<int32_t> experts = random_routing(g, c.rows, c.K, c.E, c.skew);
  const Sorted s = host_sort(experts, c.K, c.E);
  Bf x;
  if (c.hashed) {
    std::vector<float> xf(size_t(x_rows * ldx));
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = hashed(i + (uint64_t(1) << 40), 1.0f / 16);
    x = test::bf_of(xf);
  } else {
    x = test::bf_rand(g, size_t(x_rows * ldx), 1.0f);
  }
  std::vector<uint16_t> x_bits(size_t(c.x_shift), 0);
  x_bits.insert(x_bits.end(), x.bits.begin(), x.bits.end());
  Dev<uint16_t> dx(x_bits);
  Dev<int32_t> de(experts);
  DevGroups dg(slots, c.E);
  // NaN everywhere first: a slot no tile writes shows.
  Dev<float> yf(std::vector<float>(c.f32 ? size_t(slots * ldo) : 0, NAN));
  Dev<uint16_t> yb(std::vector<uint16_t>(c.f32 ? 0 : size_t(slots * ldo), 0x7fc0));
  ASSERT_EQ(ops::cuda::moe_group_cuda(de.p, c.rows, c.K, c.E, dg.view(), nullptr), cudaSuccess);
  ops::cuda::MoeGroupedLinearArgs a;
  a.slots = slots, a.E = c.E, a.N = c.N, a.Kd = c.Kd, a.x = dx.p + c.x_shift, a.ldx = ldx;
  a.x_row = c.gather ? dg.src_row.p : nullptr, a.w = w.dev, a.first = dg.first.p, a.tiles = dg.tiles.p;
  a.n_tiles = dg.n_tiles.p, a.ldo = ldo;
  if (c.f32) a.out_f32 = yf.p;
  else a.out = yb.p;
  ASSERT_EQ(ops::cuda::moe_grouped_linear_cuda(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got_f = c.f32 ? yf.get() : std::vector<float>();
  const std::vector<uint16_t> got_b = c.f32 ? std::vector<uint16_t>() : yb.get();
  auto got = [&](int64_t i, int64_t n) {
    return c.f32 ? got_f[size_t(i * ldo + n)] : bf16_to_f32(got_b[size_t(i * ldo + n)]);
  };

  // Which (slot, column) to check: all of them when the sums are few;
  // else every slot at 16 columns (the first and last among them) and
  // every column of 24 slots (the first and last among them).
  std::vector<int64_t> cols, rows_all_cols;
  const bool all = double(slots) * double(c.N) * double(c.Kd) <= 5e7;
  for (int64_t n = 0; n < c.N; ++n)
    if (all || n % std::max<int64_t>(1, c.N / 15) == 0 || n == c.N - 1) cols.push_back(n);
  if (!all)
    for (int64_t i = 0; i < slots; i += std::max<int64_t>(1, slots / 23)) rows_all_cols.push_back(i);
  if (!all && rows_all_cols.back() != slots - 1) rows_all_cols.push_back(slots - 1);

  // A bf16 output: its rounding (2^-9) and fp32 order; fp32: order only
  // (exact on the hashed values).
  const double rel = c.f32 ? 1e-5 : 1.0 / 256, abs_of_row = c.f32 ? 1e-4 : 1e-3;
  int bad = 0;
  // Weight rows (e, n) as floats: kept for the sampled columns, which
  // every slot of an expert reuses (hashing them per use would dominate
  // the larger cases); made afresh for the few slots checked in full.
  std::vector<std::vector<float>> wrows(size_t(c.E * c.N));
  std::vector<float> scratch;
  auto wrow = [&](int64_t e, int64_t n, bool keep) -> const std::vector<float>& {
    std::vector<float>& r = keep ? wrows[size_t(e * c.N + n)] : scratch;
    if (!keep || r.empty()) {
      r.resize(size_t(c.Kd));
      for (int64_t k = 0; k < c.Kd; ++k) r[size_t(k)] = w.at(size_t((e * c.N + n) * c.Kd + k));
    }
    return r;
  };
  auto check_at = [&](int64_t i, const std::vector<int64_t>& ns, bool keep) {
    const int64_t e = s.expert[size_t(i)], xr = c.gather ? s.src_row[size_t(i)] : i;
    std::vector<double> want(ns.size());
    double row_max = 0.0;
    for (size_t j = 0; j < ns.size(); ++j) {
      const std::vector<float>& wr = wrow(e, ns[j], keep);
      double acc = 0.0;
      for (int64_t k = 0; k < c.Kd; ++k) acc += double(x.f[size_t(xr * ldx + k)]) * double(wr[size_t(k)]);
      want[j] = acc, row_max = std::max(row_max, std::abs(acc));
    }
    for (size_t j = 0; j < ns.size(); ++j) {
      const float v = got(i, ns[j]);
      if (!(std::abs(v - want[j]) <= rel * std::abs(want[j]) + abs_of_row * row_max + 1e-6) && bad++ < 4)
        ADD_FAILURE() << "slot " << i << " (expert " << e << ") column " << ns[j] << ": " << v << " vs " << want[j];
    }
  };
  for (int64_t i = 0; i < slots; ++i) check_at(i, cols, true);
  std::vector<int64_t> every(size_t(c.N));
  std::iota(every.begin(), every.end(), 0);
  for (int64_t i : rows_all_cols) check_at(i, every, false);
  EXPECT_EQ(bad, 0);
  // Nothing past N in a padded row is written.
  if (c.ldo_pad > 0)
    for (int64_t i = 0; i < slots; ++i)
      if (c.f32 ? !std::isnan(got_f[size_t(i * ldo + c.N)]) : got_b[size_t(i * ldo + c.N)] != 0x7fc0) {
        ADD_FAILURE() << "slot " << i << " written past N";
        break;
      }
}

TEST_F(MoeCuda, GroupedLinearMatchesHostOddShapes) {
  // Narrow blocks while slots < 64·E, wide ones from there; the cp.async
  // ring where Kd, ldx are multiples of 8 and x is 16-byte aligned, plain
  // loads otherwise.
  const LinearCase cases[] = {
      {"narrow, ring, gathered, bf16", 7, 2, 5, 37, 40, true, false, false},
      {"narrow, plain (Kd 28), fp32", 9, 3, 13, 20, 28, true, true, false},
      {"narrow, plain (ldx odd), padded out", 7, 2, 9, 48, 40, true, false, false, 1, 3},
      {"narrow, plain (x unaligned), fp32", 5, 2, 6, 24, 48, false, true, false, 0, 1, 3},
      {"narrow, one row, N 1", 5, 1, 1, 1, 16, true, true, false},
      {"narrow, Kd 7, N 9", 3, 2, 4, 9, 7, false, false, false},
      {"narrow, many tiles of one expert", 9, 2, 200, 40, 48, true, true, true},
      {"wide, ring, gathered, bf16 (N 200)", 4, 2, 300, 200, 72, true, false, true},
      {"wide, plain (Kd 20), fp32, padded", 4, 2, 300, 45, 20, false, true, false, 4, 2},
      {"wide, ring, fp32, Kd 136", 2, 1, 257, 130, 136, true, true, false},
  };
  std::mt19937 g(14);
  for (const LinearCase& c : cases) {
    const Weights w(c, g);
    check_linear(c, w, g);
  }
}

// Nemotron 3 Nano's experts: up (N 1856, Kd 2688, gathered, bf16) at decode
// and prefill row counts, and down (N 2688, Kd 1856, fp32 out).
TEST_F(MoeCuda, GroupedLinearMatchesHostNemotronNano) {
  const LinearCase cases[] = {
      {"up, 1 row", 128, 6, 1, 1856, 2688, true, false, false, 0, 0, 0, true},
      {"up, 8 rows", 128, 6, 8, 1856, 2688, true, false, false, 0, 0, 0, true},
      {"up, 64 rows", 128, 6, 64, 1856, 2688, true, false, false, 0, 0, 0, true},
      {"up, 512 rows", 128, 6, 512, 1856, 2688, true, false, false, 0, 0, 0, true},
      {"up, 1400 rows (wide blocks)", 128, 6, 1400, 1856, 2688, true, false, false, 0, 0, 0, true},
      {"down, 64 rows, fp32", 128, 6, 64, 2688, 1856, false, true, false, 0, 0, 0, true},
  };
  std::mt19937 g(15);
  // One upload serves every case: the hashed values depend on the index
  // alone, and (E, 1856, 2688) and (E, 2688, 1856) hold as many.
  const Weights w(cases[0], g);
  for (const LinearCase& c : cases) check_linear(c, w, g);
}

// ---- the whole routed block against ops::cpu::moe ----

struct ChainCase {
  const char* name;
  ops::MoeRoutingParams routing;
  int64_t rows, D, I, Is;
  bool gated;
  Activation act;
  bool shared_gate;
};

// y (rows, n) = x (rows, k) · w (n, k)ᵀ on the CPU.
std::vector<float> mm(const std::vector<float>& x, int64_t rows, int64_t k, const std::vector<float>& w, int64_t n) {
  std::vector<float> y(size_t(rows * n));
  ops::cpu::matmul(x.data(), k, rows, k, w.data(), n, nullptr, y.data(), n);
  return y;
}

void check_chain(const ChainCase& c, std::mt19937& g) {
  SCOPED_TRACE(c.name);
  const ops::MoeRoutingParams& rp = c.routing;
  const int64_t E = rp.n_experts, K = rp.top_k, D = c.D, I = c.I, U = c.gated ? 2 * I : I, rows = c.rows;
  const int64_t slots = rows * K, Is = c.Is;
  const Bf x = test::bf_rand(g, size_t(rows * D), 1.0f);
  const std::vector<float> router = test::uniform(g, size_t(E * D), -0.2f, 0.2f);
  const std::vector<float> bias = test::uniform(g, size_t(E), -0.3f, 0.3f);
  const Bf up = test::bf_rand(g, size_t(E * U * D), 1.0f / std::sqrt(float(D)));
  const Bf down = test::bf_rand(g, size_t(E * D * I), 1.0f / std::sqrt(float(I)));
  const Bf s_gate_proj = test::bf_rand(g, size_t(Is * D), 1.0f / std::sqrt(float(D)));
  const Bf s_up = test::bf_rand(g, size_t(Is * D), 1.0f / std::sqrt(float(D)));
  const Bf s_down = test::bf_rand(g, size_t(D * Is), 1.0f / std::sqrt(float(Is)));
  const std::vector<float> s_gate = test::uniform(g, size_t(D), -0.1f, 0.1f);

  ops::MoeParams p;
  p.routing = rp;
  p.routing.correction_bias = rp.correction_bias != nullptr ? bias.data() : nullptr;
  p.hidden = D, p.inter = I, p.gated = c.gated, p.act = c.act;
  p.router = router.data(), p.up = up.f.data(), p.down = down.f.data();
  p.shared_inter = Is, p.shared_up = s_up.f.data(), p.shared_down = s_down.f.data();
  p.shared_gate_proj = c.gated ? s_gate_proj.f.data() : nullptr;
  p.shared_gate = c.shared_gate ? s_gate.data() : nullptr;
  std::vector<float> want(size_t(rows * D));
  std::vector<int32_t> want_e(static_cast<size_t>(slots));
  std::vector<float> want_w(static_cast<size_t>(slots));
  ops::cpu::moe(p, x.f.data(), D, rows, want.data(), D, want_e.data(), want_w.data());

  // The shared expert's output, as the backend's dense path would hand it
  // over: bf16, and its gate's logits in fp32.
  std::vector<float> h = mm(x.f, rows, D, s_up.f, Is);
  if (c.gated) {
    const std::vector<float> gp = mm(x.f, rows, D, s_gate_proj.f, Is);
    for (size_t i = 0; i < h.size(); ++i) h[i] = ops::activate(c.act, gp[i]) * h[i];
  } else {
    for (float& v : h) v = ops::activate(c.act, v);
  }
  const Bf shared = test::bf_of(mm(h, rows, Is, s_down.f, D));
  const std::vector<float> gate_logits = mm(x.f, rows, D, s_gate, 1);

  Dev<uint16_t> dx(x.bits), dup(up.bits), ddown(down.bits), dshared(shared.bits);
  Dev<float> drouter(router), dbias(bias), dgate(gate_logits), dlogits(std::vector<float>(size_t(rows * E)));
  Dev<int32_t> dexp(std::vector<int32_t>(static_cast<size_t>(slots)));
  Dev<float> dwts(std::vector<float>(static_cast<size_t>(slots)));
  DevGroups dg(slots, E);
  Dev<uint16_t> dh(std::vector<uint16_t>(size_t(slots * U))), dact(std::vector<uint16_t>(size_t(slots * I)));
  Dev<float> dy(std::vector<float>(size_t(slots * D)));
  Dev<uint16_t> dout(std::vector<uint16_t>(size_t(rows * D), 0x7fc0));
  ops::MoeRoutingParams drp = rp;
  drp.correction_bias = rp.correction_bias != nullptr ? dbias.p : nullptr;
  namespace oc = ops::cuda;
  ASSERT_EQ(oc::moe_router_cuda(dx.p, D, rows, D, drouter.p, E, dlogits.p, E, nullptr), cudaSuccess);
  ASSERT_EQ(oc::moe_route_cuda(drp, dlogits.p, E, rows, dexp.p, dwts.p, nullptr), cudaSuccess);
  ASSERT_EQ(oc::moe_group_cuda(dexp.p, rows, K, E, dg.view(), nullptr), cudaSuccess);
  oc::MoeGroupedLinearArgs lin;
  lin.slots = slots, lin.E = E, lin.N = U, lin.Kd = D, lin.x = dx.p, lin.ldx = D, lin.x_row = dg.src_row.p;
  lin.w = dup.p, lin.first = dg.first.p, lin.tiles = dg.tiles.p, lin.n_tiles = dg.n_tiles.p, lin.out = dh.p;
  lin.ldo = U;
  ASSERT_EQ(oc::moe_grouped_linear_cuda(lin, nullptr), cudaSuccess);
  ASSERT_EQ(oc::mlp_activation_cuda(c.act, c.gated ? dh.p : nullptr, U, dh.p + (c.gated ? I : 0), U, slots, I, dact.p,
                                    I, nullptr),
            cudaSuccess);
  lin.N = D, lin.Kd = I, lin.x = dact.p, lin.ldx = I, lin.x_row = nullptr, lin.w = ddown.p, lin.out = nullptr;
  lin.out_f32 = dy.p, lin.ldo = D;
  ASSERT_EQ(oc::moe_grouped_linear_cuda(lin, nullptr), cudaSuccess);
  oc::MoeCombineArgs cb;
  cb.rows = rows, cb.K = K, cb.D = D, cb.y = dy.p, cb.ldy = D, cb.experts = dexp.p, cb.weights = dwts.p;
  cb.slot_of = dg.slot_of.p, cb.shared = dshared.p, cb.lds = D, cb.shared_gate = c.shared_gate ? dgate.p : nullptr;
  cb.out = dout.p, cb.ldo = D;
  ASSERT_EQ(oc::moe_combine_cuda(cb, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  // The logits differ from the CPU's in summation order only: the same
  // experts, weights to a few ulp of the logits.
  EXPECT_EQ(dexp.get(), want_e);
  EXPECT_TRUE(test::f32_close(dwts.get(), want_w, 1e-5f));
  // bf16 between the projections (h, the activation, the shared output)
  // and at the end, as in the other bf16 parity tests; outputs are O(1).
  const std::vector<uint16_t> got = dout.get();
  float mean_abs = 0.0f;
  for (float v : want) mean_abs += std::abs(v) / float(want.size());
  EXPECT_GT(mean_abs, 0.1f) << "outputs too small for the tolerance to mean anything";
  EXPECT_TRUE(test::bf16_close(got, want, 2e-2f));
}

TEST_F(MoeCuda, ChainMatchesCpuMoe) {
  using S = ops::MoeRoutingParams;
  static const float kBiasMarker = 0.0f;  // non-null: check_chain supplies the bias
  auto routing = [](S::Scoring s, int64_t E, int64_t K, int64_t G, int64_t TG, bool bias, float scale) {
    S r;
    r.scoring = s, r.n_experts = E, r.top_k = K, r.n_group = G, r.topk_group = TG, r.norm_topk_prob = true;
    r.routed_scaling_factor = scale, r.correction_bias = bias ? &kBiasMarker : nullptr;
    return r;
  };
  const ChainCase cases[] = {
      // Nemotron-H style: sigmoid with a bias and groups, relu² ungated, ungated shared expert;
      // I 20 takes the down projection's plain-load path.
      {"sigmoid, groups, relu2", routing(S::kSigmoid, 16, 4, 4, 2, true, 2.5f), 37, 48, 20, 24, false,
       Activation::kRelu2, false},
      // Qwen3.5 style: softmax, SiLU-gated, gated shared expert.
      {"softmax, silu gated, shared gate", routing(S::kSoftmax, 12, 3, 1, 1, false, 1.0f), 21, 40, 16, 24, true,
       Activation::kSilu, true},
      // Wider: the cp.async ring on both projections, an expert of several tiles.
      {"sigmoid, 8 groups, 64 rows", routing(S::kSigmoid, 64, 6, 8, 4, true, 2.5f), 64, 256, 128, 192, false,
       Activation::kRelu2, false},
      {"softmax, 300 rows over 8 experts (wide blocks)", routing(S::kSoftmax, 8, 2, 1, 1, false, 1.0f), 300, 128, 64,
       96, true, Activation::kSilu, true},
  };
  std::mt19937 g(16);
  for (const ChainCase& c : cases) check_chain(c, g);
}

// ---- refusals (no GPU needed) ----

TEST(MoeCudaArgs, BadShapesAreRefused) {
  namespace oc = ops::cuda;
  const auto* xb = reinterpret_cast<const uint16_t*>(16);  // never dereferenced: refused first
  auto* f = reinterpret_cast<float*>(16);
  auto* i32 = reinterpret_cast<int32_t*>(16);
  EXPECT_EQ(oc::moe_router_cuda(xb, 7, 2, 8, f, 4, f, 4, nullptr), cudaErrorInvalidValue);  // ldx < D
  EXPECT_EQ(oc::moe_router_cuda(xb, 8, 2, 8, f, 4, f, 3, nullptr), cudaErrorInvalidValue);  // ldl < E
  EXPECT_EQ(oc::moe_router_cuda(xb, 8, 2, 8, nullptr, 4, f, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(oc::moe_router_cuda(xb, 8, 0, 8, f, 4, f, 4, nullptr), cudaSuccess);  // no rows

  ops::MoeRoutingParams p;
  p.scoring = ops::MoeRoutingParams::kSoftmax, p.n_experts = 8, p.top_k = 2;
  EXPECT_EQ(oc::moe_route_cuda(p, f, 8, 0, i32, f, nullptr), cudaSuccess);
  p.top_k = 9;  // K > E
  EXPECT_EQ(oc::moe_route_cuda(p, f, 8, 2, i32, f, nullptr), cudaErrorInvalidValue);
  p.n_experts = 1024, p.top_k = 2;  // past kMoeMaxExperts
  EXPECT_EQ(oc::moe_route_cuda(p, f, 1024, 2, i32, f, nullptr), cudaErrorInvalidValue);
  p.n_experts = 64, p.top_k = 17;  // past kMoeMaxTopK
  EXPECT_EQ(oc::moe_route_cuda(p, f, 64, 2, i32, f, nullptr), cudaErrorInvalidValue);
  p.scoring = ops::MoeRoutingParams::kSigmoid, p.top_k = 8, p.n_group = 3;  // 3 does not divide 64
  EXPECT_EQ(oc::moe_route_cuda(p, f, 64, 2, i32, f, nullptr), cudaErrorInvalidValue);
  p.n_group = 32, p.topk_group = 3;  // 3 groups of 2 hold fewer than K = 8
  EXPECT_EQ(oc::moe_route_cuda(p, f, 64, 2, i32, f, nullptr), cudaErrorInvalidValue);
  p.n_group = 8, p.topk_group = 4;
  EXPECT_EQ(oc::moe_route_cuda(p, f, 63, 2, i32, f, nullptr), cudaErrorInvalidValue);  // ld < E

  oc::MoeGroups gr{i32, i32, i32, i32, i32};
  EXPECT_EQ(oc::moe_group_cuda(i32, 4, 2, 513, gr, nullptr), cudaErrorInvalidValue);  // E
  EXPECT_EQ(oc::moe_group_cuda(i32, 4, 17, 64, gr, nullptr), cudaErrorInvalidValue);  // K
  gr.tiles = nullptr;
  EXPECT_EQ(oc::moe_group_cuda(i32, 4, 2, 64, gr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(oc::moe_group_cuda(i32, 0, 2, 64, gr, nullptr), cudaSuccess);
  EXPECT_EQ(oc::moe_max_tiles(0, 128), 0);
  EXPECT_EQ(oc::moe_max_tiles(6, 128), 6);
  EXPECT_EQ(oc::moe_max_tiles(12288, 128), 12288 / oc::kMoeTileRows + 128);

  oc::MoeGroupedLinearArgs a;
  a.slots = 12, a.E = 8, a.N = 16, a.Kd = 32, a.x = xb, a.ldx = 32, a.w = xb, a.first = i32, a.tiles = i32;
  a.n_tiles = i32, a.out = reinterpret_cast<uint16_t*>(16), a.ldo = 16;
  a.out_f32 = f;  // both outputs
  EXPECT_EQ(oc::moe_grouped_linear_cuda(a, nullptr), cudaErrorInvalidValue);
  a.out_f32 = nullptr, a.ldx = 31;
  EXPECT_EQ(oc::moe_grouped_linear_cuda(a, nullptr), cudaErrorInvalidValue);
  a.ldx = 32, a.ldo = 15;
  EXPECT_EQ(oc::moe_grouped_linear_cuda(a, nullptr), cudaErrorInvalidValue);
  a.ldo = 16, a.E = 600;
  EXPECT_EQ(oc::moe_grouped_linear_cuda(a, nullptr), cudaErrorInvalidValue);
  a.E = 8, a.first = nullptr;
  EXPECT_EQ(oc::moe_grouped_linear_cuda(a, nullptr), cudaErrorInvalidValue);
  a.slots = 0;
  EXPECT_EQ(oc::moe_grouped_linear_cuda(a, nullptr), cudaSuccess);

  oc::MoeCombineArgs c;
  c.rows = 2, c.K = 2, c.D = 8, c.y = f, c.ldy = 8, c.experts = i32, c.weights = f, c.slot_of = i32;
  c.out = reinterpret_cast<uint16_t*>(16), c.ldo = 8;
  c.ldy = 7;
  EXPECT_EQ(oc::moe_combine_cuda(c, nullptr), cudaErrorInvalidValue);
  c.ldy = 8, c.shared_gate = f;  // a gate without a shared output
  EXPECT_EQ(oc::moe_combine_cuda(c, nullptr), cudaErrorInvalidValue);
  c.shared_gate = nullptr, c.K = 17;
  EXPECT_EQ(oc::moe_combine_cuda(c, nullptr), cudaErrorInvalidValue);
  c.K = 2, c.rows = 0;
  EXPECT_EQ(oc::moe_combine_cuda(c, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace replayssm
