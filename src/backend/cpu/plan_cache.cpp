// PlanCache (see plan_cache.h): the CPU reference's slot storage and the
// stateful layers of a step run against the plan.
#include "backend/cpu/plan_cache.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/replay.h"

namespace replayssm::cpu {

namespace {

// Log entry floats of an SSM layer, from its cache shape (op_params.h):
// Mamba2 pre-conv xBC | dt, GDN pre-conv qkv | u | g.
int64_t entry_floats(const CacheLayerSpec& l) {
  const int64_t C = l.conv_channels, H = l.n_heads;
  if (l.kind == CacheLayerSpec::kMamba2) return C + H;
  return C + H * l.state_cols + H;
}

int64_t window_floats(const CacheLayerSpec& l) { return (l.conv_width - 1) * l.conv_channels; }
int64_t state_floats(const CacheLayerSpec& l) { return l.n_heads * l.state_rows * l.state_cols; }

}  // namespace

StateUnits PlanCache::units(const CacheSpec& spec) {
  StateUnits u;
  for (const CacheLayerSpec& l : spec.layers) {
    if (l.kind == CacheLayerSpec::kAttention) {
      u.kv_row += 2 * l.n_kv_heads * l.head_dim * 4;
    } else {
      u.checkpoint_part.push_back((window_floats(l) + state_floats(l)) * 4);
      u.log_entry.push_back(entry_floats(l) * 4);
    }
  }
  return u;
}

PlanCache::PlanCache(CacheSpec spec, int64_t page_size) : spec_(std::move(spec)), B_(page_size) {
  for (const CacheLayerSpec& l : spec_.layers) {
    Layout L;
    L.spec = l;
    if (l.kind == CacheLayerSpec::kAttention) {
      L.kv_width = l.n_kv_heads * l.head_dim;
      L.kv_off = page_kv_floats_;
      page_kv_floats_ += B_ * 2 * L.kv_width;
    } else {
      L.ssm = n_ssm_++;
      L.entry = entry_floats(l);
      L.win_floats = window_floats(l);
      L.state_floats = state_floats(l);
    }
    layers_.push_back(L);
  }
}

void PlanCache::free_parts(Parts* parts) {
  for (std::vector<float>& p : *parts) {
    state_bytes_ -= static_cast<int64_t>(p.size()) * 4;
    p.clear();
    p.shrink_to_fit();
  }
}

void PlanCache::grow(int32_t slot, std::vector<std::vector<float>>* kv) {
  if (static_cast<size_t>(slot) >= kv->size()) kv->resize(static_cast<size_t>(slot) + 1);
}

std::vector<float>& PlanCache::ckpt_part(int32_t slot, int ssm) {
  if (static_cast<size_t>(slot) >= ckpts_.size()) ckpts_.resize(static_cast<size_t>(slot) + 1);
  Parts& parts = ckpts_[size_t(slot)];
  parts.resize(static_cast<size_t>(n_ssm_));
  std::vector<float>& p = parts[size_t(ssm)];
  if (p.empty()) {
    for (const Layout& L : layers_)
      if (L.ssm == ssm) p.assign(static_cast<size_t>(L.win_floats + L.state_floats), 0.0f);
    state_bytes_ += static_cast<int64_t>(p.size()) * 4;
  }
  return p;
}

const float* PlanCache::log_part(int32_t slot, int ssm) const {
  if (slot < 0 || static_cast<size_t>(slot) >= logs_.size()) return nullptr;
  const Parts& parts = logs_[size_t(slot)];
  if (parts.size() <= size_t(ssm) || parts[size_t(ssm)].empty()) return nullptr;
  return parts[size_t(ssm)].data();
}

void PlanCache::apply(std::span<const StorageOp> ops) {
  for (const StorageOp& op : ops) {
    switch (op.kind) {
      case StorageOp::kCopyPage:
        grow(op.dst, &kv_);
        RSSM_CHECK(size_t(op.src) < kv_.size() && !kv_[size_t(op.src)].empty());
        if (kv_[size_t(op.dst)].empty()) kv_bytes_ += page_kv_floats_ * 4;
        kv_[size_t(op.dst)] = kv_[size_t(op.src)];
        break;
      case StorageOp::kCopyLog: {
        if (static_cast<size_t>(op.dst) >= logs_.size()) logs_.resize(static_cast<size_t>(op.dst) + 1);
        RSSM_CHECK(size_t(op.src) < logs_.size());
        free_parts(&logs_[size_t(op.dst)]);
        logs_[size_t(op.dst)] = logs_[size_t(op.src)];
        for (const std::vector<float>& p : logs_[size_t(op.dst)]) state_bytes_ += static_cast<int64_t>(p.size()) * 4;
        break;
      }
      case StorageOp::kCopyCheckpoint: {
        if (static_cast<size_t>(op.dst) >= ckpts_.size()) ckpts_.resize(static_cast<size_t>(op.dst) + 1);
        RSSM_CHECK(size_t(op.src) < ckpts_.size());
        free_parts(&ckpts_[size_t(op.dst)]);
        ckpts_[size_t(op.dst)] = ckpts_[size_t(op.src)];
        for (const std::vector<float>& p : ckpts_[size_t(op.dst)]) state_bytes_ += static_cast<int64_t>(p.size()) * 4;
        break;
      }
      case StorageOp::kFreePage:
        if (size_t(op.src) < kv_.size() && !kv_[size_t(op.src)].empty()) {
          kv_bytes_ -= page_kv_floats_ * 4;
          kv_[size_t(op.src)].clear();
          kv_[size_t(op.src)].shrink_to_fit();
        }
        break;
      case StorageOp::kFreeLog:
        if (size_t(op.src) < logs_.size()) free_parts(&logs_[size_t(op.src)]);
        break;
      case StorageOp::kFreeCheckpoint:
        if (size_t(op.src) < ckpts_.size()) free_parts(&ckpts_[size_t(op.src)]);
        break;
    }
  }
}

void PlanCache::reset() {
  kv_.clear();
  logs_.clear();
  ckpts_.clear();
  state_bytes_ = kv_bytes_ = 0;
}

Status PlanCache::begin_step(std::span<const SeqSlice> step, std::span<const int32_t>) {
  RSSM_CHECK(plan_ != nullptr && step.size() == plan_->slices.size());
  apply(plan_->ops);
  // New pages get their K/V storage; the folded logs are marked.
  for (const PlanSlice& ps : plan_->slices) {
    const int64_t n_pages = (ps.pos + ps.n + B_ - 1) / B_;
    for (int64_t i = 0; i < n_pages; ++i) {
      const int32_t slot = plan_->pages[size_t(ps.table_begin + i)];
      grow(slot, &kv_);
      if (kv_[size_t(slot)].empty()) {
        kv_[size_t(slot)].assign(static_cast<size_t>(page_kv_floats_), 0.0f);
        kv_bytes_ += page_kv_floats_ * 4;
      }
    }
  }
  folded_.assign(logs_.size(), 0);
  for (int32_t slot : plan_->folded_logs) {
    if (static_cast<size_t>(slot) >= folded_.size()) folded_.resize(static_cast<size_t>(slot) + 1, 0);
    folded_[size_t(slot)] = 1;
  }
  return {};
}

void PlanCache::attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice>, const float* q,
                          int64_t ldq, const float* k, const float* v, int64_t ldkv, float* out, int64_t ldo) {
  const Layout& L = layers_[size_t(layer)];
  const int64_t w = L.kv_width;
  const int32_t* pages = plan_->pages.data();
  for (const PlanSlice& ps : plan_->slices) {
    if (!ps.rebuild)  // a rebuild re-reads the rows it already holds
      for (int64_t t = 0; t < ps.n; ++t) {
        const int64_t pos = ps.pos + t;
        float* row = kv_[size_t(pages[ps.table_begin + pos / B_])].data() + L.kv_off + (pos % B_) * 2 * w;
        std::memcpy(row, k + (ps.row + t) * ldkv, sizeof(float) * w);
        std::memcpy(row + w, v + (ps.row + t) * ldkv, sizeof(float) * w);
      }
    ptrs_a_.clear();
    ptrs_b_.clear();
    const int64_t n_pages = (ps.pos + ps.n + B_ - 1) / B_;
    for (int64_t i = 0; i < n_pages; ++i) {
      const float* base = kv_[size_t(pages[ps.table_begin + i])].data() + L.kv_off;
      ptrs_a_.push_back(base);
      ptrs_b_.push_back(base + w);
    }
    const ops::KvView view{ptrs_a_.data(), ptrs_b_.data(), B_, 2 * w};
    ops::cpu::attention(p, q + ps.row * ldq, ldq, ps.pos, ps.n, view, out + ps.row * ldo, ldo);
  }
}

