// TreeSearch: a tree of continuations of one prompt, for MCTS,
// tree-of-thought or any search that expands nodes and comes back to them.
//
// Each node is a sequence of the state manager: expanding forks the parent
// (under the replay strategy the child shares the parent's pages and
// checkpoints, so a node costs its own log and, after W tokens, a
// checkpoint); a node's state is rebuilt on demand if the manager evicted
// it (restore: checkpoint + log replay, or a re-prefill where the cost
// model says so). Every node keeps its next-token logits (on the host) and
// its score, the sum of log-probabilities of its tokens after the prompt.
// Runs on any backend. Not thread-safe; node ids stay valid until released.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "replayssm/backend.h"
#include "replayssm/state.h"

namespace replayssm {

class Session;

class TreeSearch {
 public:
  using NodeId = int64_t;

  // The backend must outlive the tree.
  static Result<std::unique_ptr<TreeSearch>> create(Backend& backend, const StateOptions& state);
  ~TreeSearch();

  // The root node: the prompt, prefilled. Only one root per tree.
  Result<NodeId> root(std::span<const int32_t> prompt);
  // A new child of `node` whose path continues with `tokens` (at least one).
  Result<NodeId> expand(NodeId node, std::span<const int32_t> tokens);
  // Next-token logits after the node's path (vocabulary floats).
  Result<std::span<const float>> logits(NodeId node) const;
  // Σ log p(token) over the node's tokens after the prompt (0 for the root).
  Result<double> score(NodeId node) const;
  // Makes the node's state steppable again and says how (checkpoint, log
  // replay or re-prefill); expand() does this by itself.
  Result<RestorePlan> restore(NodeId node);
  // The node's full path, prompt included.
  Result<std::span<const int32_t>> tokens(NodeId node) const;
  Result<NodeId> parent(NodeId node) const;        // -1 for the root
  Result<std::vector<NodeId>> children(NodeId node) const;
  // Frees the node and its whole subtree.
  Status release(NodeId node);

  const StateManager& state() const;

 private:
  struct Node {
    int64_t seq = -1;
    NodeId parent = -1;
    std::vector<NodeId> children;
    std::vector<float> logits;
    double score = 0.0;
  };
  explicit TreeSearch(std::unique_ptr<Session> s);
  Result<const Node*> find(NodeId id) const;

  std::unique_ptr<Session> session_;
  std::vector<std::unique_ptr<Node>> nodes_;  // index = id; null once released
};

}  // namespace replayssm
