// PrefixCache (see prefix_cache.h).
#include "workloads/prefix_cache.h"

#include <algorithm>
#include <limits>

namespace replayssm {

struct PrefixCache::Node {
  std::vector<int32_t> edge;  // the tokens from the parent to here
  int64_t depth = 0;          // tokens from the root to the end of the edge
  Node* parent = nullptr;
  std::map<int32_t, std::unique_ptr<Node>> children;  // by their edge's first token
  int64_t seq = -1;           // a leaf's entry
  uint64_t last_use = 0;      // a leaf's
};

PrefixCache::PrefixCache(Session& session, const PrefixCacheOptions& opt) : session_(session), opt_(opt) {}

PrefixCache::~PrefixCache() {
  for (const auto& [seq, leaf] : leaves_) (void)session_.release(seq);
}

Retention PrefixCache::retention() const {
  // A checkpoint per replay_limit tokens and the whole log: a hit anywhere
  // replays at most replay_limit entries.
  return Retention{opt_.replay_limit, -1};
}

PrefixCache::Node* PrefixCache::root(const std::string& key) {
  std::unique_ptr<Node>& r = roots_[key];
  if (!r) r = std::make_unique<Node>();
  return r.get();
}

PrefixCache::Hit PrefixCache::lookup(const std::string& key, std::span<const int32_t> prompt) {
  Hit hit;
  auto it = roots_.find(key);
  if (it == roots_.end() || prompt.size() < 2) return hit;
  const int64_t limit = static_cast<int64_t>(prompt.size()) - 1;  // the last token is always computed
  const Node* n = it->second.get();
  int64_t at = 0;
  const Node* below = nullptr;  // the node whose subtree holds the match
  int64_t node_end = 0;         // the deepest node passed whole (kPerNode)
  while (at < limit) {
    auto c = n->children.find(prompt[size_t(at)]);
    if (c == n->children.end()) break;
    const Node* child = c->second.get();
    int64_t j = 0;
    while (j < static_cast<int64_t>(child->edge.size()) && at + j < limit &&
           child->edge[size_t(j)] == prompt[size_t(at + j)])
      ++j;
    at += j;
    below = child;
    if (j < static_cast<int64_t>(child->edge.size())) break;  // diverges (or the limit) inside the edge
    node_end = at;
    n = child;
  }
  // The comparison rules: where engines that keep states only at some
  // positions could start (see PrefixCacheOptions::Mode).
  if (opt_.mode == PrefixCacheOptions::kPerNode) at = node_end;
  if (opt_.mode == PrefixCacheOptions::kBlockAligned && !(below != nullptr && below->seq >= 0 && at == below->depth))
    at = at / opt_.align * opt_.align;
  if (below == nullptr || at == 0) return hit;
  // The most recently used entry below the match: any holds the prefix.
  const Node* best = nullptr;
  std::vector<const Node*> stack{below};
  while (!stack.empty()) {
    const Node* x = stack.back();
    stack.pop_back();
    if (x->seq >= 0 && (best == nullptr || x->last_use > best->last_use)) best = x;
    for (const auto& [t, ch] : x->children) stack.push_back(ch.get());
  }
  if (best == nullptr) return hit;
  const_cast<Node*>(best)->last_use = ++clock_;
  hit.seq = best->seq;
  hit.length = at;
  return hit;
}

Status PrefixCache::insert(const std::string& key, int64_t seq, int64_t length) {
  StateManager& st = session_.state();
  if (length < 1 || length > st.length(seq)) return {};
  const std::span<const int32_t> toks = st.tokens(seq).subspan(0, size_t(length));
  Node* n = root(key);
  int64_t at = 0;
  while (at < length) {
    auto c = n->children.find(toks[size_t(at)]);
    if (c == n->children.end()) {
      // A new leaf for the rest.
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(toks.begin() + at, toks.end());
      leaf->depth = length;
      leaf->parent = n;
      Node* raw = leaf.get();
      n->children[toks[size_t(at)]] = std::move(leaf);
      // The parent may have been an entry that this one extends.
      if (n->seq >= 0) {
        (void)session_.release(n->seq);
        leaves_.erase(n->seq);
        n->seq = -1;
      }
      RSSM_ASSIGN_OR_RETURN(raw->seq, st.fork_request(seq, length, 0, retention()));
      raw->last_use = ++clock_;
      leaves_[raw->seq] = raw;
      return fit();
    }
    Node* child = c->second.get();
    int64_t j = 0;
    while (j < static_cast<int64_t>(child->edge.size()) && at + j < length &&
           child->edge[size_t(j)] == toks[size_t(at + j)])
      ++j;
    if (j < static_cast<int64_t>(child->edge.size())) {
      // Split the edge at j: a middle node, the old child below it.
      auto mid = std::make_unique<Node>();
      mid->edge.assign(child->edge.begin(), child->edge.begin() + j);
      mid->depth = n->depth + j;
      mid->parent = n;
      std::unique_ptr<Node> old = std::move(c->second);
      old->edge.erase(old->edge.begin(), old->edge.begin() + j);
      old->parent = mid.get();
      const int32_t first = old->edge[0];
      mid->children[first] = std::move(old);
      Node* m = mid.get();
      n->children[toks[size_t(at)]] = std::move(mid);
      child = m;
    }
    at += j;
    n = child;
  }
  // The whole sequence is a path already: an entry there or below holds it.
  if (n->seq >= 0) n->last_use = ++clock_;
  return {};
}

void PrefixCache::release(Node* leaf) {
  (void)session_.release(leaf->seq);
  leaves_.erase(leaf->seq);
  Node* n = leaf;
  // Remove the leaf, then ancestors left without children or entry; a
  // node left with one child and no entry merges into that child.
  while (n->parent != nullptr && n->children.empty() && (n == leaf || n->seq < 0)) {
    Node* p = n->parent;
    p->children.erase(n->edge[0]);
    n = p;
  }
  if (n->parent != nullptr && n->seq < 0 && n->children.size() == 1) {
    Node* p = n->parent;
    std::unique_ptr<Node> only = std::move(n->children.begin()->second);
    only->edge.insert(only->edge.begin(), n->edge.begin(), n->edge.end());
    only->parent = p;
    const int32_t first = only->edge[0];
    p->children[first] = std::move(only);  // destroys n
  }
}

HeldBytes PrefixCache::measure() const {
  std::vector<int64_t> seqs;
  for (const auto& [s, leaf] : leaves_) seqs.push_back(s);
  return session_.state().exclusive_bytes(seqs);
}

Result<int64_t> PrefixCache::free_bytes(int64_t bytes) {
  const StateManager& st = session_.state();
  const double flops = st.spec().prefill_flops_per_token;
  const HeldBytes before = measure();
  int64_t freed = 0;
  while (freed < bytes && !leaves_.empty()) {
    // Marconi's utility: recency + FLOPs saved per byte, each normalised.
    uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
    double best_eff = 0.0;
    std::vector<std::pair<Node*, double>> eff;
    for (const auto& [s, leaf] : leaves_) {
      lo = std::min(lo, leaf->last_use);
      hi = std::max(hi, leaf->last_use);
      const int64_t one[1] = {s};
      const HeldBytes h = st.exclusive_bytes(one);
      const int64_t own = leaf->depth - (leaf->parent != nullptr ? leaf->parent->depth : 0);
      const double e = static_cast<double>(own) * flops / static_cast<double>(std::max<int64_t>(h.state + h.kv, 1));
      eff.push_back({leaf, e});
      best_eff = std::max(best_eff, e);
    }
    Node* victim = nullptr;
    double worst = std::numeric_limits<double>::infinity();
    for (const auto& [leaf, e] : eff) {
      const double rec = hi > lo ? static_cast<double>(leaf->last_use - lo) / static_cast<double>(hi - lo) : 1.0;
      const double u = rec + (best_eff > 0 ? e / best_eff : 0.0);
      if (u < worst) worst = u, victim = leaf;
    }
    release(victim);
    const HeldBytes now = measure();
    freed = (before.state + before.kv) - (now.state + now.kv);
    bytes_ = now;
  }
  bytes_ = measure();
  return freed;
}

Status PrefixCache::fit() {
  bytes_ = measure();
  if (opt_.max_bytes > 0 && bytes_.state + bytes_.kv > opt_.max_bytes)
    RSSM_RETURN_IF_ERROR(free_bytes(bytes_.state + bytes_.kv - opt_.max_bytes).status());
  return {};
}

}  // namespace replayssm
