// CpuBackend (see cpu_backend.h).
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>

#include "model/program.h"
#include "ops/cpu/sampling.h"

namespace replayssm::cpu {

CpuBackend::CpuBackend(const Model& model) : model_(model), spec_(replayssm::cache_spec(model.config())) {}

Result<std::unique_ptr<CpuBackend>> CpuBackend::create(const Model& model) {
  if (!model.has_matrices())
    return unsupported("cpu backend: this model's matrices live on a device only (a preset without host weights)");
  return std::unique_ptr<CpuBackend>(new CpuBackend(model));
}

StateUnits CpuBackend::units(const StateOptions&) const { return PlanCache::units(spec_); }

Status CpuBackend::check_options(const StateOptions& opt) const { return opt.validate(); }

Status CpuBackend::execute(const StepPlan& plan, std::span<const int64_t> logit_rows) {
  if (cache_ == nullptr || plan.page_size != cache_->page_size())
    return invalid_argument("cpu backend: a plan of pages of " + std::to_string(plan.page_size) +
                            " tokens, but no session with that page size holds the backend");
  // The forward pass takes the slices in row order; the plan's order (a
  // slice reusing its base's slot last) is the cache's.
  std::vector<SeqSlice> slices;
  slices.reserve(plan.slices.size());
  for (const PlanSlice& ps : plan.slices) slices.push_back({ps.seq, ps.pos, ps.n, ps.row, ps.commit});
  std::sort(slices.begin(), slices.end(), [](const SeqSlice& a, const SeqSlice& b) { return a.row < b.row; });
  const int64_t V = model_.config().vocab_size;
  logits_.resize(logit_rows.size() * static_cast<size_t>(V));
  cache_->set_plan(&plan);
  const Status st = model_.forward(slices, plan.tokens, *cache_, logit_rows, logits_.data());
  cache_->set_plan(nullptr);
  kept_ = st.ok() ? static_cast<int64_t>(logit_rows.size()) : 0;
  return st;
}

Status CpuBackend::apply(std::span<const StorageOp> ops) {
  if (cache_ == nullptr) return invalid_argument("cpu backend: storage ops, but no session holds the backend");
  cache_->apply(ops);
  return {};
}

Status CpuBackend::check_rows(std::span<const int64_t> rows) const {
  for (int64_t r : rows)
    if (r < 0 || r >= kept_)
      return invalid_argument("cpu backend: logits row " + std::to_string(r) + " was not kept (the last step kept " +
                              std::to_string(kept_) + ")");
  return {};
}

std::span<const float> CpuBackend::row(int64_t i) const {
  const size_t V = static_cast<size_t>(model_.config().vocab_size);
  return std::span<const float>(logits_).subspan(static_cast<size_t>(i) * V, V);
}

Status CpuBackend::logits(std::span<const int64_t> rows, float* out) {
  RSSM_RETURN_IF_ERROR(check_rows(rows));
  const size_t V = static_cast<size_t>(model_.config().vocab_size);
  for (size_t i = 0; i < rows.size(); ++i) std::memcpy(out + i * V, row(rows[i]).data(), sizeof(float) * V);
  return {};
}

Status CpuBackend::argmax(std::span<const int64_t> rows, int32_t* out) {
  RSSM_RETURN_IF_ERROR(check_rows(rows));
  for (size_t i = 0; i < rows.size(); ++i) out[i] = ops::cpu::argmax(row(rows[i]));
  return {};
}

Status CpuBackend::top_logprobs(std::span<const int64_t> rows, int64_t k, TokenLogprob* out) {
  RSSM_RETURN_IF_ERROR(check_rows(rows));
  if (k < 1 || k > model_.config().vocab_size)
    return invalid_argument("top_logprobs: k must be in [1, " + std::to_string(model_.config().vocab_size) +
                            "], got " + std::to_string(k));
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<TokenLogprob> t = ops::cpu::top_logprobs(row(rows[i]), k);
    std::copy(t.begin(), t.end(), out + i * static_cast<size_t>(k));
  }
  return {};
}

