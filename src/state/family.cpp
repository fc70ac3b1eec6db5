// Replay's flush placement: which checkpoints a step writes, and which
// sequences move onto them.
//
// A lone sequence folds its committed log into a checkpoint every W tokens.
// Forks of one request standing on the same base checkpoint (beams, samples,
// tree nodes) form a *family*, whose committed tokens past the base are a
// tree. What a family holds is (checkpoints × S) + (distinct log entries ×
// e): a checkpoint at a tree node serves every member below it and frees
// the log above it that no other member needs, and the base itself goes
// once no member stands on it. So rather than one checkpoint per member,
// the planner places checkpoints at the tree's nodes — branch points and
// tips — where they minimise that sum (an exact dynamic program over the
// tree, below), and writes them when that saves memory. Two rules keep
// it from trading too much for memory:
//
//  - a checkpoint sits at least ⌈W/2⌉ past the base (family_spacing), so
//    a family writes at most about twice as often as a lone sequence. Its
//    lineages grow private log between its writes: with W the spacing, the
//    trained model's beam W=8 held 0.6 S over the least layout at its
//    peak; W/2 takes 7 % off that peak for 1.46x the writes, and closer
//    spacing buys little more for many more writes (docs/workloads.md).
//    Best-of-8, whose peak does not move, pays 1.9x the writes;
//  - once a slice would replay more than the replay limit (log entries
//    since its base), the shallowest node on its path that brings its span
//    to at most half the limit gets a checkpoint (its subtree shares it).
//
// A step may write several new slots for one family: the flush folds
// layer by layer, so each costs one SSM layer's part (S/L) before that
// layer's folded log is freed, not S next to the whole log.
//
// The family is planned once per step with one view (tokens and committed
// cursors after the step), and a node is written by the first stepping
// member below it. When the whole family leaves its base and nothing else
// holds it, one new checkpoint reuses the base's slot: that slice runs
// after every other reader of the base, and members on other paths drop
// the slot (end_step).
#include <algorithm>
#include <limits>
#include <map>

#include "state/manager_impl.h"

namespace replayssm {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A family member as the step sees it: its tokens with the slice's new
// ones, and its committed tip after the step.
struct Member {
  int64_t id = 0;
  const Seq* seq = nullptr;
  SlicePlan* sp = nullptr;  // null when the member does not step
  int64_t tip = 0;
  int32_t token(int64_t j) const {
    const int64_t len = static_cast<int64_t>(seq->tokens.size());
    return j < len ? seq->tokens[j] : sp->tokens[j - sp->s.pos];
  }
};

// The family's committed tokens past the base as a compressed trie: one
// node per branch point and per member tip; `chain` tokens lead to it from
// its parent.
struct Node {
  int64_t depth = 0, chain = 0;
  std::vector<int> kids, members;  // members: every member at or below
  bool tip = false;                // a member ends exactly here
  // Dynamic program, in bytes: D = every member below is served by a
  // checkpoint at or below this node (the chain above is not needed);
  // U = unconstrained (members served from above need the chain logged).
  double D = 0, U = 0;
  bool d_ckpt = false, u_covered = false;
};

struct Tree {
  const std::vector<Member>& ms;
  std::vector<Node> nodes;

