// Session: a Model driving a ReplayStore — the layer that owns both, so it
// can perform what the store only plans: re-prefills.
//
// Every step first makes each sequence steppable (resume_plan; a
// kReprefill plan is carried out by a rebuild step through the model),
// with the batch pinned so rebuilding one member cannot evict another's
// state. Thread-compatible, like the store.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "replayssm/model.h"
#include "replayssm/replay_store.h"

namespace replayssm {

struct StepInput {
  int64_t seq = 0;
  std::span<const int32_t> tokens;
  bool commit = true;  // committed on arrival (prompt, AR token); false: drafts
  enum Logits { kNone, kLast, kAll } logits = kLast;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(const Model& model, const StoreOptions& opt);

  const Model& model() const { return model_; }
  ReplayStore& store() { return *store_; }
  const ReplayStore& store() const { return *store_; }

  // One batched step. Logits rows (vocab floats each) for the inputs that
  // ask for them, in input order, are written to *logits (resized);
  // `logits` may be null only where no input asks for a row.
  Status step(std::span<const StepInput> inputs, std::vector<float>* logits);
  // restore(p) on the store; a re-prefill plan is carried out now.
  Result<RestorePlan> restore(int64_t seq, int64_t pos);
  // Makes every listed sequence steppable (re-prefills where planned).
  Status ensure_ready(std::span<const int64_t> seqs);
  // Wall time spent in re-prefills so far (the cost of going back).
  double rebuild_seconds() const { return rebuild_s_; }

 private:
  Session(const Model& model, std::unique_ptr<ReplayStore> store)
      : model_(model), store_(std::move(store)) {}
  Status rebuild(std::span<const int64_t> seqs);

  const Model& model_;
  std::unique_ptr<ReplayStore> store_;
  double rebuild_s_ = 0.0;
};

}  // namespace replayssm
