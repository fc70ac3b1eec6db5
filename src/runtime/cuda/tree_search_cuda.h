// TreeSearchCuda: TreeSearch's API (include/replayssm/tree_search.h) on the
// GPU — a tree of continuations of one prompt whose nodes are expanded,
// scored and come back to, over a cuda::Decoder with forks and
// speculation.
//
// The decoder's batch is a set of `slots`, each holding one node's state.
// A node occupies a slot while resident; the root is always resident.
// expand(node) forks the node's slot into a free (or least recently used)
// one with reorder() — under replay the child shares the parent's
// checkpoint and copies its log entries, under the standard layout it
// copies the state — then feeds the new tokens to that slot alone
// (Decoder::feed: every other slot takes none of its rows), so no other
// node's state moves. The root's prompt goes in ragged steps
// (Decoder::step_ragged, only the root's slot taking tokens) of up to
// prefill_chunk tokens, its last row's logits kept. A node evicted from
// its slot is made resident again from its nearest resident ancestor (the
// root at worst) by feeding the tokens in between the same way — restore()
// reports that as a re-prefill of those tokens.
// Logits and scores are kept per node on the host, as on the CPU.
//
// The decoder keeps each slot's latest state only: a node is never
// restored from an older position of another slot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "replayssm/state.h"
#include "runtime/cuda/decoder.h"

namespace replayssm::cuda {

struct TreeSearchCudaOptions {
  DecodeStrategy strategy = DecodeStrategy::kReplay;
  int window = 16;
  int64_t slots = 16;           // resident nodes, ≥ 3 (the root, a parent, its new child)
  int64_t max_context = 2048;   // the longest path, prompt included
  int chunk = 8;                // tokens an expansion feeds per pass, 2..8 (replay: ≤ window / 2)
  int prefill_chunk = 512;      // tokens of the prompt or a re-prefill per pass, 1..4096
  bool graphs = true;
};

struct TreeSearchCudaStats {
  int64_t expansions = 0, evictions = 0;
  int64_t reprefills = 0, reprefilled_tokens = 0;  // restores that fed tokens again
};

class TreeSearchCuda {
 public:
  using NodeId = int64_t;

  static Result<std::unique_ptr<TreeSearchCuda>> create(const DeviceModel& model, const TreeSearchCudaOptions& opt);

  Result<NodeId> root(std::span<const int32_t> prompt);
  Result<NodeId> expand(NodeId node, std::span<const int32_t> tokens);
  Result<std::span<const float>> logits(NodeId node) const;
  Result<double> score(NodeId node) const;
  Result<RestorePlan> restore(NodeId node);
  Result<std::span<const int32_t>> tokens(NodeId node) const;
  Result<NodeId> parent(NodeId node) const;
  Result<std::vector<NodeId>> children(NodeId node) const;
  Status release(NodeId node);  // the node and its whole subtree

  const Decoder& decoder() const { return *dec_; }
  const TreeSearchCudaStats& stats() const { return stats_; }

 private:
  struct Node {
    std::vector<int32_t> path;  // prompt included
    NodeId parent = -1;
    std::vector<NodeId> children;
    std::vector<float> logits;
    double score = 0.0;
    int64_t slot = -1;          // -1: not resident
    uint64_t used = 0;          // for least-recently-used eviction
  };
  explicit TreeSearchCuda(std::unique_ptr<Decoder> d) : dec_(std::move(d)) {}
  Result<Node*> find(NodeId id) const;
  // A free slot, or the least recently used node's other than keep's.
  Result<int64_t> take_slot(NodeId keep);
  // Feeds tokens to `slot` alone; rows (optional) gets the logits after
  // each token, row-major.
  Status feed(int64_t slot, std::span<const int32_t> tokens, std::vector<float>* rows);
  // The same in ragged steps of up to prefill_chunk tokens; last (optional)
  // gets the logits after the last token only.
  Status prefill(int64_t slot, std::span<const int32_t> tokens, std::vector<float>* last);
  // Whether `slot` has room for n more tokens on its path.
  Status check_room(int64_t slot, int64_t n) const;
  // Makes the node resident; returns the tokens it had to feed again.
  Result<RestorePlan> make_resident(NodeId id);

  std::unique_ptr<Decoder> dec_;
  int prefill_chunk_ = 0;
  std::vector<std::unique_ptr<Node>> nodes_;  // index = id; null once released
  std::vector<NodeId> owner_;                 // per slot: the resident node, or -1
  uint64_t clock_ = 0;
  TreeSearchCudaStats stats_;
};

}  // namespace replayssm::cuda