Status CpuBackend::sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const SampleRequest& q = requests[i];
    RSSM_RETURN_IF_ERROR(check_rows({&q.row, 1}));
    RSSM_RETURN_IF_ERROR(check_sampling(q.params, "sample"));
    const std::span<const float> r = row(q.row);
    ids[i] = ops::cpu::sample_at(r, q.params, q.r);
    if (lp != nullptr) lp[i] = ops::cpu::log_prob(r, ids[i]);
  }
  return {};
}

Status CpuBackend::logprobs_of(std::span<const int64_t> rows, std::span<const int32_t> tokens, double* out) {
  RSSM_RETURN_IF_ERROR(check_rows(rows));
  if (rows.size() != tokens.size())
    return invalid_argument("logprobs_of: " + std::to_string(rows.size()) + " rows but " +
                            std::to_string(tokens.size()) + " tokens");
  const int64_t V = model_.config().vocab_size;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= V)
      return invalid_argument("logprobs_of: token id " + std::to_string(tokens[i]) + " out of range [0, " +
                              std::to_string(V) + ")");
    out[i] = ops::cpu::log_prob(row(rows[i]), tokens[i]);
  }
  return {};
}

Status CpuBackend::read_state(const StateRead& read, int layer, std::vector<float>* window,
                              std::vector<float>* state) {
  if (cache_ == nullptr) return invalid_argument("read state: no session holds the cpu backend");
  if (layer < 0 || layer >= static_cast<int>(spec_.layers.size()) ||
      spec_.layers[size_t(layer)].kind == CacheLayerSpec::kAttention)
    return invalid_argument("read state: layer " + std::to_string(layer) + " is not an SSM layer");
  const ModelConfig& c = model_.config();
  for (const Block& blk : model_.program().blocks) {
    if (blk.cache_layer != layer) continue;
    if (blk.kind == BlockKind::kMamba2) {
      const ops::Conv1dParams conv{c.mamba.conv_channels(), c.mamba.conv_width, blk.mamba.conv_w, blk.mamba.conv_b};
      const ops::Mamba2Params p{c.mamba.n_heads, c.mamba.head_dim, c.mamba.state_size, c.mamba.n_groups,
                                blk.mamba.A_log,   blk.mamba.D,        blk.mamba.dt_bias,    c.mamba.dt_min,
                                c.mamba.dt_max};
      cache_->read_state(read, layer, conv, &p, nullptr, window, state);
    } else {
      const ops::Conv1dParams conv{c.gdn.conv_channels(), c.gdn.conv_width, blk.gdn.conv_w, nullptr};
      const ops::GdnParams p{c.gdn.n_k_heads, c.gdn.n_v_heads, c.gdn.k_dim, c.gdn.v_dim, blk.gdn.A_log,
                             blk.gdn.dt_bias};
      cache_->read_state(read, layer, conv, nullptr, &p, window, state);
    }
    return {};
  }
  return invalid_argument("read state: no block for layer " + std::to_string(layer));
}

Status CpuBackend::reset_storage(const StateOptions& opt) {
  cache_ = std::make_unique<PlanCache>(spec_, opt.page_size);
  logits_.clear();
  logits_.shrink_to_fit();
  kept_ = 0;
  return {};
}

BackendMemory CpuBackend::memory() const {
  BackendMemory m;
  m.weights_bytes = parameter_count(model_.config()) * 4;
  m.state_bytes = cache_ != nullptr ? cache_->state_bytes() : 0;
  m.kv_bytes = cache_ != nullptr ? cache_->kv_bytes() : 0;
  m.workspace_bytes = static_cast<int64_t>(logits_.capacity()) * 4;
  return m;
}

}  // namespace replayssm::cpu
