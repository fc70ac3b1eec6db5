// PrefixCache: what finished prompts and requests computed, kept for later
// requests that start the same way — a radix tree over token ids whose
// entries are sequences the cache holds in the state manager (forks of the
// requests, StateManager::fork_request), so their K/V pages, checkpoints
// and logs outlive the requests that made them.
//
// A new request takes the longest cached prefix of its prompt, at any
// token (at most all but the prompt's last token, which must be computed
// for its logits): its root is a fork of the entry at that length, sharing
// the entry's pages read-only (a partial page is copied on the first
// write) and its checkpoints; its first step replays the log from the
// nearest checkpoint at or below the divergence, or re-runs the tokens
// since one where the log is gone (the manager's restore, by its cost
// model). Requests that may be cached keep a checkpoint per replay_limit
// tokens and their whole log (StateManager Retention), so a hit replays at
// most replay_limit entries.
//
// Entries are the tree's leaves: an entry that another one extends is
// released (the longer one holds its tokens), and inserting a prefix of an
// entry only refreshes it. Entries are partitioned by a key (a server's
// tenant: API key and cache salt): no request reads or learns of another
// key's entries, hits or timing.
//
// Memory: the cache's bytes are those only its entries hold (what
// releasing them would free: StateManager::exclusive_bytes), state and
// K/V. Over max_bytes, or when the engine needs room under the state
// budget, entries are released by Marconi's rule: the lowest sum of
// recency (normalised over the entries) and FLOPs saved per byte held
// (the tokens only that entry holds × prefill FLOPs per token, over its
// exclusive bytes, normalised).
//
// Not thread-safe: the engine's thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "replayssm/engine.h"
#include "workloads/session.h"

namespace replayssm {

class PrefixCache {
 public:
  PrefixCache(Session& session, const PrefixCacheOptions& opt);
  ~PrefixCache();  // releases every entry
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // What the requests whose state may be cached keep.
  Retention retention() const;

  struct Hit {
    int64_t seq = -1;    // the entry to fork (−1: no hit)
    int64_t length = 0;  // prompt tokens it holds
  };
  // The longest prefix of prompt[0, P − 1) that an entry of `key` holds;
  // refreshes that entry. Counted in stats().
  Hit lookup(const std::string& key, std::span<const int32_t> prompt);
  // Keeps the first `length` tokens of sequence `seq` under `key`, then
  // keeps the cache within max_bytes.
  Status insert(const std::string& key, int64_t seq, int64_t length);
  // Releases entries, lowest value first, until `bytes` (state + K/V) are
  // freed or none is left; returns the bytes freed.
  Result<int64_t> free_bytes(int64_t bytes);

  int64_t entries() const { return static_cast<int64_t>(leaves_.size()); }
  // What the entries hold alone, as of the last insert or release.
  const HeldBytes& bytes() const { return bytes_; }

 private:
  struct Node;
  struct Leaf;
  Node* root(const std::string& key);
  void release(Node* leaf);
  HeldBytes measure() const;
  Status fit();

  Session& session_;
  PrefixCacheOptions opt_;
  std::map<std::string, std::unique_ptr<Node>> roots_;
  std::map<int64_t, Node*> leaves_;  // entry sequence → its leaf
  HeldBytes bytes_;
  uint64_t clock_ = 0;
};

}  // namespace replayssm
