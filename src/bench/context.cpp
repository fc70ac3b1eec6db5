// BenchContext, run_once and BackendRunner (see workloads.h).
#include <algorithm>
#include <random>
#include <string_view>

#include "bench/memory.h"
#include "bench/workloads.h"

namespace replayssm::bench {

const std::vector<int32_t>& BenchContext::prompt(int64_t i) {
  while (static_cast<int64_t>(prompts_.size()) <= i) {
    const int64_t k = static_cast<int64_t>(prompts_.size());
    std::mt19937_64 rng(opt_.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(k) + 1);
    // Ids from 1: id 0 is often a special token (EOS of the tiny presets).
    const uint64_t V = static_cast<uint64_t>(std::max<int64_t>(config_.vocab_size - 1, 1));
    std::vector<int32_t> p(static_cast<size_t>(opt_.prompt_tokens));
    for (int32_t& t : p) t = static_cast<int32_t>(1 + rng() % V) % static_cast<int32_t>(config_.vocab_size);
    prompts_.push_back(std::move(p));
  }
  return prompts_[static_cast<size_t>(i)];
}

std::vector<std::vector<int32_t>> BenchContext::prompts(int64_t n) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(prompt(i));
  return out;
}

Status BenchContext::prepare_references(int64_t n, int64_t length, const Greedy& greedy) {
  if (static_cast<int64_t>(refs_.size()) < n) refs_.resize(static_cast<size_t>(n));
  std::vector<int64_t> missing;
  for (int64_t i = 0; i < n; ++i)
    if (static_cast<int64_t>(refs_[i].size()) < length) missing.push_back(i);
  if (missing.empty()) return {};
  std::vector<std::vector<int32_t>> ps;
  for (int64_t i : missing) ps.push_back(prompt(i));
  const int64_t new_tokens = std::max<int64_t>(length - opt_.prompt_tokens, 1);
  std::vector<std::vector<int32_t>> cont;
  if (greedy) {
    RSSM_ASSIGN_OR_RETURN(cont, greedy(ps, new_tokens));
  } else {
    GenerateOptions g;
    g.max_new_tokens = new_tokens;
    g.stop_at_eos = false;
    RSSM_ASSIGN_OR_RETURN(BatchResult r, generate_batch(*backend_, ps, g));
    cont = std::move(r.tokens);
  }
  for (size_t k = 0; k < missing.size(); ++k) {
    std::vector<int32_t>& full = refs_[missing[k]];
    full = ps[k];
    full.insert(full.end(), cont[k].begin(), cont[k].end());
  }
  return {};
}

StateOptions BenchContext::state_options(const Config& c) const {
  StateOptions s;
  s.strategy = c.strategy;
  s.window = c.window;
  s.checkpoint_interval = opt_.checkpoint_interval;
  s.page_size = opt_.page_size;
  s.log_retention = c.log_retention;
  return s;
}

Result<Measurement> run_once(BenchContext& ctx, const Config& c) {
  const bool reset = reset_peak_rss();
  Result<Measurement> m = [&]() -> Result<Measurement> {
    switch (c.workload) {
      case Workload::kAr:
      case Workload::kSpec: return run_decode(ctx, c);
      case Workload::kBeam: return run_beam(ctx, c);
      case Workload::kBestOfN: return run_best_of_n(ctx, c);
      case Workload::kTree: return run_tree(ctx, c);
      case Workload::kRestore: return run_restore(ctx, c);
    }
    return invalid_argument("unknown workload");
  }();
  if (m.ok()) m->rss_peak_bytes = reset ? peak_rss_bytes() : -1;
  // A device's buffers only grow: what it holds now is the run's peak.
  if (m.ok() && std::string_view(ctx.backend().name()) != "cpu") {
    const BackendMemory mem = ctx.backend().memory();
    m->device_bytes = mem.weights_bytes + mem.state_bytes + mem.kv_bytes + mem.workspace_bytes;
  }
  return m;
}

bool BackendRunner::on_host() const { return std::string_view(ctx_.backend().name()) == "cpu"; }

std::string BackendRunner::cannot_hold(const Config& c) {
  if (!on_host()) return "";  // a device's allocation answers (out of budget)
  const int64_t need = estimate_run_bytes(ctx_.config(), c, ctx_.options()), avail = available_memory_bytes();
  return avail >= 0 && need > avail ? "host memory" : "";
}

}  // namespace replayssm::bench
