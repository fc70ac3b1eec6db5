// CacheSpec and SeqSlice: the shapes of a model's stateful layers and one
// sequence's part of a step — the vocabulary the state manager, the plans
// and both backends share.
//
// The state manager knows layer shapes, never architectures: a layer is an
// attention layer (K/V rows), a Mamba2 layer or a Gated DeltaNet layer (a
// conv window and a recurrent state). Layer indices everywhere are indices
// into CacheSpec::layers.
#pragma once

#include <cstdint>
#include <vector>

namespace replayssm {

// Shapes of one stateful layer, in forward order.
struct CacheLayerSpec {
  enum Kind { kAttention, kMamba2, kGatedDeltaNet } kind;
  int64_t n_kv_heads = 0, head_dim = 0;                 // attention: K/V rows of Hkv·D
  int64_t conv_channels = 0, conv_width = 0;            // SSM: conv window (K-1, C)
  int64_t n_heads = 0, state_rows = 0, state_cols = 0;  // SSM state (H, rows, cols)
};

struct CacheSpec {
  std::vector<CacheLayerSpec> layers;
  // Model FLOPs to re-run one token (≈ 2 × parameters): the cost model's
  // price of a re-prefill, against replaying the log.
  double prefill_flops_per_token = 0.0;
};

// One sequence's part of a step: n tokens at positions [pos, pos+n), rows
// [row, row+n) of the step. Normally pos is the number of tokens the
// sequence holds (new tokens); pos < length is a rebuild of positions it
// already holds (a re-prefill from a checkpoint at pos, to its length).
// `commit`: the new tokens are committed on arrival (a prompt, a plain AR
// step), rather than drafts that may be rolled back.
struct SeqSlice {
  int64_t seq = 0;
  int64_t pos = 0;
  int64_t n = 0;
  int64_t row = 0;
  bool commit = true;
};

}  // namespace replayssm
