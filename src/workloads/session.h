// Session: a state manager and the backend that executes its plans — the
// one place where a step is taken, for every workload and every backend.
//
// Every step first makes each of its sequences steppable (resume_plan; a
// kReprefill plan is carried out by rebuild steps through the backend, in
// pieces of at most Backend::max_step_rows rows), with the batch pinned so
// rebuilding one member cannot evict another's state. The logits rows a
// step's inputs ask for stay on the backend; the reads below take them by
// index (kept row i is the i-th row asked for, in input order). Any step —
// a rebuild too — replaces the kept rows. Thread-compatible, like the
// manager and the backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "replayssm/backend.h"
#include "replayssm/state.h"

namespace replayssm {

struct StepInput {
  int64_t seq = 0;
  std::span<const int32_t> tokens;
  bool commit = true;  // committed on arrival (prompt, AR token); false: drafts
  enum Logits { kNone, kLast, kAll } logits = kLast;
};

class Session {
 public:
  // The backend must outlive the session, which claims it (Backend::claim)
  // until it is destroyed. Fails with validate()'s or the backend's
  // refusal of `opt`, or when another session holds the backend.
  static Result<std::unique_ptr<Session>> create(Backend& backend, const StateOptions& opt);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Backend& backend() { return backend_; }
  StateManager& state() { return *state_; }
  const StateManager& state() const { return *state_; }
  const ModelConfig& config() const { return backend_.config(); }

  // One batched step; token ids are checked first.
  Status step(std::span<const StepInput> inputs);
  // The same, every kept row copied to *logits (rows × vocabulary).
  Status step(std::span<const StepInput> inputs, std::vector<float>* logits);
  // Steps each prompt into its sequence, all together, in steps of at most
  // the backend's rows (a long prompt over several). Right after the step
  // that holds prompt i's last token, on_last(i, row) may read that
  // prompt's kept row `row` (its last token's logits), before the next
  // step replaces it.
  Status prefill(std::span<const int64_t> seqs, std::span<const std::span<const int32_t>> prompts,
                 const std::function<Status(size_t, int64_t)>& on_last);
  // restore(p) on the manager; a re-prefill plan is carried out now.
  Result<RestorePlan> restore(int64_t seq, int64_t pos);
  // Makes every listed sequence steppable (re-prefills where planned).
  Status ensure_ready(std::span<const int64_t> seqs);
  // release() on the manager, its storage handed back to the backend now.
  Status release(int64_t seq);
  // Storage the manager freed outside steps, handed back to the backend.
  Status flush();
  // Wall time spent in re-prefills so far (the cost of going back).
  double rebuild_seconds() const { return rebuild_s_; }
  // Rows the last step kept.
  int64_t kept_rows() const { return kept_; }

 private:
  Session(Backend& backend, std::unique_ptr<StateManager> state) : backend_(backend), state_(std::move(state)) {}
  Status rebuild(std::span<const int64_t> seqs);
  // plan → execute → finish, or abort where the backend refused.
  Status run(std::span<const SeqSlice> slices, std::span<const int32_t> tokens, std::span<const int64_t> rows);

  Backend& backend_;
  std::unique_ptr<StateManager> state_;
  double rebuild_s_ = 0.0;
  int64_t kept_ = 0;
};

}  // namespace replayssm