// The kernel arguments of one slice for one SSM layer.
struct PlanCache::SliceArgs {
  ops::ReplayArgs a;
  std::vector<float*> ws, ww;
};

PlanCache::SliceArgs PlanCache::slice_args(const PlanSlice& ps, const Layout& L) {
  SliceArgs r;
  if (ps.base >= 0) {
    const float* d = ckpt_part(ps.base, L.ssm).data();
    r.a.ckpt_window = d;
    r.a.ckpt_state = d + L.win_floats;
  }
  r.a.base_pos = ps.base_pos;
  r.a.pos = ps.pos;
  r.a.n = ps.n;
  ptrs_a_.clear();
  const int64_t n_pages = (ps.pos + ps.n + B_ - 1) / B_;
  for (int64_t i = 0; i < n_pages; ++i) ptrs_a_.push_back(log_part(plan_->logs[size_t(ps.table_begin + i)], L.ssm));
  r.a.log = ops::LogView{ptrs_a_.data(), B_, L.entry, 0};
  // The step's new entries, by batch row (begin_layer sizes them).
  r.a.new_entries = entries_.data() + ps.row * L.entry;
  for (int32_t w = ps.write_begin; w < ps.write_end; ++w) {
    float* d = ckpt_part(plan_->write_slot[size_t(w)], L.ssm).data();
    r.ws.push_back(d + L.win_floats);
    r.ww.push_back(d);
  }
  r.a.n_writes = ps.write_end - ps.write_begin;
  r.a.write_pos = plan_->write_pos.data() + ps.write_begin;
  r.a.write_state = r.ws.data();
  r.a.write_window = r.ww.data();
  r.a.exact = plan_->exact;
  return r;
}

