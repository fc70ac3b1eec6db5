// The parts of a forward step on CUDA that read no per-sequence state: the
// embedding and the first norm, the attention projections (q | k | v,
// Qwen3.5's per-head q/k norms, RoPE), the MLP, and a block's output
// projection into the residual stream followed by the next block's norm.
// The stateful parts (attention over K/V pages, the SSM layers over the
// plan's slots and logs) are layer_launches.h.
//
// A step is `rows` token rows; every buffer below holds the most rows a
// step of its owner has. Shapes: Hd hidden size, rows × width each.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/device_model.h"
#include "ops/cuda/gemm.h"
#include "replayssm/status.h"

namespace replayssm::cuda {

// The activations of one step and where its launches go. Borrowed: the
// owner allocates them.
struct StepBuffers {
  const char* context = "cuda";     // error messages: "context: what: <CUDA's message>"
  ops::cuda::Gemm* gemm = nullptr;  // bound to `stream`
  cudaStream_t stream = nullptr;
  float* h = nullptr;               // (rows, Hd) fp32 residual stream
  uint16_t* xn = nullptr;           // (rows, Hd) bf16: the next block's normed input
  uint16_t* d = nullptr;            // (rows, Hd) bf16: a block's output (scratch)
  uint16_t* proj = nullptr;         // (rows, widest fused input projection) bf16
  uint16_t* aq = nullptr;           // qk-norm models: q (rows, Hq·head stride) in rows of its own
  uint16_t* ak = nullptr;           //                 k (rows, Hkv·D)
  uint16_t* av = nullptr;           //                 v (rows, Hkv·D)
  const float* inv_freq = nullptr;  // (rotary_dim / 2) RoPE frequencies (rope_inv_freq), or nullptr
};

// Where an attention block's rows are after attention_qkv: head h of row r
// of q at q + r·ldq + h·head_stride (head_stride 2·D with Qwen3.5's output
// gate, the gate at + D), K and V rows of Hkv·D at k + r·ldk, v + r·ldv.
struct AttentionRows {
  uint16_t* q = nullptr;
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  int64_t ldq = 0, ldk = 0, ldv = 0, head_stride = 0;
};

// h = embed[tokens] (fp32), then xn = the first block's norm of h (the
// final norm's when the model has no blocks). tokens: (rows) on the device.
Status embed_rows(const StepBuffers& s, const DeviceModel& m, const int32_t* tokens, int64_t rows);

// An attention block's projections of xn: q | k | v (one GEMM, or three
// into aq, ak, av with the per-head norms), RoPE at each row's position
// (row_pos: (rows) on the device).
Status attention_qkv(const StepBuffers& s, const DeviceModel& m, const DeviceBlock& blk, int64_t rows,
                     const int32_t* row_pos, AttentionRows* out);

// An MLP block whole: up (and gate), the activation, then project_out.
Status mlp_block(const StepBuffers& s, const DeviceModel& m, const DeviceBlock& blk, int64_t rows,
                 const float* next_norm);

// A block's output projection of y (rows, n_in; row stride ldy) added into
// h, then xn = norm(h) with next_norm (the next block's, or the final
// norm's): Gemm::linear_residual_norm.
Status project_out(const StepBuffers& s, const DeviceModel& m, const DeviceBlock& blk, const uint16_t* y, int64_t ldy,
                   int64_t n_in, int64_t rows, const float* next_norm, const char* what);

}  // namespace replayssm::cuda
