// The CPU's bounds against transformers' fp32 references (the oracle
// fixtures, tools/make_fixtures.py and tools/make_moe_fixtures.py).
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace replayssm::test {

constexpr double kOracleTol = 1e-4;     // |Δ| ≤ kOracleTol·(1 + |ref|)
constexpr double kOracleMinGap = 2e-3;  // greedy steps closer than this are rounding-dependent

// Largest violation ratio |Δ| / (kOracleTol·(1+|ref|)) over a (rows, V)
// block; ≤ 1 passes.
inline double worst_oracle_ratio(const std::vector<float>& got, const nlohmann::json& ref) {
  double worst = 0.0;
  size_t i = 0;
  for (const auto& row : ref)
    for (const auto& v : row) {
      const double r = v.get<double>();
      worst = std::max(worst, std::abs(got[i++] - r) / (kOracleTol * (1.0 + std::abs(r))));
    }
  EXPECT_EQ(i, got.size());
  return worst;
}

}  // namespace replayssm::test
