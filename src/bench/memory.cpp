// Host memory accounting for the benchmark (see memory.h).
#include "bench/memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace replayssm::bench {

int64_t weight_bytes(const ModelConfig& c) { return parameter_count(c) * 4; }

namespace {

// The widest activation row any block writes (floats).
int64_t widest_row(const ModelConfig& c) {
  int64_t w = c.hidden_size;
  for (BlockKind k : c.blocks) {
    switch (k) {
      case BlockKind::kMamba2:
        w = std::max(w, 2 * c.mamba.n_heads * c.mamba.head_dim + 2 * c.mamba.n_groups * c.mamba.state_size +
                            c.mamba.n_heads);
        break;
      case BlockKind::kGatedDeltaNet:
        w = std::max(w, c.gdn.conv_channels() + c.gdn.n_v_heads * c.gdn.v_dim + 2 * c.gdn.n_v_heads);
        break;
      case BlockKind::kAttention:
        w = std::max(w, 2 * c.attn.n_heads * c.attn.head_dim + 2 * c.attn.n_kv_heads * c.attn.head_dim);
        break;
      case BlockKind::kMlp:
        w = std::max(w, 2 * c.mlp.intermediate);
        break;
      case BlockKind::kMoe:
        w = std::max({w, 2 * c.moe.intermediate, 2 * c.moe.shared_intermediate, c.moe.n_experts});
        break;
    }
  }
  return w;
}

// Log bytes per token, over-estimated as two conv rows per SSM layer (the
// pre-conv row plus the post-conv inputs, which are never wider).
int64_t log_bytes_per_token(const ModelConfig& c) {
  int64_t n = 0;
  for (const CacheLayerSpec& l : cache_spec(c).layers)
    if (l.kind != CacheLayerSpec::kAttention) n += (2 * l.conv_channels + l.n_heads) * 4;
  return n;
}

}  // namespace

int64_t estimate_run_bytes(const ModelConfig& c, const Config& cfg, const SweepOptions& opt) {
  const double B = static_cast<double>(cfg.batch), T = static_cast<double>(cfg.spec_t);
  const double W = static_cast<double>(std::max<int64_t>(cfg.window, 1));
  const double K = static_cast<double>(opt.checkpoint_interval), page = static_cast<double>(opt.page_size);
  const double L = static_cast<double>(opt.prompt_tokens + opt.new_tokens + cfg.spec_t + 1);
  const double S = static_cast<double>(ssm_state_bytes_per_sequence(c, 4));
  const double kv = static_cast<double>(kv_bytes_per_token(c, 4)), lg = static_cast<double>(log_bytes_per_token(c));
  const bool replay = cfg.strategy == Strategy::kReplay;
  // States one sequence holds at most: replay the live checkpoint and a
  // flush target; snapshot its committed state plus one per draft;
  // recompute the live state plus one per sparse interval; and, with
  // --checkpoint-interval, one older checkpoint per K tokens.
  double states = 2.0 + (K > 0 ? L / K : 0.0);
  if (cfg.strategy == Strategy::kSnapshot && cfg.workload == Workload::kSpec) states += T;
  if (cfg.strategy == Strategy::kRecompute) states += L / (K > 0 ? K : W);
  // Per sequence: states, KV rows, and (replay) the log — bounded by L.
  const double per_seq = states * S + L * (kv + (replay ? lg : 0.0));
  double store = 0.0, rows = B * std::max<double>(static_cast<double>(opt.prompt_tokens), T + 1.0);
  double logit_rows = B * (T + 1.0);
  switch (cfg.workload) {
    case Workload::kAr:
    case Workload::kSpec:
      store = B * per_seq;
      break;
    case Workload::kBeam:
    case Workload::kBestOfN:
      store = 2.0 * B * per_seq;  // parents and children during a step
      rows = std::max<double>(static_cast<double>(opt.prompt_tokens), B);
      logit_rows = B;
      break;
    case Workload::kTree: {
      // Nodes share their ancestors' pages. A replay node shares the
      // family's checkpoints too (one per W tokens of tree at most); under
      // the other strategies every node holds its own state.
      const double nodes = 1.0 + B * static_cast<double>(opt.new_tokens);
      const double own = nodes * (page + 1.0) * (kv + (replay ? lg : 0.0)) + per_seq;
      // (recompute measured at 1.3x snapshot's: sparse checkpoints on top).
      store = own + (replay ? (2.0 + nodes / W) * S : nodes * S * (cfg.strategy == Strategy::kRecompute ? 1.5 : 1.0));
      rows = static_cast<double>(opt.prompt_tokens);
      logit_rows = 1.0;
      break;
    }
    case Workload::kRestore:
      store = (B + 1.0) * per_seq + (replay ? L * lg : 0.0);  // the base keeps its whole log (log=all)
      rows = B * L;  // a batched re-prefill
      logit_rows = B;
      break;
  }
  const double act = rows * (3.0 * static_cast<double>(c.hidden_size) + 5.0 * static_cast<double>(widest_row(c))) * 4.0 +
                     logit_rows * static_cast<double>(c.vocab_size) * 16.0;
  return static_cast<int64_t>(std::ceil((store + act) * 1.1)) + (int64_t{64} << 20);
}

int64_t device_weight_bytes(const ModelConfig& c) { return parameter_count(c) * 2; }

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

Result<int64_t> parse_bytes(const std::string& text, const std::string& option) {
  auto bad = [&] {
    return invalid_argument(option + ": '" + text + "' is not a byte count (e.g. 1073741824, 512M, 8G)");
  };
  size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return bad();
  }
  std::string unit = text.substr(used);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double mult = 1.0;
  if (unit.empty() || unit == "B") mult = 1.0;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mult = 1024.0 * 1024 * 1024 * 1024;
  else return bad();
  if (!(v > 0.0) || v * mult > 9.0e18) return invalid_argument(option + ": '" + text + "' must be a positive byte count");
  return static_cast<int64_t>(v * mult);
}

}  // namespace replayssm::bench
