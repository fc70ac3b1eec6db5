// StateManager: construction, sequence bookkeeping (add, fork, truncate,
// commit, restore, release) and the restore planner. Steps are in
// step.cpp, replay's flush placement in family.cpp, eviction in evict.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/check.h"
#include "state/manager_impl.h"

namespace replayssm {

namespace {

// Channels replay recomputes per logged token (the conv outputs an entry
// does not store): Mamba2 x | B, H·P + G·N of C = H·P + 2·G·N; GDN k,
// Hk·dk of C = 2·Hk·dk + Hv·dv.
int64_t recomputed_channels(const CacheLayerSpec& l) {
  const int64_t C = l.conv_channels, H = l.n_heads;
  if (l.kind == CacheLayerSpec::kMamba2) return H * l.state_rows + (C - H * l.state_rows) / 2;
  return (C - H * l.state_cols) / 2;
}

}  // namespace

int32_t SlotAllocator::take() {
  int32_t s;
  if (!free.empty()) {
    s = free.back();
    free.pop_back();
  } else {
    s = next++;
  }
  ++live;
  high = std::max(high, live);
  return s;
}

void SlotAllocator::give(int32_t slot) {
  RSSM_CHECK(slot >= 0 && slot < next && live > 0);
  free.push_back(slot);
  --live;
}

StateManager::Impl::Impl(CacheSpec s, StateOptions o, StateUnits u) : spec(std::move(s)), opt(o), units(std::move(u)) {
  B = opt.page_size;
  logs = opt.strategy == Strategy::kReplay;
  for (const CacheLayerSpec& l : spec.layers) {
    LayerLayout L;
    L.spec = l;
    if (l.kind != CacheLayerSpec::kAttention) {
      L.ssm = n_ssm++;
      const double state = static_cast<double>(l.n_heads * l.state_rows * l.state_cols);
      // A replayed token: one update per state element, and the conv (K
      // multiply-adds per recomputed channel) that rebuilds its inputs.
      replay_flops += 2.0 * state + 2.0 * static_cast<double>(l.conv_width * recomputed_channels(l));
    }
    layers.push_back(L);
  }
  RSSM_CHECK(static_cast<int>(units.checkpoint_part.size()) == n_ssm &&
             static_cast<int>(units.log_entry.size()) == n_ssm);
  for (int i = 0; i < n_ssm; ++i) {
    ckpt_part.push_back(units.checkpoint_part[i]);
    log_part.push_back(B * units.log_entry[i]);
    ckpt_total += ckpt_part.back();
    log_total += log_part.back();
  }
  page_kv = B * units.kv_row;
  prefill_flops = spec.prefill_flops_per_token > 0 ? spec.prefill_flops_per_token : 100.0 * replay_flops;
}

void StateManager::Impl::add_state(int64_t bytes, StateKind kind) {
  (kind == kCheckpoints ? stats.checkpoint_bytes : stats.log_bytes) += bytes;
  stats.state_bytes += bytes;
  stats.state_bytes_peak = std::max(stats.state_bytes_peak, stats.state_bytes);
}

void StateManager::Impl::add_kv(int64_t bytes) {
  stats.kv_bytes += bytes;
  stats.kv_bytes_peak = std::max(stats.kv_bytes_peak, stats.kv_bytes);
}

int64_t StateManager::Impl::log_held(const Page& p) const {
  int64_t n = 0;
  for (int i = p.log_first; i < p.log_end; ++i) n += log_part[i];
  return n;
}

int64_t StateManager::Impl::new_page(int64_t holder, bool with_log) {
  const int64_t id = next_page++;
  Page& p = pages[id];
  p.refs = 1;
  p.holders = {holder};
  p.kv = page_slots.take();
  add_kv(page_kv);
  if (with_log) alloc_log(p);
  p.last_use = clock;
  return id;
}

void StateManager::Impl::alloc_log(Page& p) {
  RSSM_CHECK(!p.has_log());
  p.log = log_slots.take();
  p.log_first = p.log_end = 0;  // parts come as the layers append
  p.log_lo = p.log_hi = 0;      // nothing valid yet
}

void StateManager::Impl::drop_log(Page& p) {
  if (!p.has_log()) return;
  add_state(-log_held(p), kLogs);
  ops.push_back({StorageOp::kFreeLog, p.log, -1});
  log_slots.give(p.log);
  p.log = -1;
  p.log_first = p.log_end = 0;
  p.log_lo = p.log_hi = 0;
}

int64_t StateManager::Impl::copy_page(int64_t id, int64_t holder) {
  const int64_t nid = next_page++;
  Page& p = pages[nid];
  const Page& src = pages.at(id);
  p.refs = 1;
  p.holders = {holder};
  p.kv = page_slots.take();
  ops.push_back({StorageOp::kCopyPage, src.kv, p.kv});
  add_kv(page_kv);
  if (src.has_log()) {
    p.log = log_slots.take();
    ops.push_back({StorageOp::kCopyLog, src.log, p.log});
    p.log_first = src.log_first;
    p.log_end = src.log_end;
    p.log_lo = src.log_lo;
    p.log_hi = src.log_hi;
    add_state(log_held(p), kLogs);
  }
  p.last_use = clock;
  unref_page(id, holder);
  return nid;
}

void StateManager::Impl::ref_page(int64_t id, int64_t holder) {
  Page& p = pages.at(id);
  p.refs++;
  p.holders.push_back(holder);
}

void StateManager::Impl::unref_page(int64_t id, int64_t holder) {
  auto it = pages.find(id);
  RSSM_CHECK(it != pages.end() && it->second.refs > 0);
  Page& p = it->second;
  auto h = std::find(p.holders.begin(), p.holders.end(), holder);
  RSSM_CHECK(h != p.holders.end());
  p.holders.erase(h);
  if (--p.refs > 0) return;
  add_kv(-page_kv);
  drop_log(p);
  ops.push_back({StorageOp::kFreePage, p.kv, -1});
  page_slots.give(p.kv);
  pages.erase(it);
}

int64_t StateManager::Impl::new_ckpt(int64_t pos, bool data) {
  const int64_t id = next_ckpt++;
  Ckpt& c = ckpts[id];
  c.refs = 1;
  c.pos = pos;
  c.slot = ckpt_slots.take();
  if (data) {
    c.parts = n_ssm;
    add_state(ckpt_total, kCheckpoints);
  }
  c.last_use = clock;
  return id;
}

void StateManager::Impl::drop_ckpt_data(Ckpt& c) {
  if (c.evicted()) return;
  int64_t held = 0;
  for (int i = 0; i < c.parts; ++i) held += ckpt_part[i];
  add_state(-held, kCheckpoints);
  ops.push_back({StorageOp::kFreeCheckpoint, c.slot, -1});
  ckpt_slots.give(c.slot);
  c.slot = -1;
  c.parts = 0;
}

void StateManager::Impl::unref_ckpt(int64_t id) {
  auto it = ckpts.find(id);
  RSSM_CHECK(it != ckpts.end() && it->second.refs > 0);
  if (--it->second.refs > 0) return;
  drop_ckpt_data(it->second);
  ckpts.erase(it);
}

Seq* StateManager::Impl::find(int64_t id) {
  auto it = seqs.find(id);
  return it == seqs.end() ? nullptr : &it->second;
}

const Seq* StateManager::Impl::find(int64_t id) const {
  auto it = seqs.find(id);
  return it == seqs.end() ? nullptr : &it->second;
}

bool StateManager::Impl::log_covers(const Seq& s, int64_t from, int64_t to) const {
  // A model without SSM layers (attention and MLPs only) has no state to
  // rebuild: any checkpoint, the zero one too, is already every position's.
  if (from >= to || n_ssm == 0) return true;
  if (!logs) return false;
  for (int64_t pi = from / B; pi <= (to - 1) / B; ++pi) {
    const Page& p = pages.at(s.pages[pi]);
    const int64_t lo = std::max(from - pi * B, int64_t{0}), hi = std::min(to - pi * B, B);
    if (!p.has_log() || p.log_lo > lo || p.log_hi < hi) return false;
  }
  return true;
}

std::optional<int64_t> StateManager::Impl::best_log_base(const Seq& s, int64_t len) const {
  for (auto it = s.ckpts.rbegin(); it != s.ckpts.rend(); ++it) {
    const Ckpt& c = ckpts.at(*it);
    if (c.evicted() || c.pos > len) continue;
    if (log_covers(s, c.pos, len)) return *it;
    if (!logs) break;  // lower checkpoints cannot do better without a log
  }
  if (log_covers(s, 0, len)) return kZeroCkpt;
  return std::nullopt;
}

int64_t StateManager::Impl::best_any_base(const Seq& s, int64_t len) const {
  for (auto it = s.ckpts.rbegin(); it != s.ckpts.rend(); ++it) {
    const Ckpt& c = ckpts.at(*it);
    if (!c.evicted() && c.pos <= len) return *it;
  }
  return kZeroCkpt;
}

RestorePlan StateManager::Impl::plan_resume(const Seq& s) const {
  const int64_t len = static_cast<int64_t>(s.tokens.size());
  const int64_t any = best_any_base(s, len), any_pos = ckpt_pos(any);
  const std::optional<int64_t> lg = best_log_base(s, len);
  // Cost model: replaying a log entry touches every state element of every
  // SSM layer once and recomputes its conv outputs; re-prefilling a token
  // costs a model forward.
  if (lg) {
    const int64_t lg_pos = ckpt_pos(*lg);
    const double replay_cost = static_cast<double>(len - lg_pos) * replay_flops;
    const double prefill_cost = static_cast<double>(len - any_pos) * prefill_flops;
    if (replay_cost <= prefill_cost)
      return {lg_pos == len ? RestorePath::kCheckpoint : RestorePath::kLogReplay, lg_pos, len};
  }
  return {RestorePath::kReprefill, any_pos, len};
}

Status StateManager::keep_checkpoint_at(int64_t seq, int64_t pos) {
  RSSM_CHECK(!impl_->in_step);
  Seq* s = impl_->find(seq);
  if (s == nullptr) return invalid_argument("keep_checkpoint_at: no sequence " + std::to_string(seq));
  if (pos < 1 || pos > static_cast<int64_t>(s->tokens.size()))
    return invalid_argument("keep_checkpoint_at: position " + std::to_string(pos) + " outside sequence " +
                            std::to_string(seq) + "'s (0, " + std::to_string(s->tokens.size()) + "]");
  s->keep_at = pos;
  return {};
}

void StateManager::Impl::prune(Seq& s) {
  const int64_t len = static_cast<int64_t>(s.tokens.size());
  const int64_t K = keep(s).checkpoint_interval;
  const int64_t sparse = K > 0 ? K : opt.window;  // recompute's interval
  // The newest usable checkpoint is the live one.
  int64_t live = -2;
  for (int64_t id : s.ckpts)
    if (!ckpts.at(id).evicted() && ckpts.at(id).pos <= len) live = id;
  std::vector<int64_t> keep;
  int64_t last_bucket = -1;
  for (size_t i = 0; i < s.ckpts.size(); ++i) {
    const int64_t id = s.ckpts[i];
    const Ckpt& c = ckpts.at(id);
    bool k = false;
    if (!c.evicted() && c.pos <= len) {
      const bool first_in_bucket = K > 0 && c.pos / K != last_bucket;
      switch (opt.strategy) {
        case Strategy::kReplay:
          k = id == live || first_in_bucket;
          break;
        case Strategy::kSnapshot:
          k = c.pos >= s.committed || first_in_bucket;
          break;
        case Strategy::kRecompute:
          k = c.pos == len || (c.pos % sparse == 0 && c.pos <= s.committed);
          break;
      }
      if (k && K > 0) last_bucket = c.pos / K;
      k = k || (c.pos == s.keep_at && opt.strategy == Strategy::kReplay);
    }
    if (k) keep.push_back(id);
    else unref_ckpt(id);
  }
  s.ckpts = std::move(keep);
}

std::optional<int64_t> StateManager::Impl::live_base(const Seq& s) const {
  return best_log_base(s, static_cast<int64_t>(s.tokens.size()));
}

void StateManager::Impl::sort_ckpts(Seq& s) {
  std::stable_sort(s.ckpts.begin(), s.ckpts.end(),
                   [&](int64_t x, int64_t y) { return ckpts.at(x).pos < ckpts.at(y).pos; });
}

void StateManager::Impl::settle(Seq& s) {
  prune(s);
  reset_expect(s);
  trim_log(s);
}

void StateManager::Impl::reset_expect(Seq& s) {
  const int64_t len = static_cast<int64_t>(s.tokens.size());
  const std::optional<int64_t> b = best_log_base(s, len);
  s.expect_base = ckpt_pos(b ? *b : best_any_base(s, len));
}

bool StateManager::Impl::log_unneeded(const Seq& s, int64_t pi) const {
  const Page& p = pages.at(s.pages[pi]);
  RSSM_CHECK(static_cast<int>(p.holders.size()) == p.refs);
  for (int64_t o : p.holders) {
    const Seq& t = seqs.at(o);
    RSSM_CHECK(pi < static_cast<int64_t>(t.pages.size()) && t.pages[pi] == s.pages[pi]);
    const int64_t r = keep(t).log_retention;
    if (r < 0 || (pi + 1) * B > t.expect_base - r) return false;
  }
  return true;
}

int64_t StateManager::Impl::fold_below(const SlicePlan& sp) const {
  // After finish_step the slice stands on a checkpoint at or above its
  // highest write (the log covers [write, end): every page from there on
  // gets one), so trim_log would drop every page wholly below write −
  // log_retention. Writes never pass the committed cursor, so drafts are
  // never folded.
  const int64_t r = keep(*find(sp.s.seq)).log_retention;
  if (!logs || sp.rebuild || r < 0 || sp.write_pos.empty()) return 0;
  const int64_t f = *std::max_element(sp.write_pos.begin(), sp.write_pos.end());
  RSSM_CHECK(f <= sp.committed_after);
  return f - r;
}

void StateManager::Impl::trim_log(Seq& s) {
  const int64_t r = keep(s).log_retention;
  if (!logs || r < 0) return;
  const int64_t limit = s.expect_base - r;
  bool advance = true;  // the cursor moves only over pages left without a log
  for (int64_t pi = s.trim_from; (pi + 1) * B <= limit && pi < static_cast<int64_t>(s.pages.size()); ++pi) {
    Page& pg = pages.at(s.pages[pi]);
    // A shared page's log goes once every sharer's base is past it (beams
    // share their whole common history: waiting for a last owner would
    // keep it for ever).
    if (pg.has_log() && pg.refs > 1 && !log_unneeded(s, pi)) {
      advance = false;  // the sharer that passes it last trims it
      continue;
    }
    drop_log(pg);
    if (advance) s.trim_from = pi + 1;
  }
}

void StateManager::Impl::drop_tokens(Seq& s, int64_t pos) {
  s.expect_base = std::min(s.expect_base, pos);
  s.rebuilt_to = -1;
  s.tokens.resize(static_cast<size_t>(pos));
  s.committed = std::min(s.committed, pos);
  const size_t n_pages = static_cast<size_t>((pos + B - 1) / B);
  s.trim_from = std::min(s.trim_from, static_cast<int64_t>(n_pages));
  while (s.pages.size() > n_pages) {
    unref_page(s.pages.back(), s.id);
    s.pages.pop_back();
  }
  std::vector<int64_t> keep;
  for (int64_t id : s.ckpts) {
    if (ckpts.at(id).pos > pos) unref_ckpt(id);
    else keep.push_back(id);
  }
  s.ckpts = std::move(keep);
  prune(s);
}

void StateManager::Impl::release_seq(int64_t id) {
  Seq& s = seqs.at(id);
  for (int64_t p : s.pages) unref_page(p, id);
  for (int64_t c : s.ckpts) unref_ckpt(c);
  auto r = requests.find(s.request);
  r->second.seqs.erase(id);
  if (r->second.seqs.empty()) requests.erase(r);
  pinned.erase(id);
  seqs.erase(id);
}

Result<int64_t> StateManager::Impl::fork_into(int64_t seq, std::optional<int64_t> pos,
                                              std::optional<int64_t> budget, std::optional<Retention> retention) {
  Seq* parent = find(seq);
  if (parent == nullptr) return invalid_argument("fork: no sequence " + std::to_string(seq));
  const int64_t len = static_cast<int64_t>(parent->tokens.size());
  const int64_t p = pos.value_or(len);
  if (p < 0 || p > len)
    return invalid_argument("fork: position " + std::to_string(p) + " outside [0, " + std::to_string(len) + "]");
  if (budget && *budget < 0)
    return invalid_argument("fork: budget must be >= 0 (0: no cap), got " + std::to_string(*budget));
  // Snapshot and recompute copy the state at p: make room first.
  int64_t copy_src = -1;
  if (opt.strategy != Strategy::kReplay)
    for (int64_t id : parent->ckpts)
      if (ckpts.at(id).pos == p && !ckpts.at(id).evicted()) copy_src = id;
  const int64_t id = next_seq++;
  const int64_t request = budget ? id : parent->request;
  if (copy_src >= 0) {
    Protected prot;
    prot.ckpts.insert(copy_src);
    std::map<int64_t, int64_t> by_request;
    if (!budget) by_request[request] = ckpt_bytes();
    RSSM_RETURN_IF_ERROR(reserve(ckpt_bytes(), by_request, prot));
  }
  if (budget)
    requests[request] = Request{*budget, {}, retention.value_or(Retention{opt.checkpoint_interval, opt.log_retention})};
  parent = find(seq);
  Seq& child = seqs[id];
  child.id = id;
  child.request = request;
  requests.at(request).seqs.insert(id);
  child.tokens.assign(parent->tokens.begin(), parent->tokens.begin() + p);
  child.committed = std::min(parent->committed, p);
  child.keep_at = parent->keep_at <= p ? parent->keep_at : -1;
  const size_t n_pages = static_cast<size_t>((p + B - 1) / B);
  for (size_t i = 0; i < n_pages; ++i) {
    child.pages.push_back(parent->pages[i]);
    ref_page(parent->pages[i], id);
  }
  for (int64_t c : parent->ckpts) {
    const Ckpt& ck = ckpts.at(c);
    if (ck.pos > p || ck.evicted() || c == copy_src) continue;
    child.ckpts.push_back(c);
    ckpts.at(c).refs++;
  }
  if (copy_src >= 0) {
    const int64_t nc = new_ckpt(p);
    ops.push_back({StorageOp::kCopyCheckpoint, ckpts.at(copy_src).slot, ckpts.at(nc).slot});
    stats.state_writes_bytes += ckpt_bytes();
    child.ckpts.push_back(nc);
  }
  sort_ckpts(child);
  prune(child);
  reset_expect(child);
  return id;
}

// ---------------------------------------------------------------------------

namespace {

StateOptions valid_or_abort(const StateOptions& o) {
  if (const Status st = o.validate(); !st.ok()) {
    std::fprintf(stderr, "StateManager: invalid StateOptions (validate() them first): %s\n", st.message().c_str());
    std::abort();
  }
  return o;
}

}  // namespace

StateManager::StateManager(CacheSpec spec, StateOptions opt, StateUnits units)
    : impl_(std::make_unique<Impl>(std::move(spec), valid_or_abort(opt), std::move(units))) {}

StateManager::~StateManager() = default;

const StateStats& StateManager::stats() const { return impl_->stats; }
const StateOptions& StateManager::options() const { return impl_->opt; }
const StateUnits& StateManager::units() const { return impl_->units; }
const CacheSpec& StateManager::spec() const { return impl_->spec; }

int64_t StateManager::add_sequence(int64_t budget_bytes, std::optional<Retention> retention) {
  RSSM_CHECK(!impl_->in_step);
  const int64_t id = impl_->next_seq++;
  Seq& s = impl_->seqs[id];
  s.id = id;
  s.request = id;
  const StateOptions& o = impl_->opt;
  impl_->requests[id] = Request{budget_bytes, {id}, retention.value_or(Retention{o.checkpoint_interval, o.log_retention})};
  return id;
}

Result<int64_t> StateManager::fork(int64_t seq, std::optional<int64_t> pos) {
  RSSM_CHECK(!impl_->in_step);
  return impl_->fork_into(seq, pos, std::nullopt);
}

Result<int64_t> StateManager::fork_request(int64_t seq, std::optional<int64_t> pos, int64_t budget_bytes,
                                           std::optional<Retention> retention) {
  RSSM_CHECK(!impl_->in_step);
  if (retention && (retention->checkpoint_interval < 0 || retention->log_retention < -1))
    return invalid_argument("fork_request: retention needs checkpoint_interval >= 0 and log_retention >= -1");
  return impl_->fork_into(seq, pos, budget_bytes, retention);
}

Status StateManager::release(int64_t seq) {
  RSSM_CHECK(!impl_->in_step);
  if (impl_->find(seq) == nullptr) return invalid_argument("release: no sequence " + std::to_string(seq));
  impl_->release_seq(seq);
  return {};
}

Status StateManager::truncate(int64_t seq, int64_t pos) {
  RSSM_CHECK(!impl_->in_step);
  Seq* s = impl_->find(seq);
  if (s == nullptr) return invalid_argument("truncate: no sequence " + std::to_string(seq));
  const int64_t len = static_cast<int64_t>(s->tokens.size());
  if (pos < 0 || pos > len)
    return invalid_argument("truncate: position " + std::to_string(pos) + " outside [0, " + std::to_string(len) + "]");
  impl_->drop_tokens(*s, pos);
  return {};
}

Status StateManager::commit(int64_t seq, int64_t n) {
  RSSM_CHECK(!impl_->in_step);
  Seq* s = impl_->find(seq);
  if (s == nullptr) return invalid_argument("commit: no sequence " + std::to_string(seq));
  const int64_t len = static_cast<int64_t>(s->tokens.size());
  if (n < 0 || n > len - s->committed)
    return invalid_argument("commit: " + std::to_string(n) + " tokens but only " +
                            std::to_string(len - s->committed) + " are uncommitted");
  s->committed += n;
  impl_->prune(*s);
  return {};
}

Result<RestorePlan> StateManager::restore(int64_t seq, int64_t pos) {
  RSSM_RETURN_IF_ERROR(truncate(seq, pos));
  Seq& s = *impl_->find(seq);
  const RestorePlan plan = impl_->plan_resume(s);
  // A re-prefill is counted by the rebuild step that performs it.
  if (plan.path == RestorePath::kCheckpoint) impl_->stats.restores_checkpoint++;
  if (plan.path == RestorePath::kLogReplay) impl_->stats.restores_log_replay++;
  if (plan.path != RestorePath::kReprefill) s.expect_base = plan.from;
  return plan;
}

Result<RestorePlan> StateManager::resume_plan(int64_t seq) const {
  const Seq* s = impl_->find(seq);
  if (s == nullptr) return invalid_argument("no sequence " + std::to_string(seq));
  return impl_->plan_resume(*s);
}

Result<StateRead> StateManager::read_plan(int64_t seq) const {
  const Impl& m = *impl_;
  const Seq* s = m.find(seq);
  if (s == nullptr) return invalid_argument("read state: no sequence " + std::to_string(seq));
  const int64_t len = static_cast<int64_t>(s->tokens.size());
  const std::optional<int64_t> base = m.best_log_base(*s, len);
  if (!base) return invalid_argument("read state: sequence " + std::to_string(seq) + " must be restored first");
  StateRead r;
  r.base = m.ckpt_slot(*base);
  r.base_pos = m.ckpt_pos(*base);
  r.length = len;
  r.page_size = m.B;
  for (int64_t id : s->pages) r.logs.push_back(m.pages.at(id).log);
  return r;
}

std::vector<StorageOp> StateManager::take_ops() {
  RSSM_CHECK(!impl_->in_step);
  std::vector<StorageOp> out;
  out.swap(impl_->ops);
  return out;
}

bool StateManager::has_sequence(int64_t seq) const { return impl_->find(seq) != nullptr; }

int64_t StateManager::length(int64_t seq) const {
  const Seq* s = impl_->find(seq);
  return s == nullptr ? -1 : static_cast<int64_t>(s->tokens.size());
}

int64_t StateManager::committed(int64_t seq) const {
  const Seq* s = impl_->find(seq);
  return s == nullptr ? -1 : s->committed;
}

std::span<const int32_t> StateManager::tokens(int64_t seq) const {
  const Seq* s = impl_->find(seq);
  if (s == nullptr) return {};
  return s->tokens;
}

int64_t StateManager::n_sequences() const { return static_cast<int64_t>(impl_->seqs.size()); }
HeldBytes StateManager::exclusive_bytes(std::span<const int64_t> ids) const {
  const Impl& m = *impl_;
  std::map<int64_t, int> page_refs, ckpt_refs;  // references from the set
  for (int64_t id : ids) {
    const Seq* s = m.find(id);
    if (s == nullptr) continue;
    for (int64_t pg : s->pages) page_refs[pg]++;
    for (int64_t c : s->ckpts) ckpt_refs[c]++;
  }
  HeldBytes out;
  for (const auto& [id, n] : page_refs) {
    const Page& pg = m.pages.at(id);
    if (n < pg.refs) continue;  // someone else holds it too
    out.kv += m.page_kv;
    out.state += m.log_held(pg);
  }
  for (const auto& [id, n] : ckpt_refs) {
    const Ckpt& c = m.ckpts.at(id);
    if (n < c.refs || c.evicted()) continue;
    for (int i = 0; i < c.parts; ++i) out.state += m.ckpt_part[size_t(i)];
  }
  return out;
}

int64_t StateManager::n_pages() const { return static_cast<int64_t>(impl_->pages.size()); }
int64_t StateManager::n_checkpoints() const { return static_cast<int64_t>(impl_->ckpts.size()); }
int32_t StateManager::page_slots_high() const { return impl_->page_slots.high; }
int32_t StateManager::log_slots_high() const { return impl_->log_slots.high; }
int32_t StateManager::checkpoint_slots_high() const { return impl_->ckpt_slots.high; }
int64_t StateManager::checkpoint_bytes() const { return impl_->ckpt_bytes(); }
int64_t StateManager::page_log_bytes() const { return impl_->logs ? impl_->log_bytes() : 0; }

void StateManager::pin(std::span<const int64_t> seqs) {
  for (int64_t s : seqs) impl_->pinned.insert(s);
}

void StateManager::unpin_all() { impl_->pinned.clear(); }

int64_t StateManager::evict(int64_t bytes) {
  RSSM_CHECK(!impl_->in_step);
  Impl::Protected prot;
  for (int64_t s : impl_->pinned)
    if (const Seq* q = impl_->find(s)) impl_->protect_resume(*q, &prot);
  return impl_->evict(bytes, prot, std::nullopt);
}

}  // namespace replayssm