  // `group` agrees on the tokens [parent, from); extends the chain while
  // they agree and none ends, then splits.
  int build(std::vector<int> group, int64_t parent, int64_t from) {
    int64_t d = from;
    auto agree = [&](int64_t at) {
      for (int i : group)
        if (ms[i].tip <= at || ms[i].token(at) != ms[group[0]].token(at)) return false;
      return true;
    };
    while (agree(d)) ++d;
    const int id = static_cast<int>(nodes.size());
    nodes.push_back({});
    nodes[id].depth = d;
    nodes[id].chain = d - parent;
    nodes[id].members = group;
    split(id, group, d);
    return id;
  }
  void split(int id, const std::vector<int>& group, int64_t d) {
    std::map<int32_t, std::vector<int>> by_token;
    for (int i : group) {
      if (ms[i].tip == d) nodes[id].tip = true;
      else by_token[ms[i].token(d)].push_back(i);
    }
    for (auto& [tok, g] : by_token) {
      const int k = build(std::move(g), d, d + 1);
      nodes[id].kids.push_back(k);
    }
  }
};

// The least distance from a family's base to a checkpoint it writes:
// ⌈W/2⌉, but never under K−1 and never over W. Family writes nearer their
// base than K−1 (whose conv window then reaches into the base's) gave
// wrong outputs in tests/store_property_test.cpp (W = 4, K = 4): a write
// into the base's own slot overwrote the window that later convs read.
// The kernels now copy the window first, and the tests pass without the
// K−1 bound; it stays until a nearer spacing is measured (docs/store.md).
// With W < K−1 the min with W wins, so those writes do occur.
int64_t family_spacing(const StateManager::Impl& m) {
  int64_t k1 = 0;
  for (const LayerLayout& l : m.layers)
    if (l.ssm >= 0) k1 = std::max(k1, l.spec.conv_width - 1);
  return std::min(m.opt.window, std::max((m.opt.window + 1) / 2, k1));
}

bool has_rebuild(const std::vector<SlicePlan>& plan, int64_t seq) {
  for (const SlicePlan& sp : plan)
    if (sp.s.seq == seq && sp.rebuild) return true;
  return false;
}

// Plans the writes of one family standing on `base` (see the top).
void plan_family(const StateManager::Impl& m, int64_t base, const std::vector<Member>& fam) {
  const int64_t c = m.ckpt_pos(base), W = m.opt.window;
  const bool base_slot = base != kZeroCkpt && m.ckpts.at(base).refs == static_cast<int>(fam.size());
  const int64_t K = m.keep(*fam[0].seq).checkpoint_interval;
  auto reusable = [&](int64_t d) { return base_slot && (K == 0 || c / K == d / K); };

  if (fam.size() == 1) {  // a lone sequence: every W committed tokens
    SlicePlan* sp = fam[0].sp;
    if (sp == nullptr) return;
    // With an interval K, also each multiple of K the step passes: a long
    // prompt taken in one step otherwise has no checkpoint inside it, and a
    // restore there (a prefix-cache hit) replays from its start.
    if (K > 0)
      for (int64_t f = (c / K + 1) * K; f < fam[0].tip; f += K) sp->write_pos.push_back(f);
    // The position the sequence keeps (a prefix-cache hit's divergence).
    const int64_t at = fam[0].seq->keep_at;
    const bool planned = std::find(sp->write_pos.begin(), sp->write_pos.end(), at) != sp->write_pos.end();
    if (at > c && at < fam[0].tip && !planned) {
      sp->write_pos.push_back(at);
      std::sort(sp->write_pos.begin(), sp->write_pos.end());
    }
    if (fam[0].tip - c >= W) sp->write_pos.push_back(fam[0].tip);
    sp->share_with.assign(sp->write_pos.size(), {});
    if (sp->write_pos.size() == 1 && sp->write_pos[0] == fam[0].tip && reusable(fam[0].tip)) sp->reuse = 0;
    return;
  }

  Tree tree{fam, {}};
  std::vector<int> all(fam.size());
  for (size_t i = 0; i < fam.size(); ++i) all[i] = static_cast<int>(i);
  tree.nodes.push_back({});
  tree.nodes[0].depth = c;
  tree.nodes[0].members = all;
  tree.split(0, all, c);
  std::vector<Node>& nodes = tree.nodes;

  // The dynamic program, children before parents (they have higher ids).
  const double S = static_cast<double>(m.ckpt_bytes()), e = static_cast<double>(m.log_bytes()) / m.B;
  double logged = 0.0;  // every entry since the base: what the family holds now
  const int64_t spacing = family_spacing(m);
  for (int v = static_cast<int>(nodes.size()) - 1; v >= 1; --v) {
    Node& n = nodes[v];
    double sum_u = 0.0, sum_d = 0.0;
    for (int k : n.kids) {
      sum_u += nodes[k].U;
      sum_d += nodes[k].D;
    }
    const double with_ckpt = n.depth - c >= spacing ? S + sum_u : kInf;
    const double below = n.tip ? kInf : sum_d;
    n.d_ckpt = with_ckpt < below;
    n.D = std::min(with_ckpt, below);
    const double from_above = static_cast<double>(n.chain) * e + sum_u;
    n.u_covered = n.D < from_above;
    n.U = std::min(n.D, from_above);
    logged += static_cast<double>(n.chain) * e;
  }
  const double base_cost = base_slot ? S : 0.0;
  double keep = base_cost, leave = nodes[0].tip ? kInf : 0.0;
  for (int k : nodes[0].kids) {
    keep += nodes[k].U;
    leave += nodes[k].D;
  }
  const bool leaves_base = leave < keep;

  // The nodes to checkpoint, when that saves memory.
  std::vector<int> chosen;
  if (std::min(keep, leave) < base_cost + logged) {
    std::vector<std::pair<int, bool>> pending;  // (node, served from at or below it)
    for (int k : nodes[0].kids) pending.push_back({k, leaves_base});
    while (!pending.empty()) {
      auto [v, covered] = pending.back();
      pending.pop_back();
      const Node& n = nodes[v];
      if (!covered && n.u_covered) covered = true;
      if (covered && n.d_ckpt) chosen.push_back(v);
      const bool kids_covered = covered && !n.d_ckpt;
      for (int k : n.kids) pending.push_back({k, kids_covered});
    }
  }

  // Each stepping member's path, root first.
  auto path_of = [&](int i) {
    std::vector<int> p;
    for (int v = 0;;) {
      int next = -1;
      for (int k : nodes[v].kids)
        if (std::find(nodes[k].members.begin(), nodes[k].members.end(), i) != nodes[k].members.end()) next = k;
      if (next < 0) return p;
      p.push_back(next);
      v = next;
    }
  };
  std::vector<bool> written(nodes.size(), false);
  std::map<int, std::vector<int>> claims;  // member → nodes it writes
  auto claim = [&](int i, int v) {
    if (written[v]) return;
    written[v] = true;
    claims[i].push_back(v);
  };
  std::sort(chosen.begin(), chosen.end());
  for (int v : chosen)
    for (int i : nodes[v].members)
      if (fam[i].sp != nullptr) {
        claim(i, v);
        break;
      }
  bool all_written = true;
  for (int v : chosen) all_written = all_written && written[v];
  // The replay bound: the shallowest node that leaves at most half the limit.
  const int64_t limit = m.replay_limit();
  for (size_t i = 0; i < fam.size(); ++i) {
    if (fam[i].sp == nullptr) continue;
    const int64_t end = fam[i].sp->s.pos + fam[i].sp->s.n;
    const std::vector<int> path = path_of(static_cast<int>(i));
    int64_t from = c;
    for (int v : path)
      if (written[v]) from = nodes[v].depth;
    if (end - from <= limit || path.empty()) continue;
    int pick = path.back();
    for (int v : path)
      if (nodes[v].depth > from && end - nodes[v].depth <= limit / 2) {
        pick = v;
        break;
      }
    if (nodes[pick].depth > from) claim(static_cast<int>(i), pick);
  }
  // Turn claims into writes, ascending; pick the one that reuses the base.
  int reuse_member = -1, reuse_node = -1;
  if (leaves_base && all_written && !chosen.empty())
    for (auto& [i, vs] : claims)
      for (int v : vs)
        if (reusable(nodes[v].depth) && reuse_node < 0) {
          reuse_member = i;
          reuse_node = v;
        }
  for (auto& [i, vs] : claims) {
    std::sort(vs.begin(), vs.end(), [&](int a, int b) { return nodes[a].depth < nodes[b].depth; });
    SlicePlan* sp = fam[i].sp;
    for (int v : vs) {
      if (i == reuse_member && v == reuse_node) {
        // The base's slot moves to this node: members on other paths,
        // which hold it too, drop it (they move onto their own nodes).
        sp->reuse = static_cast<int>(sp->write_pos.size());
        for (size_t j = 0; j < fam.size(); ++j)
          if (std::find(nodes[v].members.begin(), nodes[v].members.end(), static_cast<int>(j)) ==
              nodes[v].members.end())
            sp->leave_base.push_back(fam[j].id);
      }
      sp->write_pos.push_back(nodes[v].depth);
      std::vector<int64_t> with;
      for (int j : nodes[v].members)
        if (j != i) with.push_back(fam[j].id);
      sp->share_with.push_back(std::move(with));
    }
  }
}

}  // namespace

