// TreeSearch (see include/replayssm/tree_search.h).
#include "replayssm/tree_search.h"

#include <algorithm>

#include "ops/cpu/sampling.h"
#include "workloads/session.h"

namespace replayssm {

TreeSearch::TreeSearch(std::unique_ptr<Session> s) : session_(std::move(s)) {}
TreeSearch::~TreeSearch() = default;

Result<std::unique_ptr<TreeSearch>> TreeSearch::create(Backend& backend, const StateOptions& state) {
  RSSM_ASSIGN_OR_RETURN(auto session, Session::create(backend, state));
  return std::unique_ptr<TreeSearch>(new TreeSearch(std::move(session)));
}

const StateManager& TreeSearch::state() const { return session_->state(); }

Result<const TreeSearch::Node*> TreeSearch::find(NodeId id) const {
  if (id < 0 || id >= static_cast<NodeId>(nodes_.size()) || nodes_[id] == nullptr)
    return invalid_argument("tree: no node " + std::to_string(id));
  return nodes_[id].get();
}

Result<TreeSearch::NodeId> TreeSearch::root(std::span<const int32_t> prompt) {
  if (!nodes_.empty()) return invalid_argument("tree: the root exists already");
  if (prompt.empty()) return invalid_argument("tree: the prompt is empty");
  auto n = std::make_unique<Node>();
  n->seq = session_->state().add_sequence();
  const std::span<const int32_t> prompts[1] = {prompt};
  const int64_t seqs[1] = {n->seq};
  const int64_t V = session_->config().vocab_size;
  const Status st = session_->prefill(seqs, prompts, [&](size_t, int64_t row) {
    n->logits.resize(static_cast<size_t>(V));
    return session_->backend().logits({&row, 1}, n->logits.data());
  });
  if (!st.ok()) {
    (void)session_->release(n->seq);
    return st;
  }
  nodes_.push_back(std::move(n));
  return NodeId{0};
}

Result<TreeSearch::NodeId> TreeSearch::expand(NodeId id, std::span<const int32_t> tokens) {
  RSSM_ASSIGN_OR_RETURN(const Node* parent, find(id));
  if (tokens.empty()) return invalid_argument("tree: expand needs at least one token");
  const int64_t V = session_->config().vocab_size;
  for (int32_t t : tokens)
    if (t < 0 || t >= V) return invalid_argument("tree: token id " + std::to_string(t) + " out of range");
  if (static_cast<int64_t>(tokens.size()) > session_->backend().max_step_rows())
    return invalid_argument("tree: an expansion of " + std::to_string(tokens.size()) + " tokens; the " +
                            session_->backend().name() + " backend takes at most " +
                            std::to_string(session_->backend().max_step_rows()) + " a step");
  StateManager& st = session_->state();
  RSSM_ASSIGN_OR_RETURN(const int64_t seq, st.fork(parent->seq));
  std::vector<float> rows;
  const StepInput in{seq, tokens, true, StepInput::kAll};
  const Status s = session_->step({&in, 1}, &rows);
  if (!s.ok()) {
    (void)session_->release(seq);
    return s;
  }
  auto n = std::make_unique<Node>();
  n->seq = seq;
  n->parent = id;
  n->score = parent->score + ops::cpu::log_prob(parent->logits, tokens[0]);
  for (size_t j = 1; j < tokens.size(); ++j)
    n->score += ops::cpu::log_prob(std::span<const float>(rows).subspan((j - 1) * V, V), tokens[j]);
  n->logits.assign(rows.end() - V, rows.end());
  const NodeId child = static_cast<NodeId>(nodes_.size());
  nodes_[id]->children.push_back(child);
  nodes_.push_back(std::move(n));
  return child;
}

Result<std::span<const float>> TreeSearch::logits(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return std::span<const float>(n->logits);
}

Result<double> TreeSearch::score(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return n->score;
}

Result<RestorePlan> TreeSearch::restore(NodeId id) {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return session_->restore(n->seq, session_->state().length(n->seq));
}

Result<std::span<const int32_t>> TreeSearch::tokens(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return session_->state().tokens(n->seq);
}

Result<TreeSearch::NodeId> TreeSearch::parent(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return n->parent;
}

Result<std::vector<TreeSearch::NodeId>> TreeSearch::children(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return n->children;
}

Status TreeSearch::release(NodeId id) {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  for (NodeId c : std::vector<NodeId>(n->children)) RSSM_RETURN_IF_ERROR(release(c));
  if (n->parent >= 0 && nodes_[n->parent] != nullptr) {
    auto& sib = nodes_[n->parent]->children;
    sib.erase(std::remove(sib.begin(), sib.end(), id), sib.end());
  }
  RSSM_RETURN_IF_ERROR(session_->release(n->seq));
  nodes_[id].reset();
  return {};
}

}  // namespace replayssm
