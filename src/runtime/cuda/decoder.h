// Decoder: batched decoding on the GPU, a batch of sequences that advance
// together, one token each per step — the standard or the replay state
// layout (DESIGN.md §1) behind the same step.
//
// A step embeds each sequence's token, runs every block (fused input GEMM,
// conv, SSM decode kernel or paged attention, norm, output GEMM, residual)
// and ends with the LM head and a device argmax. The host owns the
// bookkeeping: before a step it writes the step's plan (tokens, positions,
// log lengths, folds) to one pinned buffer; the step's first node copies it
// to the device and every kernel reads it there. A step is therefore the
// same sequence of launches every time, captured once as a CUDA graph (two
// with replay: steps that fold the log and steps that do not), with no
// host synchronisation inside it; the host waits once per step, for the
// argmax.
//
//   standard — every SSM layer reads and writes each sequence's state in
//              place, every step;
//   replay   — each SSM layer reads a checkpoint and the sequence's log of
//              the last < W tokens' inputs and writes no state, except on
//              the step whose log fills: that step folds it into the
//              checkpoint in the same pass (Mamba2: all W entries; Gated
//              DeltaNet: the W−1 before the new token, whose u is only known
//              after the step's read, so it moves to the front of the log).
//
// Prefill runs as decode steps (one prompt token per step): exact, not fast.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "replayssm/status.h"
#include "runtime/cuda/device_model.h"

namespace replayssm::cuda {

enum class DecodeStrategy { kStandard, kReplay };
const char* decode_strategy_name(DecodeStrategy s);

struct DecoderOptions {
  DecodeStrategy strategy = DecodeStrategy::kReplay;
  int64_t batch = 1;           // sequences
  int64_t max_context = 2048;  // positions per sequence (prompt + new tokens)
  int window = 16;             // replay: log capacity W, 2..64
  int kv_page = 64;            // attention: rows per KV page
  bool graphs = true;          // replay each step as a captured CUDA graph
};

// Device memory, by what holds it.
struct DecoderMemory {
  int64_t state_bytes = 0;      // SSM states or checkpoints, conv windows, logs
  int64_t kv_bytes = 0;         // paged K/V for max_context positions
  int64_t workspace_bytes = 0;  // activations, logits, scratch, cuBLAS workspace
};

class Decoder {
 public:
  // Allocates everything a step needs (fails with out_of_budget naming the
  // buffer when the device cannot hold it); every sequence starts empty.
  static Result<std::unique_ptr<Decoder>> create(const DeviceModel& model, const DecoderOptions& options);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const DecoderOptions& options() const { return opt_; }
  const DecoderMemory& memory() const { return mem_; }
  int64_t length() const { return pos_; }  // tokens each sequence holds

  // One step: sequence b takes tokens[b] at position length(). next[b] gets
  // the argmax of its logits; logits (batch × vocab fp32, host), when given,
  // every logit. Token ids are checked; a full context is refused.
  Status step(std::span<const int32_t> tokens, std::span<int32_t> next, float* logits = nullptr);

  // Every sequence back to empty: states, checkpoints and conv windows zeroed.
  Status reset();

  int64_t folds() const { return folds_; }  // replay steps that folded the log

 private:
  struct Impl;
  Decoder() = default;
  DecoderOptions opt_;
  DecoderMemory mem_;
  int64_t pos_ = 0, folds_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace replayssm::cuda
