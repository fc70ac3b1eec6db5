// Plain parameter structs shared by the CPU reference kernels and, later, the
// CUDA kernels of the same names.
//
// Dimension letters (used in every shape comment in src/ops):
//   T tokens of one sequence segment, H heads, P head dim, N state size,
//   G groups (Mamba2 B/C groups), K conv width, C conv channels,
//   Hk/Hv key/value heads and dk/dv key/value head dims (Gated DeltaNet).
// Kernels take pointers, shapes and row strides (in elements), never model
// or store objects: the host owns bookkeeping, kernels read these.
#pragma once

#include <cstdint>

namespace replayssm::ops {

// Causal depthwise conv over the last K pre-conv rows, then SiLU.
struct Conv1dParams {
  int64_t channels = 0;          // C
  int64_t width = 0;             // K
  const float* weight = nullptr; // (C, K); weight[c*K + K-1] multiplies the newest row
  const float* bias = nullptr;   // (C) or nullptr
};

// Mamba2 selective state update (DESIGN.md §2), one head per (h), groups
// shared by H/G consecutive heads.
struct Mamba2Params {
  int64_t n_heads = 0;    // H
  int64_t head_dim = 0;   // P
  int64_t state_size = 0; // N
  int64_t n_groups = 0;   // G, divides H
  const float* A_log = nullptr;    // (H); A = -exp(A_log)
  const float* D = nullptr;        // (H)
  const float* dt_bias = nullptr;  // (H)
  float dt_min = 0.0f;             // clamp of softplus(dt + dt_bias)
  float dt_max = 0.0f;             // +inf for no upper limit
};

// Gated DeltaNet (DESIGN.md §2). Key heads are repeated to value heads:
// value head h reads key head h / (Hv/Hk).
struct GdnParams {
  int64_t n_k_heads = 0;  // Hk
  int64_t n_v_heads = 0;  // Hv, a multiple of Hk
  int64_t k_dim = 0;      // dk
  int64_t v_dim = 0;      // dv
  const float* A_log = nullptr;    // (Hv)
  const float* dt_bias = nullptr;  // (Hv)
  float l2_eps = 1e-6f;            // q,k L2 normalisation epsilon
};

// Causal attention of T new query rows over L cached K/V rows (GQA).
struct AttentionParams {
  int64_t n_heads = 0;     // Hq
  int64_t n_kv_heads = 0;  // Hkv, divides Hq
  int64_t head_dim = 0;    // D
  float scale = 1.0f;      // softmax scale, usually D^-1/2
};

}  // namespace replayssm::ops
