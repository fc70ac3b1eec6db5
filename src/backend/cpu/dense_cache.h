// DenseCache: the standard storage strategy — one KV buffer, one conv window
// and one SSM state per sequence, read and written by every step.
//
// This is what today's engines do and what the replay store is measured
// against; it is also the simplest correct StateCache, used by the CPU
// reference forward and its parity tests.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "replayssm/state_cache.h"

namespace replayssm {

class DenseCache final : public StateCache {
 public:
  explicit DenseCache(CacheSpec spec);

  // A new empty sequence; returns its id.
  int64_t add_sequence();
  // A new sequence holding a full copy of `seq` (the standard path's fork).
  Result<int64_t> fork(int64_t seq);
  // Frees the sequence; later use of the id is an error.
  Status release(int64_t seq);
  // Tokens held by `seq`, or -1 if there is no such sequence.
  int64_t length(int64_t seq) const;

  // Bytes held now: SSM conv windows + states, and KV rows.
  size_t state_bytes() const;
  size_t kv_bytes() const;
  const CacheSpec& spec() const { return spec_; }

  Status begin_step(std::span<const SeqSlice> step, std::span<const int32_t> tokens) override;
  void attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice> step,
                 const float* q, int64_t ldq, const float* k, const float* v, int64_t ldkv,
                 float* out, int64_t ldo) override;
  void mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p,
              std::span<const SeqSlice> step, const float* xbc, int64_t ldxbc, const float* dt,
              int64_t lddt, float* y, int64_t ldy) override;
  void gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                      std::span<const SeqSlice> step, const float* qkv, int64_t ldqkv,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float* o,
                      int64_t ldo) override;
  void end_step(std::span<const SeqSlice> step) override;

 private:
  struct Layer {
    std::vector<float> k, v;      // attention: (len, Hkv·D) each
    std::vector<float> window;    // SSM: (K-1, C)
    std::vector<float> state;     // SSM: (H, rows, cols)
  };
  struct Sequence {
    int64_t len = 0;
    std::vector<Layer> layers;
  };

  Sequence& seq_(int64_t id);

  CacheSpec spec_;
  std::map<int64_t, Sequence> seqs_;
  int64_t next_id_ = 0;
  std::vector<float> scratch_;
};

}  // namespace replayssm
