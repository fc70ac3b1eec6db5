// ReplayStore: construction, sequence bookkeeping (add, fork, truncate,
// commit, restore, release) and the restore planner. Steps are in
// store_step.cpp, eviction in store_evict.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "replayssm/op_params.h"
#include "store/store_impl.h"

namespace replayssm {

namespace {

// Log entry floats of an SSM layer, from its cache shape (op_params.h):
// Mamba2 pre-conv xBC | dt, GDN pre-conv qkv | u | g.
int64_t entry_floats(const CacheLayerSpec& l) {
  const int64_t C = l.conv_channels, H = l.n_heads;
  if (l.kind == CacheLayerSpec::kMamba2) return C + H;
  return C + H * l.state_cols + H;
}

// Channels replay recomputes per logged token (the conv outputs an entry
// does not store): Mamba2 x | B, H·P + G·N of C = H·P + 2·G·N; GDN k,
// Hk·dk of C = 2·Hk·dk + Hv·dv.
int64_t recomputed_channels(const CacheLayerSpec& l) {
  const int64_t C = l.conv_channels, H = l.n_heads;
  if (l.kind == CacheLayerSpec::kMamba2) return H * l.state_rows + (C - H * l.state_rows) / 2;
  return (C - H * l.state_cols) / 2;
}

}  // namespace

ReplayStore::Impl::Impl(CacheSpec s, StoreOptions o) : spec(std::move(s)), opt(o) {
  B = opt.page_size;
  logs = opt.strategy == Strategy::kReplay;
  for (const CacheLayerSpec& l : spec.layers) {
    LayerLayout L;
    L.spec = l;
    if (l.kind == CacheLayerSpec::kAttention) {
      L.kv_width = l.n_kv_heads * l.head_dim;
      L.kv_off = page_kv_floats;
      page_kv_floats += B * 2 * L.kv_width;
    } else {
      L.ssm = n_ssm++;
      L.entry = entry_floats(l);
      page_log_floats += B * L.entry;
      L.win_floats = (l.conv_width - 1) * l.conv_channels;
      L.state_floats = l.n_heads * l.state_rows * l.state_cols;
      L.win_off = 0;
      L.state_off = L.win_floats;
      ckpt_floats += L.win_floats + L.state_floats;
      ssm_log_floats.push_back(B * L.entry);
      ssm_ckpt_floats.push_back(L.win_floats + L.state_floats);
      // A replayed token: one update per state element, and the conv (K
      // multiply-adds per recomputed channel) that rebuilds its inputs.
      replay_flops += 2.0 * static_cast<double>(L.state_floats) +
                      2.0 * static_cast<double>(l.conv_width * recomputed_channels(l));
    }
    layers.push_back(L);
  }
  prefill_flops = spec.prefill_flops_per_token > 0 ? spec.prefill_flops_per_token : 100.0 * replay_flops;
}

void ReplayStore::Impl::add_state(int64_t bytes) {
  stats.state_bytes += bytes;
  stats.state_bytes_peak = std::max(stats.state_bytes_peak, stats.state_bytes);
}

void ReplayStore::Impl::add_kv(int64_t bytes) {
  stats.kv_bytes += bytes;
  stats.kv_bytes_peak = std::max(stats.kv_bytes_peak, stats.kv_bytes);
}

int64_t ReplayStore::Impl::new_page(bool with_log) {
  const int64_t id = next_page++;
  Page& p = pages[id];
  p.refs = 1;
  p.kv.assign(static_cast<size_t>(page_kv_floats), 0.0f);
  add_kv(page_kv_floats * 4);
  if (with_log) alloc_log(p);
  p.last_use = clock;
  return id;
}

int64_t ReplayStore::Impl::held_bytes(const std::vector<std::vector<float>>& parts) {
  int64_t n = 0;
  for (const std::vector<float>& v : parts) n += static_cast<int64_t>(v.size()) * 4;
  return n;
}

void ReplayStore::Impl::alloc_log(Page& p) {
  RSSM_CHECK(p.log.empty());
  p.log.resize(static_cast<size_t>(n_ssm));  // parts come as the layers append
  p.log_lo = p.log_hi = 0;                   // nothing valid yet
}

void ReplayStore::Impl::drop_log(Page& p) {
  add_state(-held_bytes(p.log));
  p.log.clear();
  p.log.shrink_to_fit();
  p.log_lo = p.log_hi = 0;
}

int64_t ReplayStore::Impl::copy_page(int64_t id) {
  const Page& src = pages.at(id);
  const int64_t nid = next_page++;
  Page& p = pages[nid];
  p.refs = 1;
  p.kv = pages.at(id).kv;
  add_kv(page_kv_floats * 4);
  p.log = src.log;
  p.log_lo = src.log_lo;
  p.log_hi = src.log_hi;
  add_state(held_bytes(p.log));
  p.last_use = clock;
  unref_page(id);
  return nid;
}

void ReplayStore::Impl::unref_page(int64_t id) {
  auto it = pages.find(id);
  RSSM_CHECK(it != pages.end() && it->second.refs > 0);
  if (--it->second.refs > 0) return;
  add_kv(-page_kv_floats * 4);
  drop_log(it->second);
  pages.erase(it);
}

int64_t ReplayStore::Impl::new_ckpt(int64_t pos, bool data) {
  const int64_t id = next_ckpt++;
  Ckpt& c = ckpts[id];
  c.refs = 1;
  c.pos = pos;
  c.data.resize(static_cast<size_t>(n_ssm));
  if (data)
    for (int i = 0; i < n_ssm; ++i) alloc_ckpt_part(c, i);
  c.last_use = clock;
  return id;
}

void ReplayStore::Impl::alloc_ckpt_part(Ckpt& c, int ssm) {
  std::vector<float>& part = c.data[static_cast<size_t>(ssm)];
  if (!part.empty()) return;
  part.assign(static_cast<size_t>(ssm_ckpt_floats[static_cast<size_t>(ssm)]), 0.0f);
  add_state(static_cast<int64_t>(part.size()) * 4);
}

void ReplayStore::Impl::drop_ckpt_data(Ckpt& c) {
  add_state(-held_bytes(c.data));
  c.data.clear();
  c.data.shrink_to_fit();
}

void ReplayStore::Impl::unref_ckpt(int64_t id) {
  auto it = ckpts.find(id);
  RSSM_CHECK(it != ckpts.end() && it->second.refs > 0);
  if (--it->second.refs > 0) return;
  drop_ckpt_data(it->second);
  ckpts.erase(it);
}

Seq* ReplayStore::Impl::find(int64_t id) {
  auto it = seqs.find(id);
  return it == seqs.end() ? nullptr : &it->second;
}

const Seq* ReplayStore::Impl::find(int64_t id) const {
  auto it = seqs.find(id);
  return it == seqs.end() ? nullptr : &it->second;
}

bool ReplayStore::Impl::log_covers(const Seq& s, int64_t from, int64_t to) const {
  // A model without SSM layers (attention and MLPs only) has no state to
  // rebuild: any checkpoint, the zero one too, is already every position's.
  if (from >= to || n_ssm == 0) return true;
  if (!logs) return false;
  for (int64_t pi = from / B; pi <= (to - 1) / B; ++pi) {
    const Page& p = pages.at(s.pages[pi]);
    const int64_t lo = std::max(from - pi * B, int64_t{0}), hi = std::min(to - pi * B, B);
    if (p.log.empty() || p.log_lo > lo || p.log_hi < hi) return false;
  }
  return true;
}

std::optional<int64_t> ReplayStore::Impl::best_log_base(const Seq& s, int64_t len) const {
  for (auto it = s.ckpts.rbegin(); it != s.ckpts.rend(); ++it) {
    const Ckpt& c = ckpts.at(*it);
    if (c.evicted() || c.pos > len) continue;
    if (log_covers(s, c.pos, len)) return *it;
    if (!logs) break;  // lower checkpoints cannot do better without a log
  }
  if (log_covers(s, 0, len)) return kZeroCkpt;
  return std::nullopt;
}

int64_t ReplayStore::Impl::best_any_base(const Seq& s, int64_t len) const {
  for (auto it = s.ckpts.rbegin(); it != s.ckpts.rend(); ++it) {
    const Ckpt& c = ckpts.at(*it);
    if (!c.evicted() && c.pos <= len) return *it;
  }
  return kZeroCkpt;
}

RestorePlan ReplayStore::Impl::plan_resume(const Seq& s) const {
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

void ReplayStore::Impl::prune(Seq& s) {
  const int64_t len = static_cast<int64_t>(s.tokens.size());
  const int64_t K = opt.checkpoint_interval;
  const int64_t sparse = K > 0 ? K : opt.window;  // kRecompute's interval
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
    }
    if (k) keep.push_back(id);
    else unref_ckpt(id);
  }
  s.ckpts = std::move(keep);
}

