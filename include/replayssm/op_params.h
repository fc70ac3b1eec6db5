// Plain parameter structs shared by the CPU reference kernels and, later, the
// CUDA kernels of the same names.
//
// Dimension letters (used in every shape comment in src/ops):
//   T tokens of one sequence segment, H heads, P head dim, N state size,
//   G groups (Mamba2 B/C groups), K conv width, C conv channels,
//   Hk/Hv key/value heads and dk/dv key/value head dims (Gated DeltaNet),
//   E routed experts and, in the MoE params only, K experts per token.
// Kernels take pointers, shapes and row strides (in elements), never model
// or store objects: the host owns bookkeeping, kernels read these.
#pragma once

#include <cstdint>

#include "replayssm/model_config.h"

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

// MoE routing (DESIGN.md §10): from a token's E router logits, the K experts
// it runs and their weights. Two scorings:
//   softmax  p = softmax(logits); the K largest p; w = p, over their sum when
//            norm_topk_prob.
//   sigmoid  s = sigmoid(logits), choice = s + correction_bias; groups of E/G
//            consecutive experts scored by the sum of their two largest
//            choices, the topk_group best kept; the K largest choices among
//            the kept groups' experts; w = s (the uncorrected score), over
//            (their sum + 1e-20) when norm_topk_prob.
// Then w ·= routed_scaling_factor. Every comparison breaks ties toward the
// lower index (expert or group), so the choice is a function of the logits.
struct MoeRoutingParams {
  enum Scoring { kSoftmax, kSigmoid } scoring = kSoftmax;
  int64_t n_experts = 0;   // E
  int64_t top_k = 0;       // K, 1 <= K <= E
  int64_t n_group = 1;     // G (sigmoid), divides E, E/G >= 2
  int64_t topk_group = 1;  // groups kept (sigmoid), 1 <= topk_group <= G, topk_group·E/G >= K
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  const float* correction_bias = nullptr;  // (E) or nullptr; sigmoid only
};

// A model's routing: its MoE block's fields, and one layer's correction
// bias (host or device, as the caller's op reads it).
inline MoeRoutingParams moe_routing_params(const MoeConfig& m, const float* correction_bias) {
  MoeRoutingParams p;
  p.scoring = m.router == MoeConfig::Router::kSigmoid ? MoeRoutingParams::kSigmoid : MoeRoutingParams::kSoftmax;
  p.n_experts = m.n_experts, p.top_k = m.top_k, p.n_group = m.n_group, p.topk_group = m.topk_group;
  p.norm_topk_prob = m.norm_topk_prob, p.routed_scaling_factor = m.routed_scaling_factor;
  p.correction_bias = correction_bias;
  return p;
}

// A mixture-of-experts feed-forward over rows of width D (DESIGN.md §10).
// Each row is routed (MoeRoutingParams over its router logits x·routerᵀ,
// fp32), each chosen expert runs on the rows that chose it, and a row's
// output is its experts' outputs times their weights added in ascending
// expert order, then the shared expert's output (times
// sigmoid(x·shared_gateᵀ) where there is that gate). An expert is
//   gated  down(act(gate(x)) ⊙ up(x)), its up rows [gate (I) | up (I)]
//   plain  down(act(up(x)))
// and the shared expert the same with its own matrices (and biases).
struct MoeParams {
  MoeRoutingParams routing;
  int64_t hidden = 0;  // D
  int64_t inter = 0;   // I, a routed expert's width
  bool gated = false;
  Activation act = Activation::kSilu;
  const float* router = nullptr;  // (E, D)
  const float* up = nullptr;      // (E, 2I, D) gated, (E, I, D) plain
  const float* down = nullptr;    // (E, D, I)
  int64_t shared_inter = 0;       // Is; 0: no shared expert
  const float* shared_gate_proj = nullptr;  // (Is, D), gated only
  const float* shared_up = nullptr;         // (Is, D)
  const float* shared_down = nullptr;       // (D, Is)
  const float* shared_gate_proj_b = nullptr;  // (Is) or nullptr
  const float* shared_up_b = nullptr;         // (Is) or nullptr
  const float* shared_down_b = nullptr;       // (D) or nullptr
  const float* shared_gate = nullptr;         // (D): the shared output's sigmoid gate, or nullptr
};

}  // namespace replayssm::ops

namespace replayssm::ops {

// Paged access to the log entries of one SSM layer: the entry of position
// p is at pages[p / page_size] + (p % page_size)·stride + offset.
struct LogView {
  const float* const* pages = nullptr;
  int64_t page_size = 1;
  int64_t stride = 0;
  int64_t offset = 0;
  const float* entry(int64_t p) const {
    return pages[p / page_size] + (p % page_size) * stride + offset;
  }
};

// Paged access to one attention layer's K/V rows: row p of K is at
// k_pages[p / page_size] + (p % page_size)·stride, likewise V.
struct KvView {
  const float* const* k_pages = nullptr;
  const float* const* v_pages = nullptr;
  int64_t page_size = 1;
  int64_t stride = 0;
  const float* k(int64_t p) const { return k_pages[p / page_size] + (p % page_size) * stride; }
  const float* v(int64_t p) const { return v_pages[p / page_size] + (p % page_size) * stride; }
};

// Log entry layouts (floats), DESIGN.md §2:
//   Mamba2:          pre-conv xBC (C) | dt (H, post-softplus)
//   Gated DeltaNet:  pre-conv qkv (C) | u (Hv·dv) | g (Hv)
// The post-conv x | B (Mamba2) and normalised k (GDN) that the recurrence
// consumes are not stored: replay recomputes them from the entry's pre-conv
// row and the K-1 rows before it (earlier entries, or the checkpoint's conv
// window) with the forward's own arithmetic, so they round identically.
inline int64_t mamba2_entry_floats(const Mamba2Params& p, int64_t conv_channels) {
  return conv_channels + p.n_heads;
}
inline int64_t gdn_entry_floats(const GdnParams& p, int64_t conv_channels) {
  return conv_channels + p.n_v_heads * p.v_dim + p.n_v_heads;
}

// One sequence's part of a replay step for one SSM layer (DESIGN.md §1):
// the checkpoint at base_pos, the log of [base_pos, pos), and n new tokens
// at [pos, pos+n). The kernel reads the checkpoint and the log, writes the n
// new entries, the n outputs, and the state (+ conv window) after
// write_pos[i] tokens into each write slot — and nothing else.
struct ReplayArgs {
  const float* ckpt_window = nullptr;  // (K-1, C) at base_pos; nullptr = zeros (position 0)
  const float* ckpt_state = nullptr;   // (H, rows, cols) at base_pos; nullptr = zeros
  int64_t base_pos = 0, pos = 0, n = 0;
  LogView log;                          // entries of [base_pos, pos)
  float* new_entries = nullptr;         // (n, entry floats), written
  // A write may go into the checkpoint's own slot (write_state[i] ==
  // ckpt_state, write_window[i] == ckpt_window: a flush in place); the
  // kernel reads the checkpoint before it writes anything there.
  int n_writes = 0;
  const int64_t* write_pos = nullptr;   // each in [base_pos, pos + n], ascending
  float* const* write_state = nullptr;  // (H, rows, cols)
  float* const* write_window = nullptr; // (K-1, C)
  // true: outputs by the sequential recurrence (bit-identical to stepping);
  // false: by the dual form from the checkpoint and the log (no state pass).
  bool exact = true;
};

}  // namespace replayssm::ops
