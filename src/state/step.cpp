// StateManager steps: plan_step validates the slices, places the state
// writes, reserves memory and allocates before anything changes, and
// emits the plan; finish_step accounts what the backend held layer by
// layer, appends the tokens, records which log entries became valid and
// settles every sequence the step moved.
#include <algorithm>

#include "core/check.h"
#include "state/manager_impl.h"

namespace replayssm {

namespace {

std::string seq_str(int64_t id) { return "sequence " + std::to_string(id); }

}  // namespace

Result<StepPlan> StateManager::plan_step(std::span<const SeqSlice> step, std::span<const int32_t> tokens) {
  Impl& m = *impl_;
  RSSM_CHECK(!m.in_step);
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
      // A rebuild: re-run tokens [pos, end) from a checkpoint exactly at
      // pos; it ends at a checkpoint at end, where the next part of a
      // re-prefill split over several steps starts.
      if (end > len)
        return invalid_argument("step: rebuild of " + seq_str(sl.seq) + " passes its length " + std::to_string(len));
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
        const int64_t K = m.keep(*m.find(sl.seq)).checkpoint_interval;
        const int64_t sparse = K > 0 ? K : m.opt.window;
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
      const int64_t K = m.keep(*m.find(sl.seq)).checkpoint_interval, f = sp.write_pos[0];
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
      if ((pg.refs > 1 && pg.has_log()) || (m.logs && !pg.has_log() && !sp.folds(pi, m.B))) need += m.log_bytes();
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
        s.pages.push_back(m.new_page(s.id, m.logs && !sp.folds(pi, m.B)));
        continue;
      }
      if (sp.rebuild) continue;
      // A shared page is copied with its log: this step still reads the
      // entries below pos from it.
      if (m.pages.at(s.pages[pi]).refs > 1) s.pages[pi] = m.copy_page(s.pages[pi], s.id);
      Page& pg = m.pages.at(s.pages[pi]);
      if (m.logs && !pg.has_log() && !sp.folds(pi, m.B)) m.alloc_log(pg);
    }
    for (size_t w = 0; w < sp.write_pos.size(); ++w)
      sp.write_ckpt.push_back(static_cast<int>(w) == sp.reuse ? sp.base : m.new_ckpt(sp.write_pos[w], false));
    m.stats.state_writes_bytes += static_cast<int64_t>(sp.write_pos.size()) * m.ckpt_bytes();
    if (!sp.rebuild) m.stats.replayed_tokens += sp.s.pos - sp.base_pos;
    for (const std::vector<int64_t>& w : sp.share_with) m.stats.shared_flushes += !w.empty();
    if (sp.rebuild) m.stats.restores_reprefill += s.rebuilt_to != sp.s.pos;
    else if (sp.base_pos < s.expect_base) m.stats.restores_log_replay++;
    s.rebuilt_to = sp.rebuild ? end : -1;
    if (sp.base != kZeroCkpt) m.ckpts.at(sp.base).last_use = m.clock;
    for (int64_t pi = sp.base_pos / m.B; pi < static_cast<int64_t>(s.pages.size()); ++pi)
      m.pages.at(s.pages[pi]).last_use = m.clock;
  }
  // A slice that overwrites its base's slot runs after every other slice
  // reading that base (the backends run slice by slice within a layer).
  std::stable_partition(plan.begin(), plan.end(), [](const SlicePlan& sp) { return sp.reuse < 0; });
  m.plan = std::move(plan);
  m.plan_step_folds();
  m.in_step = true;

  // The plan a backend reads: slots only.
  StepPlan out;
  out.ops.swap(m.ops);
  out.tokens.assign(tokens.begin(), tokens.end());
  out.page_size = m.B;
  out.exact = m.opt.exact || m.opt.strategy != Strategy::kReplay;
  for (const SlicePlan& sp : m.plan) {
    const Seq& s = *m.find(sp.s.seq);
    PlanSlice ps;
    ps.seq = sp.s.seq;
    ps.pos = sp.s.pos;
    ps.n = sp.s.n;
    ps.row = sp.s.row;
    ps.commit = sp.s.commit;
    ps.rebuild = sp.rebuild;
    ps.base = m.ckpt_slot(sp.base);
    ps.base_pos = sp.base_pos;
    ps.write_begin = static_cast<int32_t>(out.write_pos.size());
    for (size_t w = 0; w < sp.write_pos.size(); ++w) {
      out.write_pos.push_back(sp.write_pos[w]);
      out.write_slot.push_back(m.ckpts.at(sp.write_ckpt[w]).slot);
    }
    ps.write_end = static_cast<int32_t>(out.write_pos.size());
    ps.reuse = sp.reuse;
    ps.table_begin = static_cast<int32_t>(out.pages.size());
    for (int64_t id : s.pages) {
      const Page& pg = m.pages.at(id);
      out.pages.push_back(pg.kv);
      out.logs.push_back(pg.log);
    }
    ps.fold_below = sp.fold_below;
    out.slices.push_back(ps);
  }
  for (const auto& [id, at] : m.step_folded) out.folded_logs.push_back(m.pages.at(id).log);
  return out;
}