std::optional<int64_t> ReplayStore::Impl::live_base(const Seq& s) const {
  return best_log_base(s, static_cast<int64_t>(s.tokens.size()));
}

void ReplayStore::Impl::sort_ckpts(Seq& s) {
  std::stable_sort(s.ckpts.begin(), s.ckpts.end(),
                   [&](int64_t x, int64_t y) { return ckpts.at(x).pos < ckpts.at(y).pos; });
}

void ReplayStore::Impl::settle(Seq& s) {
  prune(s);
  reset_expect(s);
  trim_log(s);
}

void ReplayStore::Impl::reset_expect(Seq& s) {
  const int64_t len = static_cast<int64_t>(s.tokens.size());
  const std::optional<int64_t> b = best_log_base(s, len);
  s.expect_base = ckpt_pos(b ? *b : best_any_base(s, len));
}

bool ReplayStore::Impl::log_unneeded(const Seq& s, int64_t pi) const {
  const int64_t id = s.pages[pi];
  int sharers = 0;
  for (int64_t o : requests.at(s.request).seqs) {
    const Seq& t = seqs.at(o);
    if (pi >= static_cast<int64_t>(t.pages.size()) || t.pages[pi] != id) continue;
    if ((pi + 1) * B > t.expect_base - opt.log_retention) return false;
    ++sharers;
  }
  // Pages are shared only by forks, which stay in their request; a holder
  // outside it would be a broken invariant.
  RSSM_CHECK(sharers == pages.at(id).refs);
  return true;
}

