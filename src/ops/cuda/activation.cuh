// The MLP activations on the device, written as the CPU reference writes
// them (ops/cpu/activation.h): used by mlp_activation_cuda and by the GEMV
// that applies the ungated activation in its epilogue.
#pragma once

#include <cuda_runtime.h>

#include "ops/cuda/row_reduce.cuh"
#include "replayssm/model_config.h"

namespace replayssm::ops::cuda {

__device__ __forceinline__ float activate_f(Activation act, float x) {
  switch (act) {
    case Activation::kRelu2: return x > 0.0f ? x * x : 0.0f;
    case Activation::kSilu: return silu_f(x);
    case Activation::kRelu: return x > 0.0f ? x : 0.0f;
    case Activation::kGeluTanh: {
      const float k = 0.7978845608028654f;  // sqrt(2/pi), as ops/cpu/activation.h
      return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
  }
  return x;
}

// The activations the device kernels know (a host check before a launch).
inline bool known_activation(Activation act) {
  return act == Activation::kRelu2 || act == Activation::kSilu || act == Activation::kRelu ||
         act == Activation::kGeluTanh;
}

}  // namespace replayssm::ops::cuda
