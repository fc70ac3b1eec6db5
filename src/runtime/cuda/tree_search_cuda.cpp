// TreeSearchCuda (see tree_search_cuda.h).
#include "runtime/cuda/tree_search_cuda.h"

#include <algorithm>

#include "ops/cpu/sampling.h"

namespace replayssm::cuda {

Result<std::unique_ptr<TreeSearchCuda>> TreeSearchCuda::create(const DeviceModel& model,
                                                               const TreeSearchCudaOptions& opt) {
  if (opt.slots < 3 || opt.slots > 65535)
    return invalid_argument("tree (cuda): slots " + std::to_string(opt.slots) +
                            " out of range [3, 65535] (the root, a parent and its new child)");
  if (opt.max_context < 1) return invalid_argument("tree (cuda): max_context must be >= 1");
  if (opt.prefill_chunk < 1 || opt.prefill_chunk > kMaxChunk)
    return invalid_argument("tree (cuda): prefill_chunk " + std::to_string(opt.prefill_chunk) + " out of range [1, " +
                            std::to_string(kMaxChunk) + "]");
  // Every feed verifies `chunk` rows in every slot, so each slot needs that
  // much room past the longest path.
  DecoderOptions o;
  o.strategy = opt.strategy, o.batch = opt.slots, o.max_context = opt.max_context + opt.chunk, o.window = opt.window;
  o.graphs = opt.graphs, o.spec_tokens = opt.chunk, o.forks = true;
  o.draft_states = false;  // the tree only feeds: no per-draft states
  // A ragged step of prefill_chunk rows (the decoder's rows: slots × max_chunk).
  o.max_chunk = int((opt.prefill_chunk + opt.slots - 1) / opt.slots);
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> dec, Decoder::create(model, o));
  std::unique_ptr<TreeSearchCuda> t(new TreeSearchCuda(std::move(dec)));
  t->prefill_chunk_ = opt.prefill_chunk;
  t->owner_.assign(size_t(opt.slots), -1);
  return t;
}

Result<TreeSearchCuda::Node*> TreeSearchCuda::find(NodeId id) const {
  if (id < 0 || id >= NodeId(nodes_.size()) || nodes_[size_t(id)] == nullptr)
    return invalid_argument("tree: no node " + std::to_string(id));
  return nodes_[size_t(id)].get();
}

Status TreeSearchCuda::check_room(int64_t slot, int64_t n) const {
  const DecoderOptions& o = dec_->options();
  const int64_t longest = o.max_context - o.spec_tokens;
  if (dec_->length(slot) + n > longest)
    return out_of_budget("tree (cuda): a path of " + std::to_string(dec_->length(slot) + n) +
                         " tokens does not fit max_context " + std::to_string(longest));
  return {};
}

Status TreeSearchCuda::prefill(int64_t slot, std::span<const int32_t> tokens, std::vector<float>* last) {
  RSSM_RETURN_IF_ERROR(check_room(slot, int64_t(tokens.size())));
  const int64_t B = dec_->options().batch;
  std::vector<int32_t> count(static_cast<size_t>(B), 0), next(static_cast<size_t>(B));
  for (size_t t = 0; t < tokens.size();) {
    const size_t n = std::min(tokens.size() - t, size_t(prefill_chunk_));
    count[size_t(slot)] = int32_t(n);
    RSSM_RETURN_IF_ERROR(dec_->step_ragged(tokens.subspan(t, n), count, next));
    t += n;
  }
  if (last != nullptr) {  // without all_logits a ragged step leaves a row per slot
    last->resize(size_t(dec_->model().config().vocab_size));
    RSSM_RETURN_IF_ERROR(dec_->logits_row(slot, *last));
  }
  return {};
}

Status TreeSearchCuda::feed(int64_t slot, std::span<const int32_t> tokens, std::vector<float>* rows) {
  const DecoderOptions& o = dec_->options();
  const int64_t B = o.batch, V = dec_->model().config().vocab_size;
  RSSM_RETURN_IF_ERROR(check_room(slot, int64_t(tokens.size())));
  if (rows != nullptr) rows->clear();
  std::vector<int32_t> tok, argmax, count(static_cast<size_t>(B));
  std::vector<float> row(static_cast<size_t>(V));
  for (size_t t = 0; t < tokens.size();) {
    // A feed of at least 2 rows in which only this slot takes its first c.
    const int c = int(std::min<size_t>(size_t(o.spec_tokens), tokens.size() - t)), T = std::max(c, 2);
    tok.assign(size_t(B * T), 0);
    for (int i = 0; i < T; ++i) tok[size_t(slot * T + i)] = tokens[t + size_t(std::min(i, c - 1))];
    argmax.resize(size_t(B * T));
    std::fill(count.begin(), count.end(), 0);
    count[size_t(slot)] = c;
    RSSM_RETURN_IF_ERROR(dec_->feed(tok, T, count, argmax));
    if (rows != nullptr)
      for (int i = 0; i < c; ++i) {
        RSSM_RETURN_IF_ERROR(dec_->logits_row(slot * T + i, row));
        rows->insert(rows->end(), row.begin(), row.end());
      }
    t += size_t(c);
  }
  return {};
}

Result<int64_t> TreeSearchCuda::take_slot(NodeId keep) {
  for (size_t s = 0; s < owner_.size(); ++s)
    if (owner_[s] < 0) return int64_t(s);
  int64_t best = -1;
  for (size_t s = 0; s < owner_.size(); ++s) {
    const NodeId n = owner_[s];
    if (n == 0 || n == keep) continue;  // the root stays; so does the node being expanded
    if (best < 0 || nodes_[size_t(n)]->used < nodes_[size_t(owner_[size_t(best)])]->used) best = int64_t(s);
  }
  if (best < 0) return invalid_argument("tree (cuda): no slot to evict");
  nodes_[size_t(owner_[size_t(best)])]->slot = -1;
  owner_[size_t(best)] = -1;
  ++stats_.evictions;
  return best;
}

