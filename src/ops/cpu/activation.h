// Scalar activations, written as torch computes them in fp32, so the CPU
// reference and the oracle round alike.
#pragma once

#include <cmath>

#include "replayssm/model_config.h"

namespace replayssm::ops {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus(beta=1, threshold=20): linear above 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
inline float relu2(float x) { return x > 0.0f ? x * x : 0.0f; }

// An MLP's activation (ModelConfig::mlp.act); GELU in its tanh form.
inline float activate(Activation a, float x) {
  switch (a) {
    case Activation::kRelu2: return relu2(x);
    case Activation::kSilu: return silu(x);
    case Activation::kRelu: return x > 0.0f ? x : 0.0f;
    case Activation::kGeluTanh: {
      const float k = 0.7978845608028654f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
  }
  return x;
}

}  // namespace replayssm::ops
