// `replayssm info` on mixtures of experts: total and active parameters
// (active: all but the routed experts a token does not choose), the MoE
// block count and the experts' shape, in JSON and text; a dense model's
// active count is its total.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "moe_test_util.h"
#include "replayssm/model.h"
#include "test_util.h"

namespace replayssm {
namespace {

using test::TempDir;

TEST(MoeInfo, ReportsTotalAndActiveParameters) {
  TempDir dir;
  std::ofstream(dir.file("config.json")) << test::nemotron_moe_config();
  auto c = load_model_config(dir.path());
  ASSERT_TRUE(c.ok());
  auto r = test::run_cli("info --json --model " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["blocks"]["moe"], 3);
  EXPECT_EQ(j["experts"]["routed"], 9);
  EXPECT_EQ(j["experts"]["per_token"], 3);
  EXPECT_EQ(j["parameters"].get<int64_t>(), parameter_count(*c));
  // Three MoE layers, each leaving 6 experts of up + down (10 × 24 each) idle.
  EXPECT_EQ(j["active_parameters"].get<int64_t>(), parameter_count(*c) - 3 * 6 * 2 * 10 * 24);
  auto text = test::run_cli("info --model " + dir.path());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("active / token"), std::string::npos) << text.out;
  // A dense model's active count is its total.
  auto dense = test::run_cli("info --json --model " + test::data_dir("nemotron_h_8b_config"));
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  const nlohmann::json d = nlohmann::json::parse(dense.out);
  EXPECT_EQ(d["active_parameters"], d["parameters"]);
  EXPECT_EQ(d["blocks"]["moe"], 0);
}

}  // namespace
}  // namespace replayssm
