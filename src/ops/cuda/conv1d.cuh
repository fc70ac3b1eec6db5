// The conv1d kernels' per-channel arithmetic (conv1d.cu), shared with the
// Mamba2 step that runs the conv and the log append as one kernel
// (mamba2_conv_append.cu): the terms summed in the CPU's order (bias, then
// oldest row first), so both produce the same bits — from the window
// buffer or, kPaged, from a paged log's rows (Conv1dArgs::log_rows), the
// same values from elsewhere.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/conv1d.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/log_pages.cuh"
#include "ops/cuda/row_reduce.cuh"
#include "ops/cuda/tile.cuh"

namespace replayssm::ops::cuda {

constexpr int kConvThreads = 128;

// A kernel's parameter: the window path's fields, or (kPaged) all of them.
template <bool kPaged>
using ConvArgsT = std::conditional_t<kPaged, Conv1dArgs, Conv1dWindowArgs>;

// silu(bias + Σ_{j<K−1} w[j]·prev[j] + w[K−1]·newest); prev[0] is the oldest.
__device__ __forceinline__ float conv_out(const float* wc, float bias, const float (&prev)[kConvMaxK], float newest,
                                          int K) {
  float acc = bias;
#pragma unroll
  for (int j = 0; j < kConvMaxK - 1; ++j)
    if (j < K - 1) acc += wc[j] * prev[j];
  acc += wc[K - 1] * newest;
  return silu_f(acc);
}

// prev ← prev[1..K−2], newest.
__device__ __forceinline__ void conv_shift(float (&prev)[kConvMaxK], float newest, int K) {
#pragma unroll
  for (int j = 0; j < kConvMaxK - 1; ++j) {
    if (j < K - 2) prev[j] = prev[j + 1];
    if (j == K - 2) prev[j] = newest;
  }
}

// A paged window's sources (Conv1dArgs::log_rows), for a conv of K > 1.
inline bool conv1d_paged_ok(const Conv1dArgs& a) {
  return a.pages.page != nullptr && log_pages_valid(a.pages) && (a.ldlog == 0 || a.ldlog >= a.C) &&
         a.ckpt_window != nullptr && a.ckpt_slot != nullptr;
}

// The window update needs neither weights nor outputs, and has no paged form.
inline cudaError_t conv1d_check(const Conv1dArgs& a, bool window_only = false) {
  const bool paged = a.log_rows != nullptr;
  if (a.batch < 0 || a.C < 1 || a.K < 1 || a.K > kConvMaxK || a.x == nullptr || a.ldx < a.C ||
      a.batch > 65535 ||  // grid y / z
      (!window_only && (a.weight == nullptr || a.y == nullptr || a.ldy < a.C)) || (window_only && paged) ||
      (a.K > 1 && !paged && (a.window == nullptr || a.slot == nullptr)) ||
      (a.K > 1 && paged && (!conv1d_paged_ok(a) || a.n_logged == nullptr)))
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

// Sequence b's paged window (Conv1dArgs::log_rows): the pre-conv row at
// offset d from its base (d ≥ −(K−1)) — log entry d, or row d + K − 1 of
// its checkpoint's window — as a pointer to its channel 0, or nullptr for
// the zeros before position 0.
struct PagedWindow {
  PagedLog log;
  const uint16_t* ckpt;  // (K−1, C) the checkpoint's window, or nullptr: zeros
  __device__ __forceinline__ const uint16_t* row(const Conv1dArgs& a, int d) const {
    if (d >= 0) return a.log_rows + log.row(d) * (a.ldlog != 0 ? a.ldlog : a.C);
    return ckpt != nullptr ? ckpt + int64_t(d + a.K - 1) * a.C : nullptr;
  }
};
__device__ __forceinline__ PagedWindow paged_window(const Conv1dArgs& a, int b) {
  const int cs = a.ckpt_slot[b];
  return {paged_log(a.pages, b), cs >= 0 ? a.ckpt_window + int64_t(cs) * (a.K - 1) * a.C : nullptr};
}

// Decode: sequence b's new row (row b of x) at channel c. Returns the
// post-conv value as bf16 bits and shifts the window in place (it is bf16
// like x: shifted bit for bit). kPaged: the window's rows from the paged
// log, nothing shifted (the caller logs the new row).
template <bool kPaged>
__device__ __forceinline__ uint16_t conv_step_channel(const ConvArgsT<kPaged>& a, int c, int b) {
  const int K = a.K;
  if constexpr (kPaged) {
    float prev[kConvMaxK] = {};
    if (K > 1) {
      const PagedWindow pw = paged_window(a, b);
      const int d0 = a.n_logged[b] - (K - 1);  // the oldest row's offset from the base
#pragma unroll
      for (int j = 0; j < kConvMaxK - 1; ++j) {
        const uint16_t* r = j < K - 1 ? pw.row(a, d0 + j) : nullptr;
        if (r != nullptr) prev[j] = bf(r, c);
      }
    }
    const uint16_t xb = a.x[int64_t(b) * a.ldx + c];
    const float out = conv_out(a.weight + int64_t(c) * K, a.bias ? a.bias[c] : 0.0f, prev, bf(&xb, 0), K);
    return __bfloat16_as_ushort(__float2bfloat16(out));
  } else {
    // K = 1 has no window (window and slot may be nullptr).
    uint16_t* win = K > 1 ? a.window + int64_t(a.slot[b]) * (K - 1) * a.C + c : nullptr;
    float prev[kConvMaxK] = {};
#pragma unroll
    for (int j = 0; j < kConvMaxK - 1; ++j)
      if (j < K - 1) prev[j] = bf(win, int64_t(j) * a.C);
    const uint16_t xb = a.x[int64_t(b) * a.ldx + c];
    const float out = conv_out(a.weight + int64_t(c) * K, a.bias ? a.bias[c] : 0.0f, prev, bf(&xb, 0), K);
    for (int j = 0; j + 1 < K - 1; ++j) win[int64_t(j) * a.C] = win[int64_t(j + 1) * a.C];
    if (K > 1) win[int64_t(K - 2) * a.C] = xb;
    return __bfloat16_as_ushort(__float2bfloat16(out));
  }
}

// Channels a thread where the rows allow (conv_step_channels): two, as
// one 4-byte access per row. Measured end to end at 8B shapes, batch 256,
// on the H200 (2026-12-03, d30accf): 2 made 14,725–14,762 tok/s under
// replay, 1 made 14,625–14,633, 4 14,578–14,610, 8 14,211–14,247 — at 8 a
// warp's weight loads (8·K floats a thread) touch 32 lines each.
constexpr int kConvVec = 2;
constexpr uintptr_t kConvVecBytes = 2 * kConvVec;  // a thread's channels of one bf16 row

// kConvVec channels a thread need every row they touch — the window's
// (paged: the log's and the checkpoint's), x's and y's — to start on 4
// bytes: C, ldx, ldy (and ldlog) even and the bases aligned.
inline bool conv1d_vec_ok(const Conv1dArgs& a) {
  const bool rows_ok = a.log_rows == nullptr ? aligned_to(a.window, kConvVecBytes)
                                             : aligned_to(a.log_rows, kConvVecBytes) && a.ldlog % kConvVec == 0 &&
                                                   aligned_to(a.ckpt_window, kConvVecBytes);
  return a.C % kConvVec == 0 && a.ldx % kConvVec == 0 && a.ldy % kConvVec == 0 && aligned_to(a.x, kConvVecBytes) &&
         aligned_to(a.y, kConvVecBytes) && (a.K == 1 || rows_ok);
}

// Whether a decode step's conv threads take kConvVec channels: the rows
// aligned for it and the blocks enough for every multiprocessor (at small
// batch a thread per channel spreads the window's loads over more SMs).
inline cudaError_t conv1d_step_vec(const Conv1dArgs& a, bool* vec) {
  *vec = false;
  if (!conv1d_vec_ok(a)) return cudaSuccess;
  int sms = 0;
  if (cudaError_t e = device_sms(&sms); e != cudaSuccess) return e;
  *vec = int64_t(a.batch) * ((a.C + kConvVec * kConvThreads - 1) / (kConvVec * kConvThreads)) >= sms;
  return cudaSuccess;
}

// conv_step_channel for channels c .. c + kConvVec − 1 (c a multiple of
// kConvVec, conv1d_vec_ok): each row moves by one 4-byte access instead of
// two 2-byte ones, and each channel's terms are conv_out's — the same bits.
template <bool kPaged>
__device__ __forceinline__ void conv_step_channels(const ConvArgsT<kPaged>& a, int c, int b, uint32_t& out) {
  static_assert(kConvVec == 2, "a pair of bf16 a 4-byte word");
  using Pack = uint32_t;
  const int K = a.K;
  uint16_t* win = !kPaged && K > 1 ? a.window + int64_t(a.slot[b]) * (K - 1) * a.C + c : nullptr;
  Pack rows[kConvMaxK - 1];
  if constexpr (kPaged) {
    if (K > 1) {
      const PagedWindow pw = paged_window(a, b);
      const int d0 = a.n_logged[b] - (K - 1);  // the oldest row's offset from the base
#pragma unroll
      for (int j = 0; j < kConvMaxK - 1; ++j) {
        const uint16_t* r = j < K - 1 ? pw.row(a, d0 + j) : nullptr;
        rows[j] = r != nullptr ? *reinterpret_cast<const Pack*>(r + c) : 0u;
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kConvMaxK - 1; ++j)
      if (j < K - 1) rows[j] = *reinterpret_cast<const Pack*>(win + int64_t(j) * a.C);
  }
  const Pack xv = *reinterpret_cast<const Pack*>(a.x + int64_t(b) * a.ldx + c);
  const uint16_t* xe = reinterpret_cast<const uint16_t*>(&xv);
#pragma unroll
  for (int e = 0; e < kConvVec; ++e) {
    float prev[kConvMaxK] = {};
#pragma unroll
    for (int j = 0; j < kConvMaxK - 1; ++j)
      if (j < K - 1) prev[j] = bf(reinterpret_cast<const uint16_t*>(&rows[j]), e);
    const float o = conv_out(a.weight + int64_t(c + e) * K, a.bias ? a.bias[c + e] : 0.0f, prev, bf(xe, e), K);
    reinterpret_cast<uint16_t*>(&out)[e] = __bfloat16_as_ushort(__float2bfloat16(o));
  }
  if constexpr (!kPaged) {
#pragma unroll
    for (int j = 0; j + 1 < kConvMaxK - 1; ++j)
      if (j + 1 < K - 1) *reinterpret_cast<Pack*>(win + int64_t(j) * a.C) = rows[j + 1];
    if (K > 1) *reinterpret_cast<Pack*>(win + int64_t(K - 2) * a.C) = xv;
  }
}

}  // namespace replayssm::ops::cuda