void StateManager::Impl::plan_replay_step(std::vector<SlicePlan>* plan) const {
  // Families: (request, base) → members, stepping or not.
  std::map<std::pair<int64_t, int64_t>, std::vector<Member>> families;
  std::map<int64_t, SlicePlan*> stepping;
  for (SlicePlan& sp : *plan) {
    if (sp.rebuild) {  // a rebuild ends at a checkpoint, in its base's slot if it may
      const int64_t end = sp.s.pos + sp.s.n, K = keep(*find(sp.s.seq)).checkpoint_interval;
      sp.write_pos = {end};
      if (sp.base != kZeroCkpt && ckpts.at(sp.base).refs == 1 && (K == 0 || sp.base_pos / K == end / K))
        sp.reuse = 0;
      continue;
    }
    stepping[sp.s.seq] = &sp;
  }
  for (const auto& [seq, sp] : stepping) {
    const auto key = std::make_pair(find(seq)->request, sp->base);
    if (families.count(key)) continue;
    std::vector<Member>& fam = families[key];
    for (int64_t id : requests.at(key.first).seqs) {
      const Seq& t = seqs.at(id);
      auto st = stepping.find(id);
      if (st != stepping.end() ? st->second->base != sp->base
                               : live_base(t) != std::optional<int64_t>(sp->base))
        continue;
      if (st == stepping.end() && has_rebuild(*plan, id)) continue;
      Member m{id, &t, st != stepping.end() ? st->second : nullptr, 0};
      m.tip = std::max(m.sp ? m.sp->committed_after : t.committed, sp->base_pos);
      fam.push_back(m);
    }
  }
  for (auto& [key, fam] : families) plan_family(*this, key.second, fam);
}

}  // namespace replayssm