void StateManager::Impl::plan_step_folds() {
  step_folded.clear();
  if (!logs) return;
  // After finish_step a sequence stands on a checkpoint at or above its
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
    const int64_t r = keep(s).log_retention;
    if (r < 0) continue;  // its request keeps every entry
    const int64_t limit = f - r;
    for (int64_t pi = s.trim_from; (pi + 1) * B <= limit && pi < static_cast<int64_t>(s.pages.size()); ++pi) {
      const int64_t pid = s.pages[pi];
      const Page& pg = pages.at(pid);
      if (!pg.has_log() || step_folded.count(pid)) continue;
      bool unneeded = true;
      for (int64_t o : pg.holders) {
        const int64_t ro = keep(seqs.at(o)).log_retention;
        unneeded = unneeded && ro >= 0 && (pi + 1) * B <= base_after(o) - ro;
      }
      if (unneeded) step_folded[pid] = {id, pi};
    }
  }
}

void StateManager::Impl::account_step() {
  // Mirrors a backend that holds each SSM layer's part of a checkpoint or
  // log only while it must: before layer i's kernels, its part of the
  // step's new checkpoints; after them, its part of the folded pages' log
  // goes, then its part of every page that receives the step's entries.
  for (int i = 0; i < n_ssm; ++i) {
    for (const SlicePlan& sp : plan)
      for (int64_t id : sp.write_ckpt) {
        Ckpt& c = ckpts.at(id);
        if (c.parts > i) continue;
        RSSM_CHECK(c.parts == i);
        c.parts++;
        add_state(ckpt_part[i], kCheckpoints);
      }
    if (!logs) continue;
    for (const auto& [id, at] : step_folded) {
      Page& pg = pages.at(id);
      if (pg.log_first > i || pg.log_end <= i) continue;
      RSSM_CHECK(pg.log_first == i);
      pg.log_first++;
      add_state(-log_part[i], kLogs);
    }
    for (const SlicePlan& sp : plan) {
      const Seq& s = *find(sp.s.seq);
      for (int64_t t = 0; t < sp.s.n; ++t) {
        const int64_t pid = s.pages[(sp.s.pos + t) / B];
        Page& pg = pages.at(pid);
        if (!pg.has_log() || step_folded.count(pid) || pg.log_end > i) continue;
        RSSM_CHECK(pg.log_end == i);
        pg.log_end++;
        add_state(log_part[i], kLogs);
      }
    }
  }
}

void StateManager::finish_step(const StepPlan&) {
  Impl& m = *impl_;
  RSSM_CHECK(m.in_step);
  m.in_step = false;
  m.account_step();
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
        if (!pg.has_log() || m.step_folded.count(s.pages[pi])) continue;
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
    if (!m.pages.count(id) || !m.pages.at(id).has_log()) continue;
    const Seq& s = *m.find(at.first);
    RSSM_CHECK(s.pages[at.second] == id && m.log_unneeded(s, at.second));
    m.drop_log(m.pages.at(id));
  }
  m.step_folded.clear();
  m.plan.clear();
}

void StateManager::abort_step(const StepPlan&) {
  Impl& m = *impl_;
  RSSM_CHECK(m.in_step);
  m.in_step = false;
  m.step_folded.clear();
  m.plan.clear();
}

}  // namespace replayssm