int64_t ReplayStore::Impl::fold_below(const SlicePlan& sp) const {
  // After end_step the slice stands on a checkpoint at or above its highest
  // write (the log covers [write, end): every page from there on gets one),
  // so trim_log would drop every page wholly below write − log_retention.
  // Writes never pass the committed cursor, so drafts are never folded.
  if (!logs || sp.rebuild || opt.log_retention < 0 || sp.write_pos.empty()) return 0;
  const int64_t f = *std::max_element(sp.write_pos.begin(), sp.write_pos.end());
  RSSM_CHECK(f <= sp.committed_after);
  return f - opt.log_retention;
}

void ReplayStore::Impl::trim_log(Seq& s) {
  if (!logs || opt.log_retention < 0) return;
  const int64_t limit = s.expect_base - opt.log_retention;
  bool advance = true;  // the cursor moves only over pages left without a log
  for (int64_t pi = s.trim_from; (pi + 1) * B <= limit && pi < static_cast<int64_t>(s.pages.size()); ++pi) {
    Page& pg = pages.at(s.pages[pi]);
    // A shared page's log goes once every sharer's base is past it (beams
    // share their whole common history: waiting for a last owner would
    // keep it for ever).
    if (!pg.log.empty() && pg.refs > 1 && !log_unneeded(s, pi)) {
      advance = false;  // the sharer that passes it last trims it
      continue;
    }
    if (!pg.log.empty()) drop_log(pg);
    if (advance) s.trim_from = pi + 1;
  }
}

