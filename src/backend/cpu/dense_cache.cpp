// DenseCache (see dense_cache.h): per-sequence buffers, CPU mixers.
#include "backend/cpu/dense_cache.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "core/check.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/ssm_mixer.h"

namespace replayssm {

DenseCache::DenseCache(CacheSpec spec) : spec_(std::move(spec)) {}

int64_t DenseCache::add_sequence() {
  Sequence s;
  s.layers.resize(spec_.layers.size());
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    const CacheLayerSpec& l = spec_.layers[i];
    if (l.kind == CacheLayerSpec::kAttention) continue;
    s.layers[i].window.assign(static_cast<size_t>((l.conv_width - 1) * l.conv_channels), 0.0f);
    s.layers[i].state.assign(static_cast<size_t>(l.n_heads * l.state_rows * l.state_cols), 0.0f);
  }
  seqs_.emplace(next_id_, std::move(s));
  return next_id_++;
}

Result<int64_t> DenseCache::fork(int64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return invalid_argument("fork: no sequence " + std::to_string(seq));
  seqs_.emplace(next_id_, it->second);
  return next_id_++;
}

Status DenseCache::release(int64_t seq) {
  if (seqs_.erase(seq) == 0) return invalid_argument("release: no sequence " + std::to_string(seq));
  return {};
}

int64_t DenseCache::length(int64_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? -1 : it->second.len;
}

size_t DenseCache::state_bytes() const {
  size_t n = 0;
  for (const auto& [id, s] : seqs_)
    for (const Layer& l : s.layers) n += (l.window.size() + l.state.size()) * sizeof(float);
  return n;
}

size_t DenseCache::kv_bytes() const {
  size_t n = 0;
  for (const auto& [id, s] : seqs_)
    for (const Layer& l : s.layers) n += (l.k.size() + l.v.size()) * sizeof(float);
  return n;
}

DenseCache::Sequence& DenseCache::seq_(int64_t id) {
  auto it = seqs_.find(id);
  RSSM_CHECK(it != seqs_.end());  // begin_step validated every id
  return it->second;
}

Status DenseCache::begin_step(std::span<const SeqSlice> step, std::span<const int32_t>) {
  std::set<int64_t> seen;
  for (const SeqSlice& s : step) {
    auto it = seqs_.find(s.seq);
    if (it == seqs_.end()) return invalid_argument("step: no sequence " + std::to_string(s.seq));
    if (!seen.insert(s.seq).second)
      return invalid_argument("step: sequence " + std::to_string(s.seq) + " appears twice");
    if (s.pos != it->second.len)
      return invalid_argument("step: sequence " + std::to_string(s.seq) + " holds " +
                              std::to_string(it->second.len) + " tokens, slice starts at " +
                              std::to_string(s.pos));
    if (s.n <= 0) return invalid_argument("step: empty slice for sequence " + std::to_string(s.seq));
  }
  return {};
}

void DenseCache::attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice> step,
                           const float* q, int64_t ldq, const float* k, const float* v,
                           int64_t ldkv, float* out, int64_t ldo) {
  const int64_t width = p.n_kv_heads * p.head_dim;
  for (const SeqSlice& s : step) {
    Layer& l = seq_(s.seq).layers[layer];
    l.k.resize(static_cast<size_t>((s.pos + s.n) * width));
    l.v.resize(l.k.size());
    for (int64_t t = 0; t < s.n; ++t) {
      std::copy_n(k + (s.row + t) * ldkv, width, l.k.data() + (s.pos + t) * width);
      std::copy_n(v + (s.row + t) * ldkv, width, l.v.data() + (s.pos + t) * width);
    }
    const float* kp = l.k.data();
    const float* vp = l.v.data();
    const ops::KvView view{&kp, &vp, INT64_MAX, width};  // one page holds every row
    ops::cpu::attention(p, q + s.row * ldq, ldq, s.pos, s.n, view, out + s.row * ldo, ldo);
  }
}

void DenseCache::mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p,
                        std::span<const SeqSlice> step, const float* xbc, int64_t ldxbc,
                        const float* dt, int64_t lddt, float* y, int64_t ldy) {
  for (const SeqSlice& s : step) {
    Layer& l = seq_(s.seq).layers[layer];
    ops::cpu::mamba2_mixer(conv, p, l.window.data(), l.state.data(), xbc + s.row * ldxbc, ldxbc,
                           dt + s.row * lddt, lddt, s.n, y + s.row * ldy, ldy, &scratch_);
  }
}

void DenseCache::gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                                std::span<const SeqSlice> step, const float* qkv, int64_t ldqkv,
                                const float* a, int64_t lda, const float* b, int64_t ldb, float* o,
                                int64_t ldo) {
  for (const SeqSlice& s : step) {
    Layer& l = seq_(s.seq).layers[layer];
    ops::cpu::gdn_mixer(conv, p, l.window.data(), l.state.data(), qkv + s.row * ldqkv, ldqkv,
                        a + s.row * lda, lda, b + s.row * ldb, ldb, s.n, o + s.row * ldo, ldo,
                        &scratch_);
  }
}

void DenseCache::end_step(std::span<const SeqSlice> step) {
  for (const SeqSlice& s : step) seq_(s.seq).len += s.n;
}

}  // namespace replayssm
