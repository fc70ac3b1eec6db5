// The sizes of mixtures of experts: the two presets' parameter counts,
// total and active, written out from the published shapes; the presets
// refused before allocating where their fp32 weights do not fit.
#include <gtest/gtest.h>

#include "bench/memory.h"
#include "bench/presets.h"
#include "core/host_memory.h"
#include "replayssm/model.h"
#include "test_util.h"

namespace replayssm {
namespace {

using test::TempDir;

TEST(MoeSizes, NemotronNanoPresetHasThePublishedShape) {
  auto c = bench::preset_config("nemotron-3-nano-30b-a3b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->count(BlockKind::kMamba2), 23);
  EXPECT_EQ(c->count(BlockKind::kMoe), 23);
  EXPECT_EQ(c->count(BlockKind::kAttention), 6);
  const int64_t D = 2688, V = 131072, H = 64, P = 64, G = 8, N = 128, K = 4, Hq = 32, Hkv = 2, Dh = 128;
  const int64_t E = 128, top = 6, I = 1856, Is = 3712;
  const int64_t In = H * P, C = In + 2 * G * N;
  const int64_t mamba = (In + C + H) * D + C * K + C + 3 * H + In + D * In + D;  // in, conv w+b, A/D/dt, norm, out, pre-norm
  const int64_t attn = (Hq * Dh + 2 * Hkv * Dh) * D + D * Hq * Dh + D;
  const int64_t expert = 2 * I * D;  // up and down, no gate
  const int64_t moe = E * D + E + E * expert + 2 * Is * D + D;  // router, correction bias, experts, shared, pre-norm
  const int64_t total = 2 * V * D + D + 23 * mamba + 6 * attn + 23 * moe;
  EXPECT_EQ(parameter_count(*c), total);
  EXPECT_EQ(active_parameter_count(*c), total - 23 * (E - top) * expert);
  EXPECT_EQ(total, 31577940288);                          // NVIDIA's 31.6B
  EXPECT_EQ(active_parameter_count(*c), 3580076352);  // and 3.6B active, embeddings included
}

TEST(MoeSizes, Qwen35MoePresetHasThePublishedShape) {
  auto c = bench::preset_config("qwen3.5-35b-a3b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->count(BlockKind::kGatedDeltaNet), 30);
  EXPECT_EQ(c->count(BlockKind::kAttention), 10);
  EXPECT_EQ(c->count(BlockKind::kMoe), 40);
  const int64_t D = 2048, V = 248320, Hk = 16, Hv = 32, dk = 128, dv = 128, K = 4, Hq = 16, Hkv = 2, Dh = 256;
  const int64_t E = 256, top = 8, I = 512, Is = 512;
  const int64_t C = 2 * Hk * dk + Hv * dv;
  const int64_t gdn = C * D + Hv * dv * D + 2 * Hv * D + C * K + 2 * Hv + dv + D * Hv * dv + D;
  const int64_t attn = 2 * Hq * Dh * D + 2 * Hkv * Dh * D + D * Hq * Dh + 2 * Dh + D;
  const int64_t expert = 3 * I * D;  // gate, up, down
  const int64_t moe = E * D + E * expert + 3 * Is * D + D + D;  // router, experts, shared, its gate, pre-norm
  const int64_t total = 2 * V * D + D + 30 * gdn + 10 * attn + 40 * moe;
  EXPECT_EQ(parameter_count(*c), total);
  EXPECT_EQ(active_parameter_count(*c), total - 40 * (E - top) * expert);
  EXPECT_EQ(total, 34660610688);                      // "35B"
  EXPECT_EQ(active_parameter_count(*c), 3454988928);  // "A3B"
}

TEST(MoeSizes, PresetsThatDoNotFitAreRefusedNamingBothSizes) {
  for (const char* name : {"nemotron-3-nano-30b-a3b", "qwen3.5-35b-a3b"}) {
    auto c = bench::preset_config(name);
    ASSERT_TRUE(c.ok());
    const int64_t avail = available_memory_bytes();
    if (avail < 0 || avail > bench::weight_bytes(*c)) GTEST_SKIP() << "this machine could hold " << name;
    TempDir dir;
    auto r = test::run_cli(std::string("bench --workload ar --preset ") + name + " --out " + dir.path());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(std::string("--preset ") + name + ": needs"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fp32 weights"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("available"), std::string::npos) << r.err;
    // The server builds the weights itself: refused before allocating them.
    r = test::run_cli(std::string("serve --preset ") + name + " --port 0");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("needs"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("available"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace replayssm
