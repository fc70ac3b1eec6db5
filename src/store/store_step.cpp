// ReplayStore steps: begin_step builds the step plan (base checkpoint,
// state writes, pages to allocate) and reserves memory before anything
// changes; the layer calls run the kernels against the plan; end_step
// appends tokens, records which log entries became valid and prunes.
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/replay.h"
#include "store/store_impl.h"

namespace replayssm {

namespace {

std::string seq_str(int64_t id) { return "sequence " + std::to_string(id); }

}  // namespace

Status ReplayStore::begin_step(std::span<const SeqSlice> step, std::span<const int32_t> tokens) {
  Impl& m = *impl_;
  std::vector<SlicePlan> plan;
  std::set<int64_t> seen;
  Impl::Protected prot;
  for (int64_t s : m.pinned)
    if (const Seq* q = m.find(s)) m.protect_resume(*q, &prot);
  int64_t need_total = 0;
  std::map<int64_t, int64_t> need_req;

  // Phase 1: validate and plan; nothing changes.
  for (const SeqSlice& sl : step) {
    const Seq* s = m.find(sl.seq);
    if (s == nullptr) return invalid_argument("step: no " + seq_str(sl.seq));
    if (!seen.insert(sl.seq).second) return invalid_argument("step: " + seq_str(sl.seq) + " appears twice");
    if (sl.n <= 0) return invalid_argument("step: empty slice for " + seq_str(sl.seq));
    if (sl.pos < 0) return invalid_argument("step: " + seq_str(sl.seq) + " at position " + std::to_string(sl.pos));
    if (sl.row < 0 || sl.row > static_cast<int64_t>(tokens.size()) - sl.n)
      return invalid_argument("step: " + seq_str(sl.seq) + "'s rows [" + std::to_string(sl.row) + ", +" +
                              std::to_string(sl.n) + ") are outside the step's " + std::to_string(tokens.size()) +
                              " tokens");
    const int64_t len = static_cast<int64_t>(s->tokens.size()), end = sl.pos + sl.n;
    SlicePlan sp;
    sp.s = sl;
    sp.tokens.assign(tokens.begin() + sl.row, tokens.begin() + sl.row + sl.n);
    if (sl.pos == len) {
      const std::optional<int64_t> base = m.best_log_base(*s, len);
      if (!base) {
        const RestorePlan r = m.plan_resume(*s);
        return invalid_argument("step: " + seq_str(sl.seq) + " must be restored first (re-prefill of tokens [" +
                                std::to_string(r.from) + ", " + std::to_string(r.to) + "))");
      }
      sp.base = *base;
    } else if (sl.pos < len) {
      // A rebuild: re-run tokens [pos, len) from a checkpoint exactly at pos.
      if (end != len)
        return invalid_argument("step: rebuild of " + seq_str(sl.seq) + " must run to its length " + std::to_string(len));
      for (int64_t i = 0; i < sl.n; ++i)
        if (sp.tokens[i] != s->tokens[sl.pos + i])
          return invalid_argument("step: rebuild of " + seq_str(sl.seq) + " has a different token at position " +
                                  std::to_string(sl.pos + i));
      sp.rebuild = true;
      sp.base = sl.pos == 0 ? kZeroCkpt : -2;
      for (int64_t id : s->ckpts)
        if (m.ckpts.at(id).pos == sl.pos && !m.ckpts.at(id).evicted()) sp.base = id;
      if (sp.base == -2)
        return invalid_argument("step: rebuild of " + seq_str(sl.seq) + " must start at a checkpoint; none at " +
                                std::to_string(sl.pos));
    } else {
      return invalid_argument("step: " + seq_str(sl.seq) + " holds " + std::to_string(len) +
                              " tokens, slice starts at " + std::to_string(sl.pos));
    }
    sp.base_pos = m.ckpt_pos(sp.base);
    sp.committed_after = (sp.rebuild || !sl.commit) ? s->committed : end;
    plan.push_back(std::move(sp));
  }

  // State writes. Replay plans the whole step at once: forks of one family
  // agree on shared checkpoints.
  if (m.opt.strategy == Strategy::kReplay) m.plan_replay_step(&plan);
  for (SlicePlan& sp : plan) {
    const SeqSlice& sl = sp.s;
    const int64_t end = sl.pos + sl.n;
    switch (m.opt.strategy) {
      case Strategy::kReplay: break;
      case Strategy::kSnapshot:
        if (sp.rebuild || sl.commit) sp.write_pos = {end};
        else
          for (int64_t f = sl.pos + 1; f <= end; ++f) sp.write_pos.push_back(f);
        break;
      case Strategy::kRecompute: {
        const int64_t sparse = m.opt.checkpoint_interval > 0 ? m.opt.checkpoint_interval : m.opt.window;
        for (int64_t f = sl.pos + 1; f < end && !sp.rebuild; ++f)
          if (f % sparse == 0 && f <= sp.committed_after) sp.write_pos.push_back(f);
        sp.write_pos.push_back(end);
        break;
      }
    }
    // A single write may reuse the base's slot when nothing else holds the
    // base and the strategy would drop it after this step anyway: then a
    // flush costs no extra memory, as the standard path's in-place update.
    // (Replay decides this in its planner, families included.)
    if (m.opt.strategy != Strategy::kReplay && sp.write_pos.size() == 1 && sp.base != kZeroCkpt &&
        m.ckpts.at(sp.base).refs == 1) {
      const int64_t K = m.opt.checkpoint_interval, f = sp.write_pos[0];
      const bool kept_by_interval = K > 0 && sp.base_pos / K != f / K;
      bool reuse = false;
      if (m.opt.strategy == Strategy::kSnapshot) {
        reuse = (sp.rebuild || sl.commit) && !kept_by_interval;
      } else {
        const int64_t sparse = K > 0 ? K : m.opt.window;
        reuse = !(sp.base_pos % sparse == 0 && sp.base_pos <= sp.committed_after);
      }
      if (reuse) sp.reuse = 0;
    }
    const Seq* s = m.find(sl.seq);
    sp.fold_below = m.fold_below(sp);
    int64_t need = static_cast<int64_t>(sp.write_pos.size() - (sp.reuse >= 0)) * m.ckpt_bytes();
    for (int64_t pi = sl.pos / m.B; pi <= (end - 1) / m.B; ++pi) {
      if (pi >= static_cast<int64_t>(s->pages.size())) {
        if (m.logs && !sp.folds(pi, m.B)) need += m.log_bytes();
        continue;
      }
      // A rebuild needs only its checkpoint at the end: it refills logs that
      // are still allocated but allocates none (they are an optimisation
      // for later restores, and memory is what it is short of).
      const Page& pg = m.pages.at(s->pages[pi]);
      if (sp.rebuild) continue;
      if ((pg.refs > 1 && !pg.log.empty()) || (m.logs && pg.log.empty() && !sp.folds(pi, m.B)))
        need += m.log_bytes();
    }
    need_total += need;
    need_req[s->request] += need;
    if (sp.base != kZeroCkpt) prot.ckpts.insert(sp.base);
    for (int64_t pi = sp.base_pos / m.B; pi < static_cast<int64_t>(s->pages.size()); ++pi)
      prot.pages.insert(s->pages[pi]);
  }
  RSSM_RETURN_IF_ERROR(m.reserve(need_total, need_req, prot));

  // Phase 2: allocate what the plan needs.
  m.clock++;
  for (SlicePlan& sp : plan) {
    Seq& s = *m.find(sp.s.seq);
    const int64_t end = sp.s.pos + sp.s.n;
    for (int64_t pi = sp.s.pos / m.B; pi <= (end - 1) / m.B; ++pi) {
      if (pi >= static_cast<int64_t>(s.pages.size())) {
        RSSM_CHECK(!sp.rebuild);
        s.pages.push_back(m.new_page(m.logs && !sp.folds(pi, m.B)));
        continue;
      }
      if (sp.rebuild) continue;
      // A shared page is copied with its log: this step still reads the
      // entries below pos from it.
      if (m.pages.at(s.pages[pi]).refs > 1) s.pages[pi] = m.copy_page(s.pages[pi]);
      Page& pg = m.pages.at(s.pages[pi]);
      if (m.logs && pg.log.empty() && !sp.folds(pi, m.B)) m.alloc_log(pg);
    }
    for (size_t w = 0; w < sp.write_pos.size(); ++w)
      sp.write_ckpt.push_back(static_cast<int>(w) == sp.reuse ? sp.base : m.new_ckpt(sp.write_pos[w], false));
    m.stats.state_writes_bytes += static_cast<int64_t>(sp.write_pos.size()) * m.ckpt_bytes();
    if (!sp.rebuild) m.stats.replayed_tokens += sp.s.pos - sp.base_pos;
    for (const std::vector<int64_t>& w : sp.share_with) m.stats.shared_flushes += !w.empty();
    if (sp.rebuild) m.stats.restores_reprefill++;
    else if (sp.base_pos < s.expect_base) m.stats.restores_log_replay++;
    if (sp.base != kZeroCkpt) m.ckpts.at(sp.base).last_use = m.clock;
    for (int64_t pi = sp.base_pos / m.B; pi < static_cast<int64_t>(s.pages.size()); ++pi)
      m.pages.at(s.pages[pi]).last_use = m.clock;
  }
  // A slice that overwrites its base's slot runs after every other slice
  // reading that base (the kernels run slice by slice within a layer).
  std::stable_partition(plan.begin(), plan.end(), [](const SlicePlan& sp) { return sp.reuse < 0; });
  m.plan = std::move(plan);
  m.plan_step_folds();
  return {};
}

void ReplayStore::Impl::plan_step_folds() {
  step_folded.clear();
  if (!logs || opt.log_retention < 0) return;
  // After end_step a sequence stands on a checkpoint at or above its
  // highest write, or one it moves onto (share_with): the log above it is
  // present. A stepping sequence without a write still stands at or above
  // its base; any other keeps its expected base.
  std::map<int64_t, int64_t> raised;
  std::map<int64_t, int64_t> stepping;
  for (const SlicePlan& sp : plan) {
    stepping[sp.s.seq] = sp.base_pos;
    if (sp.rebuild) continue;
    for (size_t w = 0; w < sp.write_pos.size(); ++w) {
      const int64_t f = sp.write_pos[w];
      raised[sp.s.seq] = std::max(raised[sp.s.seq], f);
      if (w < sp.share_with.size())
        for (int64_t o : sp.share_with[w]) raised[o] = std::max(raised[o], f);
    }
  }
  auto base_after = [&](int64_t id) {
    if (auto it = raised.find(id); it != raised.end()) return it->second;
    const Seq& t = seqs.at(id);
    if (auto it = stepping.find(id); it != stepping.end()) return std::min(t.expect_base, it->second);
    return t.expect_base;
  };
  for (const auto& [id, f] : raised) {
    const Seq& s = seqs.at(id);
    const int64_t limit = f - opt.log_retention;
    for (int64_t pi = s.trim_from; (pi + 1) * B <= limit && pi < static_cast<int64_t>(s.pages.size()); ++pi) {
      const int64_t pid = s.pages[pi];
      if (pages.at(pid).log.empty() || step_folded.count(pid)) continue;
      int sharers = 0;
      bool unneeded = true;
      for (int64_t o : requests.at(s.request).seqs) {
        const Seq& t = seqs.at(o);
        if (pi >= static_cast<int64_t>(t.pages.size()) || t.pages[pi] != pid) continue;
        ++sharers;
        unneeded = unneeded && (pi + 1) * B <= base_after(o) - opt.log_retention;
      }
      if (unneeded && sharers == pages.at(pid).refs) step_folded[pid] = {id, pi};
    }
  }
}

void ReplayStore::Impl::begin_layer(const LayerLayout& L) {
  for (const SlicePlan& sp : plan)
    for (int64_t id : sp.write_ckpt) alloc_ckpt_part(ckpts.at(id), L.ssm);
  int64_t rows = 0;
  for (const SlicePlan& sp : plan) rows = std::max(rows, sp.s.row + sp.s.n);
  entries.resize(static_cast<size_t>(rows * L.entry));
}

void ReplayStore::Impl::finish_layer(const LayerLayout& L) {
  if (!logs) return;
  // The step's checkpoints now hold this layer's state: its part of the
  // folded pages' log goes before the new entries are allocated.
  for (const auto& [id, at] : step_folded) {
    std::vector<float>& part = pages.at(id).log[static_cast<size_t>(L.ssm)];
    add_state(-static_cast<int64_t>(part.size()) * 4);
    part.clear();
    part.shrink_to_fit();
  }
  for (const SlicePlan& sp : plan) {
    const Seq& s = *find(sp.s.seq);
    for (int64_t t = 0; t < sp.s.n; ++t) {
      const int64_t pos = sp.s.pos + t, pid = s.pages[pos / B];
      Page& pg = pages.at(pid);
      if (pg.log.empty() || step_folded.count(pid)) continue;  // no log here (a rebuild, or folded)
      std::vector<float>& part = pg.log[static_cast<size_t>(L.ssm)];
      if (part.empty()) {
        part.assign(static_cast<size_t>(ssm_log_floats[static_cast<size_t>(L.ssm)]), 0.0f);
        add_state(static_cast<int64_t>(part.size()) * 4);
      }
      std::memcpy(part.data() + (pos % B) * L.entry, entries.data() + (sp.s.row + t) * L.entry,
                  sizeof(float) * L.entry);
    }
  }
}

void ReplayStore::attention(int layer, const ops::AttentionParams& p, std::span<const SeqSlice>,
                            const float* q, int64_t ldq, const float* k, const float* v,
                            int64_t ldkv, float* out, int64_t ldo) {
  Impl& m = *impl_;
  const LayerLayout& L = m.layers[layer];
  const int64_t w = L.kv_width;
  for (const SlicePlan& sp : m.plan) {
    Seq& s = *m.find(sp.s.seq);
    if (!sp.rebuild)  // a rebuild re-reads the rows it already holds
      for (int64_t t = 0; t < sp.s.n; ++t) {
        const int64_t pos = sp.s.pos + t;
        float* row = m.pages.at(s.pages[pos / m.B]).kv.data() + L.kv_off + (pos % m.B) * 2 * w;
        std::memcpy(row, k + (sp.s.row + t) * ldkv, sizeof(float) * w);
        std::memcpy(row + w, v + (sp.s.row + t) * ldkv, sizeof(float) * w);
      }
    m.ptrs_a.clear();
    m.ptrs_b.clear();
    for (int64_t id : s.pages) {
      const float* base = m.pages.at(id).kv.data() + L.kv_off;
      m.ptrs_a.push_back(base);
      m.ptrs_b.push_back(base + w);
    }
    const ops::KvView view{m.ptrs_a.data(), m.ptrs_b.data(), m.B, 2 * w};
    ops::cpu::attention(p, q + sp.s.row * ldq, ldq, sp.s.pos, sp.s.n, view, out + sp.s.row * ldo, ldo);
  }
}

namespace {

// The kernel arguments of one slice for one SSM layer.
struct SliceArgs {
  ops::ReplayArgs a;
  std::vector<float*> ws, ww;
};

SliceArgs slice_args(ReplayStore::Impl& m, const SlicePlan& sp, const LayerLayout& L) {
  SliceArgs r;
  const Seq& s = *m.find(sp.s.seq);
  if (sp.base != kZeroCkpt) {
    const float* d = m.ckpts.at(sp.base).data[static_cast<size_t>(L.ssm)].data();
    r.a.ckpt_window = d + L.win_off;
    r.a.ckpt_state = d + L.state_off;
  }
  r.a.base_pos = sp.base_pos;
  r.a.pos = sp.s.pos;
  r.a.n = sp.s.n;
  m.ptrs_a.clear();
  for (int64_t id : s.pages) {
    const Page& pg = m.pages.at(id);
    const std::vector<float>* part = pg.log.empty() ? nullptr : &pg.log[static_cast<size_t>(L.ssm)];
    m.ptrs_a.push_back(part == nullptr || part->empty() ? nullptr : part->data());
  }
  r.a.log = ops::LogView{m.ptrs_a.data(), m.B, L.entry, 0};
  // The step's new entries, by batch row (Impl::begin_layer sizes them).
  r.a.new_entries = m.entries.data() + sp.s.row * L.entry;
  for (int64_t id : sp.write_ckpt) {
    float* d = m.ckpts.at(id).data[static_cast<size_t>(L.ssm)].data();
    r.ws.push_back(d + L.state_off);
    r.ww.push_back(d + L.win_off);
  }
  r.a.n_writes = static_cast<int>(sp.write_pos.size());
  r.a.write_pos = sp.write_pos.data();
  r.a.write_state = r.ws.data();
  r.a.write_window = r.ww.data();
  // Only the replay strategy has a dual form to choose; the others step.
  r.a.exact = m.opt.exact || m.opt.strategy != Strategy::kReplay;
  return r;
}

}  // namespace

void ReplayStore::mamba2(int layer, const ops::Conv1dParams& conv, const ops::Mamba2Params& p,
                         std::span<const SeqSlice>, const float* xbc, int64_t ldxbc, const float* dt,
                         int64_t lddt, float* y, int64_t ldy) {
  Impl& m = *impl_;
  const LayerLayout& L = m.layers[layer];
  m.begin_layer(L);
  for (const SlicePlan& sp : m.plan) {
    SliceArgs r = slice_args(m, sp, L);
    ops::cpu::mamba2_replay(conv, p, r.a, xbc + sp.s.row * ldxbc, ldxbc, dt + sp.s.row * lddt, lddt,
                            y + sp.s.row * ldy, ldy, &m.scratch);
  }
  m.finish_layer(L);
}

void ReplayStore::gated_deltanet(int layer, const ops::Conv1dParams& conv, const ops::GdnParams& p,
                                 std::span<const SeqSlice>, const float* qkv, int64_t ldqkv,
                                 const float* a, int64_t lda, const float* b, int64_t ldb, float* o,
                                 int64_t ldo) {
  Impl& m = *impl_;
  const LayerLayout& L = m.layers[layer];
  m.begin_layer(L);
  for (const SlicePlan& sp : m.plan) {
    SliceArgs r = slice_args(m, sp, L);
    ops::cpu::gdn_replay(conv, p, r.a, qkv + sp.s.row * ldqkv, ldqkv, a + sp.s.row * lda, lda,
                         b + sp.s.row * ldb, ldb, o + sp.s.row * ldo, ldo, &m.scratch);
  }
  m.finish_layer(L);
}

namespace {

// A plan with no new tokens and one write at the length: the kernels'
// sequential pass then rebuilds the state there.
Status materialize_plan(ReplayStore::Impl& m, int64_t seq, int layer, SlicePlan* sp,
                        std::vector<float>* window, std::vector<float>* state) {
  const Seq* s = m.find(seq);
  if (s == nullptr) return invalid_argument("materialize: no " + seq_str(seq));
  if (layer < 0 || layer >= static_cast<int>(m.layers.size()) ||
      m.layers[layer].spec.kind == CacheLayerSpec::kAttention)
    return invalid_argument("materialize: layer " + std::to_string(layer) + " is not an SSM layer");
  const int64_t len = static_cast<int64_t>(s->tokens.size());
  const std::optional<int64_t> base = m.best_log_base(*s, len);
  if (!base) return invalid_argument("materialize: " + seq_str(seq) + " must be restored first");
  sp->s = SeqSlice{seq, len, 0, 0, false};
  sp->base = *base;
  sp->base_pos = m.ckpt_pos(*base);
  sp->write_pos = {len};
  window->assign(static_cast<size_t>(m.layers[layer].win_floats), 0.0f);
  state->assign(static_cast<size_t>(m.layers[layer].state_floats), 0.0f);
  return {};
}

SliceArgs materialize_args(ReplayStore::Impl& m, const SlicePlan& sp, const LayerLayout& L,
                           std::vector<float>* window, std::vector<float>* state) {
  SliceArgs r = slice_args(m, sp, L);
  r.ws = {state->data()};
  r.ww = {window->data()};
  r.a.write_state = r.ws.data();
  r.a.write_window = r.ww.data();
  return r;
}

}  // namespace

Status ReplayStore::materialize_mamba2(int64_t seq, int layer, const ops::Conv1dParams& conv,
                                       const ops::Mamba2Params& p, std::vector<float>* window,
                                       std::vector<float>* state) {
  SlicePlan sp;
  RSSM_RETURN_IF_ERROR(materialize_plan(*impl_, seq, layer, &sp, window, state));
  SliceArgs r = materialize_args(*impl_, sp, impl_->layers[layer], window, state);
  ops::cpu::mamba2_replay(conv, p, r.a, nullptr, 0, nullptr, 0, nullptr, 0, &impl_->scratch);
  return {};
}

Status ReplayStore::materialize_gdn(int64_t seq, int layer, const ops::Conv1dParams& conv,
                                    const ops::GdnParams& p, std::vector<float>* window,
                                    std::vector<float>* state) {
  SlicePlan sp;
  RSSM_RETURN_IF_ERROR(materialize_plan(*impl_, seq, layer, &sp, window, state));
  SliceArgs r = materialize_args(*impl_, sp, impl_->layers[layer], window, state);
  ops::cpu::gdn_replay(conv, p, r.a, nullptr, 0, nullptr, 0, nullptr, 0, nullptr, 0, &impl_->scratch);
  return {};
}

void ReplayStore::end_step(std::span<const SeqSlice>) {
  Impl& m = *impl_;
  // Reused slots first, before any holder settles: the slot now holds the
  // state at the new position. Holders on other paths drop it; each of
  // them gets a checkpoint of its own below (the planner reuses a base
  // only when every holder moves to a node written in this step).
  for (const SlicePlan& sp : m.plan) {
    if (sp.reuse < 0) continue;
    m.ckpts.at(sp.base).pos = sp.write_pos[sp.reuse];
    for (int64_t other : sp.leave_base) {
      Seq& o = *m.find(other);
      auto it = std::find(o.ckpts.begin(), o.ckpts.end(), sp.base);
      RSSM_CHECK(it != o.ckpts.end());
      o.ckpts.erase(it);
      m.unref_ckpt(sp.base);
    }
  }
  for (SlicePlan& sp : m.plan) {
    Seq& s = *m.find(sp.s.seq);
    const int64_t end = sp.s.pos + sp.s.n;
    if (!sp.rebuild) s.tokens.insert(s.tokens.end(), sp.tokens.begin(), sp.tokens.end());
    s.committed = sp.committed_after;
    if (m.logs)  // entries [a, b) of each page are now valid
      for (int64_t pi = sp.s.pos / m.B; pi <= (end - 1) / m.B; ++pi) {
        Page& pg = m.pages.at(s.pages[pi]);
        if (pg.log.empty()) continue;
        const int64_t a = std::max(sp.s.pos - pi * m.B, int64_t{0});
        const int64_t b = std::min(end - pi * m.B, m.B);
        if (pg.log_lo >= pg.log_hi || b < pg.log_lo || a > pg.log_hi) {
          pg.log_lo = a;  // nothing valid yet, or disjoint: keep what was just written
          pg.log_hi = b;
        } else {
          pg.log_lo = std::min(pg.log_lo, a);
          pg.log_hi = std::max(pg.log_hi, b);
        }
      }
  }
  // Then the checkpoints: a sharer that steps too already holds its new
  // tokens, so the node it moves onto lies within its length.
  for (SlicePlan& sp : m.plan) {
    Seq& s = *m.find(sp.s.seq);
    for (size_t w = 0; w < sp.write_ckpt.size(); ++w) {
      // A reused slot is already held by the sequence and every sharer.
      const int64_t id = sp.write_ckpt[w];
      const bool reused = static_cast<int>(w) == sp.reuse;
      if (!reused) s.ckpts.push_back(id);
      if (w >= sp.share_with.size()) continue;
      for (int64_t other : sp.share_with[w]) {  // sharers move onto the node's checkpoint
        Seq& o = *m.find(other);
        if (!reused) {
          m.ckpts.at(id).refs++;
          o.ckpts.push_back(id);
        }
        m.sort_ckpts(o);
        m.settle(o);
      }
    }
    m.sort_ckpts(s);
    m.settle(s);
  }
  // The pages folded layer by layer: every sharer now stands past them
  // (trim_log, whose cursor may already have passed a page a later fork
  // shares, has not always dropped them yet).
  for (const auto& [id, at] : m.step_folded) {
    if (!m.pages.count(id) || m.pages.at(id).log.empty()) continue;
    const Seq& s = *m.find(at.first);
    RSSM_CHECK(s.pages[at.second] == id && m.log_unneeded(s, at.second));
    m.drop_log(m.pages.at(id));
  }
  m.step_folded.clear();
  m.plan.clear();
}

}  // namespace replayssm
