// Scalar activations, written as torch computes them in fp32, so the CPU
// reference and the oracle round alike.
#pragma once

#include <cmath>

namespace replayssm::ops {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus(beta=1, threshold=20): linear above 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
inline float relu2(float x) { return x > 0.0f ? x * x : 0.0f; }

}  // namespace replayssm::ops
