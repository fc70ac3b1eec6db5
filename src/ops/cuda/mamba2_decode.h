// Mamba2 decode kernels on CUDA: the standard state update and the replay
// pair (output-only decode from a checkpoint and a log; flush that folds the
// log into the checkpoint). Host header: plain device pointers, shapes and
// slot indices (bf16 arrays are passed as uint16_t so that C++ callers need
// no CUDA headers beyond the runtime API).
//
// Shapes: B batch, H heads, P head dim, N state size, G groups (head h reads
// group h/(H/G)), W log capacity per sequence. The math is DESIGN.md §2 and
// the CPU reference in src/ops/cpu/mamba2_scan.cpp / replay.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace replayssm::ops::cuda {

struct Mamba2DecodeArgs {
  int batch = 0, H = 0, P = 0, N = 0, G = 0;
  const float* A_log = nullptr;    // (H)
  const float* D = nullptr;        // (H)
  const float* dt_bias = nullptr;  // (H)
  float dt_min = 0.0f, dt_max = 3.4e38f;
  float* state = nullptr;          // (slots, H, P, N) fp32
  const int32_t* slot = nullptr;   // (B) state / checkpoint slot of each sequence
  const uint16_t* x = nullptr;     // (B, H, P) bf16, the new token (post-conv)
  const uint16_t* Bm = nullptr;    // (B, G, N) bf16
  const uint16_t* Cm = nullptr;    // (B, G, N) bf16
  const float* dt_raw = nullptr;   // (B, H) before softplus
  uint16_t* y = nullptr;           // (B, H, P) bf16 output (incl. D·x)
  // Replay: each sequence's log since its checkpoint (dense, capacity W).
  int W = 0;
  const int32_t* n_log = nullptr;     // (B) entries in use, 0..W
  const uint16_t* log_x = nullptr;    // (B, W, H, P) bf16
  const uint16_t* log_B = nullptr;    // (B, W, G, N) bf16
  const float* log_dt = nullptr;      // (B, W, H) after softplus and clamp
};

// Standard decode: reads and writes every state. state[slot] ← dA·S + dt·x⊗B, y = S·C + D·x.
cudaError_t mamba2_step_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream);
// Replay decode (dual form): y of the new token from the checkpoint
// state[slot] and the log plus the new token; the checkpoint is only read.
cudaError_t mamba2_replay_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream);
// Flush: folds the n_log logged entries into state[slot], in place (one
// read and one write per W tokens).
cudaError_t mamba2_flush_cuda(const Mamba2DecodeArgs& a, cudaStream_t stream);

}  // namespace replayssm::ops::cuda
