// Session (see session.h).
#include "workloads/session.h"

#include <algorithm>
#include <map>

#include "core/clock.h"

namespace replayssm {

Result<std::unique_ptr<Session>> Session::create(Backend& backend, const StateOptions& opt) {
  RSSM_RETURN_IF_ERROR(opt.validate());
  RSSM_RETURN_IF_ERROR(backend.check_options(opt));
  RSSM_RETURN_IF_ERROR(backend.claim(opt));
  auto state = std::make_unique<StateManager>(backend.cache_spec(), opt, backend.units(opt));
  return std::unique_ptr<Session>(new Session(backend, std::move(state)));
}

Session::~Session() { backend_.unclaim(); }

Status Session::run(std::span<const SeqSlice> slices, std::span<const int32_t> tokens,
                    std::span<const int64_t> rows) {
  RSSM_ASSIGN_OR_RETURN(StepPlan plan, state_->plan_step(slices, tokens));
  const Status st = backend_.execute(plan, rows);
  if (!st.ok()) {
    state_->abort_step(plan);
    kept_ = 0;
    return st;
  }
  state_->finish_step(plan);
  kept_ = static_cast<int64_t>(rows.size());
  return {};
}

Status Session::rebuild(std::span<const int64_t> seqs) {
  const int64_t budget = std::max<int64_t>(backend_.max_step_rows(), 1);
  const double t0 = now_seconds();
  Status st;
  std::map<int64_t, int64_t> from;  // each sequence's last re-prefill start: each step must move it
  for (;;) {
    std::vector<SeqSlice> slices;
    std::vector<int32_t> tokens;
    for (int64_t s : seqs) {
      const int64_t left = budget - static_cast<int64_t>(tokens.size());
      if (left <= 0) break;
      RSSM_ASSIGN_OR_RETURN(RestorePlan plan, state_->resume_plan(s));
      if (plan.path != RestorePath::kReprefill) continue;
      auto [it, fresh] = from.emplace(s, plan.from);
      if (!fresh && it->second >= plan.from)
        return out_of_budget("re-prefill of sequence " + std::to_string(s) + " makes no progress at position " +
                             std::to_string(plan.from) + " (its checkpoints are evicted as they are written)");
      it->second = plan.from;
      const auto toks = state_->tokens(s);
      const int64_t n = std::min(plan.to - plan.from, left);
      slices.push_back({s, plan.from, n, static_cast<int64_t>(tokens.size()), false});
      tokens.insert(tokens.end(), toks.begin() + plan.from, toks.begin() + plan.from + n);
    }
    if (slices.empty()) break;
    st = run(slices, tokens, {});
    if (!st.ok()) break;
  }
  rebuild_s_ += now_seconds() - t0;
  return st;
}

Status Session::ensure_ready(std::span<const int64_t> seqs) {
  state_->pin(seqs);
  const Status st = rebuild(seqs);
  state_->unpin_all();
  return st;
}

Result<RestorePlan> Session::restore(int64_t seq, int64_t pos) {
  RSSM_ASSIGN_OR_RETURN(RestorePlan plan, state_->restore(seq, pos));
  if (plan.path == RestorePath::kReprefill) {
    const int64_t one[1] = {seq};
    RSSM_RETURN_IF_ERROR(ensure_ready(one));
  }
  return plan;
}

Status Session::release(int64_t seq) {
  RSSM_RETURN_IF_ERROR(state_->release(seq));
  return flush();
}

Status Session::flush() {
  const std::vector<StorageOp> ops = state_->take_ops();
  if (ops.empty()) return {};
  return backend_.apply(ops);
}

Status Session::step(std::span<const StepInput> inputs) {
  const int64_t V = backend_.config().vocab_size;
  std::vector<int64_t> ids;
  std::vector<SeqSlice> slices;
  std::vector<int32_t> tokens;
  std::vector<int64_t> rows;
  for (const StepInput& in : inputs) {
    if (in.tokens.empty()) return invalid_argument("step: no tokens for sequence " + std::to_string(in.seq));
    const int64_t len = state_->length(in.seq);
    if (len < 0) return invalid_argument("step: no sequence " + std::to_string(in.seq));
    for (int32_t t : in.tokens)
      if (t < 0 || t >= V)
        return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(V) + ")");
    const int64_t row = static_cast<int64_t>(tokens.size()), n = static_cast<int64_t>(in.tokens.size());
    ids.push_back(in.seq);
    slices.push_back({in.seq, len, n, row, in.commit});
    tokens.insert(tokens.end(), in.tokens.begin(), in.tokens.end());
    if (in.logits == StepInput::kLast) rows.push_back(row + n - 1);
    if (in.logits == StepInput::kAll)
      for (int64_t i = 0; i < n; ++i) rows.push_back(row + i);
  }
  if (static_cast<int64_t>(tokens.size()) > backend_.max_step_rows())
    return invalid_argument("step: " + std::to_string(tokens.size()) + " rows; the " + backend_.name() +
                            " backend takes at most " + std::to_string(backend_.max_step_rows()) + " a step");
  state_->pin(ids);
  Status st = rebuild(ids);
  if (st.ok()) st = run(slices, tokens, rows);
  state_->unpin_all();
  return st;
}

Status Session::prefill(std::span<const int64_t> seqs, std::span<const std::span<const int32_t>> prompts,
                       const std::function<Status(size_t, int64_t)>& on_last) {
  const int64_t budget = std::max<int64_t>(backend_.max_step_rows(), 1);
  std::vector<int64_t> fed(prompts.size(), 0);
  for (;;) {
    std::vector<StepInput> in;
    std::vector<size_t> last;  // prompts whose last token this step takes, in kept-row order
    int64_t rows = 0;
    for (size_t i = 0; i < prompts.size() && rows < budget; ++i) {
      const int64_t left = static_cast<int64_t>(prompts[i].size()) - fed[i];
      if (left <= 0) continue;
      const int64_t n = std::min(left, budget - rows);
      const bool ends = n == left;
      in.push_back({seqs[i], prompts[i].subspan(static_cast<size_t>(fed[i]), static_cast<size_t>(n)), true,
                    ends ? StepInput::kLast : StepInput::kNone});
      if (ends) last.push_back(i);
      fed[i] += n;
      rows += n;
    }
    if (in.empty()) return {};
    RSSM_RETURN_IF_ERROR(step(in));
    for (size_t j = 0; j < last.size(); ++j) RSSM_RETURN_IF_ERROR(on_last(last[j], static_cast<int64_t>(j)));
  }
}

Status Session::step(std::span<const StepInput> inputs, std::vector<float>* logits) {
  RSSM_RETURN_IF_ERROR(step(inputs));
  std::vector<int64_t> rows(static_cast<size_t>(kept_));
  for (int64_t i = 0; i < kept_; ++i) rows[size_t(i)] = i;
  logits->resize(rows.size() * static_cast<size_t>(backend_.config().vocab_size));
  return backend_.logits(rows, logits->data());
}

}  // namespace replayssm