void ReplayStore::Impl::drop_tokens(Seq& s, int64_t pos) {
  s.expect_base = std::min(s.expect_base, pos);
  s.tokens.resize(static_cast<size_t>(pos));
  s.committed = std::min(s.committed, pos);
  const size_t n_pages = static_cast<size_t>((pos + B - 1) / B);
  s.trim_from = std::min(s.trim_from, static_cast<int64_t>(n_pages));
  while (s.pages.size() > n_pages) {
    unref_page(s.pages.back());
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

void ReplayStore::Impl::release_seq(int64_t id) {
  Seq& s = seqs.at(id);
  for (int64_t p : s.pages) unref_page(p);
  for (int64_t c : s.ckpts) unref_ckpt(c);
  auto r = requests.find(s.request);
  r->second.seqs.erase(id);
  if (r->second.seqs.empty()) requests.erase(r);
  pinned.erase(id);
  seqs.erase(id);
}

// ---------------------------------------------------------------------------

namespace {

StoreOptions valid_or_abort(const StoreOptions& o) {
  if (const Status st = o.validate(); !st.ok()) {
    std::fprintf(stderr, "ReplayStore: invalid StoreOptions (validate() them first): %s\n", st.message().c_str());
    std::abort();
  }
  return o;
}

}  // namespace

ReplayStore::ReplayStore(CacheSpec spec, StoreOptions opt)
    : impl_(std::make_unique<Impl>(std::move(spec), valid_or_abort(opt))) {}

ReplayStore::~ReplayStore() = default;

const StoreStats& ReplayStore::stats() const { return impl_->stats; }
const StoreOptions& ReplayStore::options() const { return impl_->opt; }

int64_t ReplayStore::add_sequence(int64_t budget_bytes) {
  const int64_t id = impl_->next_seq++;
  Seq& s = impl_->seqs[id];
  s.request = id;
  impl_->requests[id] = Request{budget_bytes, {id}};
  return id;
}

Result<int64_t> ReplayStore::fork(int64_t seq, std::optional<int64_t> pos) {
  Impl& m = *impl_;
  Seq* parent = m.find(seq);
  if (parent == nullptr) return invalid_argument("fork: no sequence " + std::to_string(seq));
  const int64_t len = static_cast<int64_t>(parent->tokens.size());
  const int64_t p = pos.value_or(len);
  if (p < 0 || p > len)
    return invalid_argument("fork: position " + std::to_string(p) + " outside [0, " + std::to_string(len) + "]");
  // Snapshot and recompute copy the state at p: make room first.
  int64_t copy_src = -1;
  if (m.opt.strategy != Strategy::kReplay)
    for (int64_t id : parent->ckpts)
      if (m.ckpts.at(id).pos == p && !m.ckpts.at(id).evicted()) copy_src = id;
  if (copy_src >= 0) {
    Impl::Protected prot;
    prot.ckpts.insert(copy_src);
    RSSM_RETURN_IF_ERROR(m.reserve(m.ckpt_bytes(), {{parent->request, m.ckpt_bytes()}}, prot));
  }
  const int64_t id = m.next_seq++;
  Seq& child = m.seqs[id];
  child.request = parent->request;
  m.requests.at(child.request).seqs.insert(id);
  child.tokens.assign(parent->tokens.begin(), parent->tokens.begin() + p);
  child.committed = std::min(parent->committed, p);
  const size_t n_pages = static_cast<size_t>((p + m.B - 1) / m.B);
  for (size_t i = 0; i < n_pages; ++i) {
    child.pages.push_back(parent->pages[i]);
    m.pages.at(parent->pages[i]).refs++;
  }
  for (int64_t c : parent->ckpts) {
    const Ckpt& ck = m.ckpts.at(c);
    if (ck.pos > p || ck.evicted() || c == copy_src) continue;
    child.ckpts.push_back(c);
    m.ckpts.at(c).refs++;
  }
  if (copy_src >= 0) {
    const int64_t nc = m.new_ckpt(p);
    m.ckpts.at(nc).data = m.ckpts.at(copy_src).data;
    m.stats.state_writes_bytes += m.ckpt_bytes();
    child.ckpts.push_back(nc);
  }
  m.sort_ckpts(child);
  m.prune(child);
  m.reset_expect(child);
  return id;
}

Status ReplayStore::release(int64_t seq) {
  if (impl_->find(seq) == nullptr) return invalid_argument("release: no sequence " + std::to_string(seq));
  impl_->release_seq(seq);
  return {};
}

Status ReplayStore::truncate(int64_t seq, int64_t pos) {
  Seq* s = impl_->find(seq);
  if (s == nullptr) return invalid_argument("truncate: no sequence " + std::to_string(seq));
  const int64_t len = static_cast<int64_t>(s->tokens.size());
  if (pos < 0 || pos > len)
    return invalid_argument("truncate: position " + std::to_string(pos) + " outside [0, " + std::to_string(len) + "]");
  impl_->drop_tokens(*s, pos);
  return {};
}

Status ReplayStore::commit(int64_t seq, int64_t n) {
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

Result<RestorePlan> ReplayStore::restore(int64_t seq, int64_t pos) {
  RSSM_RETURN_IF_ERROR(truncate(seq, pos));
  Seq& s = *impl_->find(seq);
  const RestorePlan plan = impl_->plan_resume(s);
  // A re-prefill is counted by the rebuild step that performs it.
  if (plan.path == RestorePath::kCheckpoint) impl_->stats.restores_checkpoint++;
  if (plan.path == RestorePath::kLogReplay) impl_->stats.restores_log_replay++;
  if (plan.path != RestorePath::kReprefill) s.expect_base = plan.from;
  return plan;
}

Result<RestorePlan> ReplayStore::resume_plan(int64_t seq) const {
  const Seq* s = impl_->find(seq);
  if (s == nullptr) return invalid_argument("no sequence " + std::to_string(seq));
  return impl_->plan_resume(*s);
}

bool ReplayStore::has_sequence(int64_t seq) const { return impl_->find(seq) != nullptr; }

int64_t ReplayStore::length(int64_t seq) const {
  const Seq* s = impl_->find(seq);
  return s == nullptr ? -1 : static_cast<int64_t>(s->tokens.size());
}

int64_t ReplayStore::committed(int64_t seq) const {
  const Seq* s = impl_->find(seq);
  return s == nullptr ? -1 : s->committed;
}

std::span<const int32_t> ReplayStore::tokens(int64_t seq) const {
  const Seq* s = impl_->find(seq);
  if (s == nullptr) return {};
  return s->tokens;
}

int64_t ReplayStore::n_sequences() const { return static_cast<int64_t>(impl_->seqs.size()); }
int64_t ReplayStore::n_pages() const { return static_cast<int64_t>(impl_->pages.size()); }
int64_t ReplayStore::n_checkpoints() const { return static_cast<int64_t>(impl_->ckpts.size()); }
int64_t ReplayStore::checkpoint_bytes() const { return impl_->ckpt_bytes(); }
int64_t ReplayStore::page_log_bytes() const { return impl_->logs ? impl_->log_bytes() : 0; }

void ReplayStore::pin(std::span<const int64_t> seqs) {
  for (int64_t s : seqs) impl_->pinned.insert(s);
}

void ReplayStore::unpin_all() { impl_->pinned.clear(); }

int64_t ReplayStore::evict(int64_t bytes) {
  Impl::Protected prot;
  for (int64_t s : impl_->pinned)
    if (const Seq* q = impl_->find(s)) impl_->protect_resume(*q, &prot);
  return impl_->evict(bytes, prot, std::nullopt);
}

}  // namespace replayssm
