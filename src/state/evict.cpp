// StateManager eviction: what may go, in what order, and reserving room for
// a step. Evicting drops a checkpoint's data or a page's log, never tokens
// or KV rows, so a sequence is never lost — its next restore is slower.
#include <algorithm>

#include "state/manager_impl.h"

namespace replayssm {

void StateManager::Impl::protect_resume(const Seq& s, Protected* p) const {
  const RestorePlan r = plan_resume(s);
  const int64_t len = static_cast<int64_t>(s.tokens.size());
  const int64_t base = r.path == RestorePath::kReprefill ? best_any_base(s, len)
                                                         : best_log_base(s, len).value_or(kZeroCkpt);
  if (base != kZeroCkpt) p->ckpts.insert(base);
  for (int64_t pi = ckpt_pos(base) / B; pi < static_cast<int64_t>(s.pages.size()); ++pi)
    p->pages.insert(s.pages[pi]);
}

int64_t StateManager::Impl::request_bytes(int64_t request) const {
  std::set<int64_t> pg, ck;
  for (int64_t id : requests.at(request).seqs) {
    const Seq& s = seqs.at(id);
    pg.insert(s.pages.begin(), s.pages.end());
    ck.insert(s.ckpts.begin(), s.ckpts.end());
  }
  int64_t n = 0;
  for (int64_t p : pg) n += pages.at(p).has_log() ? log_bytes() : 0;
  for (int64_t c : ck) n += ckpts.at(c).evicted() ? 0 : ckpt_bytes();
  return n;
}

std::vector<StateManager::Impl::Candidate> StateManager::Impl::eviction_candidates(
    const Protected& p, std::optional<int64_t> request) const {
  const Impl& m = *this;
  std::set<int64_t> in_pages, in_ckpts;  // referenced by `request`
  if (request)
    for (int64_t id : m.requests.at(*request).seqs) {
      const Seq& s = m.seqs.at(id);
      in_pages.insert(s.pages.begin(), s.pages.end());
      in_ckpts.insert(s.ckpts.begin(), s.ckpts.end());
    }
  std::vector<Candidate> out;
  // Rebuilding a checkpoint is about one window of replay; rebuilding a
  // page's log is a re-prefill of its B tokens.
  const double ckpt_cost = m.replay_flops * static_cast<double>(m.opt.window);
  const double log_cost = m.prefill_flops * static_cast<double>(m.B);
  for (const auto& [id, c] : m.ckpts)
    if (!c.evicted() && !p.ckpts.count(id) && (!request || in_ckpts.count(id)))
      out.push_back({true, id, m.ckpt_bytes(), ckpt_cost, c.last_use});
  for (const auto& [id, pg] : m.pages)
    if (pg.has_log() && !p.pages.count(id) && (!request || in_pages.count(id)))
      out.push_back({false, id, m.log_bytes(), log_cost, pg.last_use});
  // Checkpoints first, each kind by id: the order the (stable) eviction
  // sorts break their ties in, whatever the containers' order.
  std::sort(out.begin(), out.end(),
            [](const Candidate& a, const Candidate& b) { return a.is_ckpt != b.is_ckpt ? a.is_ckpt : a.id < b.id; });
  return out;
}

int64_t StateManager::Impl::evictable_bytes(const Protected& p, std::optional<int64_t> request) const {
  int64_t n = 0;
  for (const Candidate& c : eviction_candidates(p, request)) n += c.bytes;
  return n;
}

int64_t StateManager::Impl::evict(int64_t bytes, const Protected& p, std::optional<int64_t> request) {
  std::vector<Candidate> cs = eviction_candidates(p, request);
  if (opt.eviction == EvictionPolicy::kLru) {
    std::stable_sort(cs.begin(), cs.end(), [](const Candidate& a, const Candidate& b) {
      return a.last_use < b.last_use;
    });
  } else {
    std::stable_sort(cs.begin(), cs.end(), [](const Candidate& a, const Candidate& b) {
      const double ra = a.cost / a.bytes, rb = b.cost / b.bytes;
      return ra != rb ? ra < rb : a.last_use < b.last_use;
    });
  }
  int64_t freed = 0;
  bool any_ckpt = false;
  for (const Candidate& c : cs) {
    if (freed >= bytes) break;
    if (c.is_ckpt) {
      drop_ckpt_data(ckpts.at(c.id));
      any_ckpt = true;
    } else {
      drop_log(pages.at(c.id));
    }
    freed += c.bytes;
    stats.evictions++;
    stats.evicted_bytes += c.bytes;
  }
  if (any_ckpt)
    for (auto& [id, s] : seqs) prune(s);  // holders drop evicted refs now
  return freed;
}

Status StateManager::Impl::reserve(int64_t need, const std::map<int64_t, int64_t>& need_by_request,
                                  const Protected& p) {
  const int64_t global_deficit = opt.state_budget > 0 ? stats.state_bytes + need - opt.state_budget : 0;
  if (global_deficit > 0) {
    const int64_t can = evictable_bytes(p, std::nullopt);
    if (can < global_deficit)
      return out_of_budget("state budget of " + std::to_string(opt.state_budget) +
                           " bytes exceeded: the step needs " + std::to_string(need) + " more, " +
                           std::to_string(stats.state_bytes) + " are in use and only " +
                           std::to_string(can) + " can be evicted");
  }
  std::map<int64_t, int64_t> req_deficit;
  for (const auto& [r, n] : need_by_request) {
    const int64_t budget = requests.at(r).budget;
    if (budget <= 0) continue;
    const int64_t d = request_bytes(r) + n - budget;
    if (d <= 0) continue;
    const int64_t can = evictable_bytes(p, r);
    if (can < d)
      return out_of_budget("request " + std::to_string(r) + ": state budget of " + std::to_string(budget) +
                           " bytes exceeded: the step needs " + std::to_string(n) + " more, " +
                           std::to_string(request_bytes(r)) + " are in use and only " +
                           std::to_string(can) + " can be evicted");
    req_deficit[r] = d;
  }
  for (const auto& [r, d] : req_deficit) evict(d, p, r);
  if (opt.state_budget > 0) {
    const int64_t d = stats.state_bytes + need - opt.state_budget;
    if (d > 0) evict(d, p, std::nullopt);
  }
  return {};
}

}  // namespace replayssm
