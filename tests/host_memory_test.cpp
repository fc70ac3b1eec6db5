// The host memory check that guards every fp32 weight allocation
// (core/host_memory.h): what fits passes, an unknown amount is not refused,
// and a refusal names what needed how much against what is available.
#include <gtest/gtest.h>

#include "core/host_memory.h"
#include "replayssm/model.h"
#include "test_util.h"

namespace replayssm {
namespace {

TEST(HostMemory, TheCheckNamesBothSizes) {
  EXPECT_TRUE(check_host_memory(100, 200, "x").ok());
  EXPECT_TRUE(check_host_memory(200, 200, "x").ok());
  EXPECT_TRUE(check_host_memory(100, -1, "x").ok());  // unknown: not refused
  const Status s = check_host_memory(int64_t{3} << 31, int64_t{1} << 30, "random model preset:big: fp32 weights");
  EXPECT_EQ(s.code(), StatusCode::kOutOfBudget);
  EXPECT_NE(s.message().find("random model preset:big: fp32 weights: needs 6.0 GiB of host memory but 1.0 GiB is available"),
            std::string::npos)
      << s.message();
}

TEST(HostMemory, TheProbesReadThisMachine) {
  EXPECT_GT(available_memory_bytes(), 0);
  EXPECT_GT(peak_rss_bytes(), 0);
}

// A model that fits loads as before: the check sits in front of the reads.
TEST(HostMemory, SmallModelsLoad) {
  auto m = Model::load(test::data_dir("nemotron_h_tiny"));
  EXPECT_TRUE(m.ok()) << m.status().message();
}

}  // namespace
}  // namespace replayssm