void PlanCache::begin_layer(const Layout& L) {
  for (const PlanSlice& ps : plan_->slices)
    for (int32_t w = ps.write_begin; w < ps.write_end; ++w) ckpt_part(plan_->write_slot[size_t(w)], L.ssm);
  int64_t rows = 0;
  for (const PlanSlice& ps : plan_->slices) rows = std::max(rows, ps.row + ps.n);
  entries_.resize(static_cast<size_t>(rows * L.entry));
}

void PlanCache::finish_layer(const Layout& L) {
  // The step's checkpoints now hold this layer's state: its part of the
  // folded logs goes before the new entries are stored.
  for (int32_t slot : plan_->folded_logs) {
    if (size_t(slot) >= logs_.size() || logs_[size_t(slot)].size() <= size_t(L.ssm)) continue;
    std::vector<float>& part = logs_[size_t(slot)][size_t(L.ssm)];
    state_bytes_ -= static_cast<int64_t>(part.size()) * 4;
    part.clear();
    part.shrink_to_fit();
  }
  for (const PlanSlice& ps : plan_->slices)
    for (int64_t t = 0; t < ps.n; ++t) {
      const int64_t pos = ps.pos + t;
      const int32_t slot = plan_->logs[size_t(ps.table_begin + pos / B_)];
      if (slot < 0 || (size_t(slot) < folded_.size() && folded_[size_t(slot)])) continue;  // no log here
      if (static_cast<size_t>(slot) >= logs_.size()) logs_.resize(static_cast<size_t>(slot) + 1);
      Parts& parts = logs_[size_t(slot)];
      parts.resize(static_cast<size_t>(n_ssm_));
      std::vector<float>& part = parts[size_t(L.ssm)];
      if (part.empty()) {
        part.assign(static_cast<size_t>(B_ * L.entry), 0.0f);
        state_bytes_ += static_cast<int64_t>(part.size()) * 4;
      }
      std::memcpy(part.data() + (pos % B_) * L.entry, entries_.data() + (ps.row + t) * L.entry,
                  sizeof(float) * L.entry);
    }
}

