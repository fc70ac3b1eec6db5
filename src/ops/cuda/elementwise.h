// Elementwise ops on CUDA between the GEMMs, with the math of the CPU
// forward (src/model/forward.cpp, ops/cpu/activation.h) and ops/cpu/gdn_scan.h:
//
//   mlp_activation_cuda — the MLP's middle: out = act(gate) ⊙ up (gated,
//                         Qwen3.5: SiLU) or out = act(up) (NemotronH: relu²);
//   gdn_prepare_cuda    — Gated DeltaNet inputs after the conv: q ← l2norm(q)·dk^-½,
//                         k ← l2norm(k) per key head; g = −exp(A_log)·softplus(a + dt_bias),
//                         β = sigmoid(b) per value head — what gdn_decode.h takes.
//
// bf16 activations (uint16_t bits), fp32 math, strides in elements; shapes
// are checked before anything touches the device (cudaErrorInvalidValue),
// rows = 0 is a no-op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "replayssm/model_config.h"

namespace replayssm::ops::cuda {

// gate, up, out: (rows, n) bf16; gate nullptr for the ungated form. out may
// alias up or gate.
cudaError_t mlp_activation_cuda(Activation act, const uint16_t* gate, int64_t ldg, const uint16_t* up, int64_t ldu,
                                int64_t rows, int64_t n, uint16_t* out, int64_t ldo, cudaStream_t stream);

// Shapes: Hk key heads of dk, Hv value heads (a multiple of Hk).
struct GdnPrepareArgs {
  int64_t rows = 0;
  int Hk = 0, Hv = 0, dk = 0;
  const float* A_log = nullptr;    // (Hv)
  const float* dt_bias = nullptr;  // (Hv)
  float l2_eps = 1e-6f;
  const uint16_t* q = nullptr;     // (rows, Hk·dk) bf16 post-conv, row stride ldq
  const uint16_t* k = nullptr;     // (rows, Hk·dk) bf16 post-conv, row stride ldk
  int64_t ldq = 0, ldk = 0;
  const uint16_t* a = nullptr;     // (rows, Hv) bf16, row stride lda
  const uint16_t* b = nullptr;     // (rows, Hv) bf16, row stride ldb
  int64_t lda = 0, ldb = 0;
  uint16_t* q_out = nullptr;       // (rows, Hk·dk) bf16 dense; may be q when ldq = Hk·dk
  uint16_t* k_out = nullptr;       // (rows, Hk·dk) bf16 dense; may be k likewise
  float* g = nullptr;              // (rows, Hv) dense
  float* beta = nullptr;           // (rows, Hv) dense
};

cudaError_t gdn_prepare_cuda(const GdnPrepareArgs& p, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
