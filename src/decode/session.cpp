// Session (see session.h).
#include "decode/session.h"

#include <chrono>

namespace replayssm {

Result<std::unique_ptr<Session>> Session::create(const Model& model, const StoreOptions& opt) {
  RSSM_RETURN_IF_ERROR(opt.validate());
  auto store = std::make_unique<ReplayStore>(cache_spec(model.config()), opt);
  return std::unique_ptr<Session>(new Session(model, std::move(store)));
}

Status Session::rebuild(std::span<const int64_t> seqs) {
  std::vector<SeqSlice> slices;
  std::vector<int32_t> tokens;
  for (int64_t s : seqs) {
    RSSM_ASSIGN_OR_RETURN(RestorePlan plan, store_->resume_plan(s));
    if (plan.path != RestorePath::kReprefill) continue;
    const auto toks = store_->tokens(s);
    slices.push_back({s, plan.from, plan.to - plan.from, static_cast<int64_t>(tokens.size()), false});
    tokens.insert(tokens.end(), toks.begin() + plan.from, toks.end());
  }
  if (slices.empty()) return {};
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = model_.forward(slices, tokens, *store_, {}, nullptr);
  rebuild_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

Status Session::ensure_ready(std::span<const int64_t> seqs) {
  store_->pin(seqs);
  const Status st = rebuild(seqs);
  store_->unpin_all();
  return st;
}

Result<RestorePlan> Session::restore(int64_t seq, int64_t pos) {
  RSSM_ASSIGN_OR_RETURN(RestorePlan plan, store_->restore(seq, pos));
  if (plan.path == RestorePath::kReprefill) {
    const int64_t one[1] = {seq};
    RSSM_RETURN_IF_ERROR(ensure_ready(one));
  }
  return plan;
}

Status Session::step(std::span<const StepInput> inputs, std::vector<float>* logits) {
  std::vector<int64_t> ids;
  std::vector<SeqSlice> slices;
  std::vector<int32_t> tokens;
  std::vector<int64_t> rows;
  for (const StepInput& in : inputs) {
    if (in.tokens.empty()) return invalid_argument("step: no tokens for sequence " + std::to_string(in.seq));
    const int64_t len = store_->length(in.seq);
    if (len < 0) return invalid_argument("step: no sequence " + std::to_string(in.seq));
    const int64_t row = static_cast<int64_t>(tokens.size()), n = static_cast<int64_t>(in.tokens.size());
    ids.push_back(in.seq);
    slices.push_back({in.seq, len, n, row, in.commit});
    tokens.insert(tokens.end(), in.tokens.begin(), in.tokens.end());
    if (in.logits == StepInput::kLast) rows.push_back(row + n - 1);
    if (in.logits == StepInput::kAll)
      for (int64_t i = 0; i < n; ++i) rows.push_back(row + i);
  }
  if (!rows.empty() && logits == nullptr)
    return invalid_argument("step: logits rows asked for (StepInput::logits) but no vector to write them to");
  std::vector<float> none;
  if (logits == nullptr) logits = &none;
  store_->pin(ids);
  Status st = rebuild(ids);
  if (st.ok()) {
    logits->resize(rows.size() * static_cast<size_t>(model_.config().vocab_size));
    st = model_.forward(slices, tokens, *store_, rows, logits->data());
  }
  store_->unpin_all();
  return st;
}

}  // namespace replayssm