void PlanCache::mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p,
                       std::span<const SeqSlice>, const float* xbc, int64_t ldxbc, const float* dt, int64_t lddt,
                       float* y, int64_t ldy) {
  const Layout& L = layers_[size_t(layer)];
  begin_layer(L);
  for (const PlanSlice& ps : plan_->slices) {
    SliceArgs r = slice_args(ps, L);
    ops::cpu::mamba2_replay(conv, p, r.a, xbc + ps.row * ldxbc, ldxbc, dt + ps.row * lddt, lddt, y + ps.row * ldy,
                            ldy, &scratch_);
  }
  finish_layer(L);
}

void PlanCache::gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                               std::span<const SeqSlice>, const float* qkv, int64_t ldqkv, const float* a,
                               int64_t lda, const float* b, int64_t ldb, float* o, int64_t ldo) {
  const Layout& L = layers_[size_t(layer)];
  begin_layer(L);
  for (const PlanSlice& ps : plan_->slices) {
    SliceArgs r = slice_args(ps, L);
    ops::cpu::gdn_replay(conv, p, r.a, qkv + ps.row * ldqkv, ldqkv, a + ps.row * lda, lda, b + ps.row * ldb, ldb,
                         o + ps.row * ldo, ldo, &scratch_);
  }
  finish_layer(L);
}

void PlanCache::end_step(std::span<const SeqSlice>) { plan_ = nullptr; }

void PlanCache::read_state(const StateRead& read, int layer, const ops::Conv1dParams& conv,
                           const ops::Mamba2Params* mp, const ops::GdnParams* gp, std::vector<float>* window,
                           std::vector<float>* state) {
  const Layout& L = layers_[size_t(layer)];
  RSSM_CHECK(L.ssm >= 0);
  window->assign(static_cast<size_t>(L.win_floats), 0.0f);
  state->assign(static_cast<size_t>(L.state_floats), 0.0f);
  // A plan with no new tokens and one write at the length: the kernels'
  // sequential pass rebuilds the state there.
  ops::ReplayArgs a;
  if (read.base >= 0) {
    const float* d = ckpt_part(read.base, L.ssm).data();
    a.ckpt_window = d;
    a.ckpt_state = d + L.win_floats;
  }
  a.base_pos = read.base_pos;
  a.pos = read.length;
  a.n = 0;
  ptrs_a_.clear();
  for (int32_t slot : read.logs) ptrs_a_.push_back(log_part(slot, L.ssm));
  a.log = ops::LogView{ptrs_a_.data(), read.page_size, L.entry, 0};
  float* ws[1] = {state->data()};
  float* ww[1] = {window->data()};
  const int64_t wp[1] = {read.length};
  a.n_writes = 1;
  a.write_pos = wp;
  a.write_state = ws;
  a.write_window = ww;
  if (mp != nullptr) ops::cpu::mamba2_replay(conv, *mp, a, nullptr, 0, nullptr, 0, nullptr, 0, &scratch_);
  else ops::cpu::gdn_replay(conv, *gp, a, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0, &scratch_);
}

}  // namespace replayssm::cpu