Result<RestorePlan> TreeSearchCuda::make_resident(NodeId id) {
  Node* n = nodes_[size_t(id)].get();
  n->used = ++clock_;
  const int64_t len = int64_t(n->path.size());
  if (n->slot >= 0) return RestorePlan{RestorePath::kCheckpoint, len, len};
  NodeId a = n->parent;  // the nearest resident ancestor (the root is always resident)
  while (nodes_[size_t(a)]->slot < 0) a = nodes_[size_t(a)]->parent;
  const Node* anc = nodes_[size_t(a)].get();
  nodes_[size_t(a)]->used = clock_;
  RSSM_ASSIGN_OR_RETURN(const int64_t slot, take_slot(a));
  std::vector<int32_t> parent(owner_.size());
  for (size_t s = 0; s < parent.size(); ++s) parent[s] = int32_t(s);
  parent[size_t(slot)] = int32_t(anc->slot);
  RSSM_RETURN_IF_ERROR(dec_->reorder(parent));
  const int64_t from = int64_t(anc->path.size());
  RSSM_RETURN_IF_ERROR(prefill(slot, std::span<const int32_t>(n->path).subspan(size_t(from)), nullptr));
  n->slot = slot, owner_[size_t(slot)] = id;
  ++stats_.reprefills, stats_.reprefilled_tokens += len - from;
  return RestorePlan{RestorePath::kReprefill, from, len};
}

Result<TreeSearchCuda::NodeId> TreeSearchCuda::root(std::span<const int32_t> prompt) {
  if (!nodes_.empty()) return invalid_argument("tree: the root exists already");
  if (prompt.empty()) return invalid_argument("tree: the prompt is empty");
  const int64_t V = dec_->model().config().vocab_size;
  for (int32_t t : prompt)
    if (t < 0 || t >= V) return invalid_argument("tree: token id " + std::to_string(t) + " out of range");
  std::vector<float> last;
  RSSM_RETURN_IF_ERROR(prefill(0, prompt, &last));
  auto n = std::make_unique<Node>();
  n->path.assign(prompt.begin(), prompt.end());
  n->logits = std::move(last);
  n->slot = 0, n->used = ++clock_;
  owner_[0] = 0;
  nodes_.push_back(std::move(n));
  return NodeId{0};
}

Result<TreeSearchCuda::NodeId> TreeSearchCuda::expand(NodeId id, std::span<const int32_t> tokens) {
  RSSM_ASSIGN_OR_RETURN(Node* parent, find(id));
  if (tokens.empty()) return invalid_argument("tree: expand needs at least one token");
  const int64_t V = dec_->model().config().vocab_size;
  for (int32_t t : tokens)
    if (t < 0 || t >= V) return invalid_argument("tree: token id " + std::to_string(t) + " out of range");
  RSSM_RETURN_IF_ERROR(make_resident(id).status());
  RSSM_ASSIGN_OR_RETURN(const int64_t slot, take_slot(id));
  std::vector<int32_t> from(owner_.size());
  for (size_t s = 0; s < from.size(); ++s) from[s] = int32_t(s);
  from[size_t(slot)] = int32_t(parent->slot);
  RSSM_RETURN_IF_ERROR(dec_->reorder(from));
  std::vector<float> rows;
  RSSM_RETURN_IF_ERROR(feed(slot, tokens, &rows));
  auto n = std::make_unique<Node>();
  n->path = parent->path;
  n->path.insert(n->path.end(), tokens.begin(), tokens.end());
  n->parent = id;
  n->score = parent->score + ops::cpu::log_prob(parent->logits, tokens[0]);
  for (size_t j = 1; j < tokens.size(); ++j)
    n->score += ops::cpu::log_prob(std::span<const float>(rows).subspan((j - 1) * size_t(V), size_t(V)), tokens[j]);
  n->logits.assign(rows.end() - V, rows.end());
  n->slot = slot, n->used = ++clock_;
  const NodeId child = NodeId(nodes_.size());
  owner_[size_t(slot)] = child;
  parent->children.push_back(child);
  nodes_.push_back(std::move(n));
  ++stats_.expansions;
  return child;
}

Result<std::span<const float>> TreeSearchCuda::logits(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return std::span<const float>(n->logits);
}

Result<double> TreeSearchCuda::score(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return n->score;
}

Result<RestorePlan> TreeSearchCuda::restore(NodeId id) {
  RSSM_RETURN_IF_ERROR(find(id).status());
  return make_resident(id);
}

Result<std::span<const int32_t>> TreeSearchCuda::tokens(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return std::span<const int32_t>(n->path);
}

Result<TreeSearchCuda::NodeId> TreeSearchCuda::parent(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return n->parent;
}

Result<std::vector<TreeSearchCuda::NodeId>> TreeSearchCuda::children(NodeId id) const {
  RSSM_ASSIGN_OR_RETURN(const Node* n, find(id));
  return n->children;
}

Status TreeSearchCuda::release(NodeId id) {
  RSSM_ASSIGN_OR_RETURN(Node* n, find(id));
  for (NodeId c : std::vector<NodeId>(n->children)) RSSM_RETURN_IF_ERROR(release(c));
  if (n->parent >= 0 && nodes_[size_t(n->parent)] != nullptr) {
    auto& sib = nodes_[size_t(n->parent)]->children;
    sib.erase(std::remove(sib.begin(), sib.end(), id), sib.end());
  }
  if (n->slot >= 0) owner_[size_t(n->slot)] = -1;
  nodes_[size_t(id)].reset();
  return {};
}

}  // namespace replayssm::cuda
