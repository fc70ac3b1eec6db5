// StateCache: the only way the CPU reference's forward pass reaches
// per-sequence state.
//
// A forward step runs a batch of sequence slices (each: n new tokens of one
// sequence, at rows [row, row+n) of the step's activation matrices). Every
// GEMM is done by the model over all rows at once; the parts of a layer that
// read or write history — attention over the KV rows, the conv window and
// the recurrence of an SSM layer — are delegated to the cache. That is the
// seam state storage plugs into: the dense cache reads and writes a state
// per sequence (the standard path, the parity tests' reference); the CPU
// backend's plan cache runs the state manager's plan (a checkpoint and a
// log, docs/architecture.md); neither changes the model code. The cache
// knows layer shapes (CacheSpec), not architectures.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "replayssm/cache_spec.h"
#include "replayssm/op_params.h"
#include "replayssm/status.h"

namespace replayssm {

// Not thread-safe: one step at a time. A step is begin_step, then the
// layer calls in forward order, then end_step; a failed begin_step leaves
// the cache unchanged.
class StateCache {
 public:
  virtual ~StateCache() = default;

  // Checks each slice against the sequence it names and reserves room for
  // the new tokens (may fail with kOutOfBudget). tokens: every row's token
  // id, in row order.
  virtual Status begin_step(std::span<const SeqSlice> step, std::span<const int32_t> tokens) = 0;

  // q: (rows, Hq·D) stride ldq, post-RoPE. k, v: (rows, Hkv·D) stride ldkv,
  // the new rows to append. out: (rows, Hq·D) stride ldo.
  virtual void attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice> step,
                         const float* q, int64_t ldq, const float* k, const float* v, int64_t ldkv,
                         float* out, int64_t ldo) = 0;

  // xbc: (rows, C) pre-conv rows, stride ldxbc; dt: (rows, H) raw, stride
  // lddt. y: (rows, H·P) = the recurrence output incl. the D skip, stride ldy.
  virtual void mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p,
                      std::span<const SeqSlice> step, const float* xbc, int64_t ldxbc,
                      const float* dt, int64_t lddt, float* y, int64_t ldy) = 0;

  // qkv: (rows, 2·Hk·dk + Hv·dv) pre-conv rows, stride ldqkv; a, b: (rows, Hv)
  // strides lda, ldb. o: (rows, Hv·dv) delta-rule output, stride ldo.
  virtual void gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                              std::span<const SeqSlice> step, const float* qkv, int64_t ldqkv,
                              const float* a, int64_t lda, const float* b, int64_t ldb, float* o,
                              int64_t ldo) = 0;

  // The new tokens become part of each sequence.
  virtual void end_step(std::span<const SeqSlice> step) = 0;
};

}  // namespace replayssm
