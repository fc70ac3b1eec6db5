// Helpers for the parity tests of the non-SSM CUDA ops: uniform fp32 data
// and element-wise comparisons that report the count, the worst element
// and the first few mismatches once, instead of one failure per element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cuda_test_util.h"

namespace replayssm::test {

inline std::vector<float> uniform(std::mt19937& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = u(g);
  return x;
}

// Unit-norm rows of length d (then bf16-rounded), scaled: Gated DeltaNet's
// prepared keys (scale 1) and queries (dk^-½).
inline Bf unit_rows(std::mt19937& g, size_t rows, int d, float scale) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(rows * d);
  for (size_t r = 0; r < rows; ++r) {
    float ss = 0.0f;
    for (int i = 0; i < d; ++i) ss += (x[r * d + i] = n(g)) * x[r * d + i];
    for (int i = 0; i < d; ++i) x[r * d + i] *= scale / std::sqrt(ss);
  }
  return bf_of(x);
}

// got(i) against want(i) for i < n with close(·, ·, tol).
template <typename Got, typename Want>
::testing::AssertionResult all_close(size_t n, Got&& got, Want&& want, float tol) {
  size_t bad = 0, worst = 0;
  float worst_err = -1.0f;
  std::string first;
  for (size_t i = 0; i < n; ++i) {
    const float a = got(i), b = want(i);
    const float err = std::abs(a - b) / (1.0f + std::abs(b));
    if (!(err <= tol)) {  // NaN counts as a mismatch
      if (bad < 4) first += " [" + std::to_string(i) + "] " + std::to_string(a) + " vs " + std::to_string(b) + ";";
      ++bad;
    }
    if (err > worst_err || std::isnan(err)) worst_err = err, worst = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " elements off (tol " << tol << "), worst ["
                                       << worst << "] rel err " << worst_err << ";" << first;
}

// bf16 bits against fp32 references.
inline ::testing::AssertionResult bf16_close(const std::vector<uint16_t>& got, const std::vector<float>& want,
                                             float tol = kBf16Tol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  return all_close(got.size(), [&](size_t i) { return bf16_to_f32(got[i]); }, [&](size_t i) { return want[i]; }, tol);
}

inline ::testing::AssertionResult f32_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  return all_close(got.size(), [&](size_t i) { return got[i]; }, [&](size_t i) { return want[i]; }, tol);
}

}  // namespace replayssm::test
