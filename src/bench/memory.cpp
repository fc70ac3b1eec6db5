// Host memory accounting for the benchmark (see memory.h).
#include "bench/memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

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

int64_t estimate_device_run_bytes(const ModelConfig& c, const Config& cfg, const SweepOptions& opt) {
  // Mirrors Decoder::create's buffers, with 4 bytes wherever it uses 2 or 4.
  const bool replay = cfg.strategy == Strategy::kReplay, spec = cfg.workload == Workload::kSpec;
  // tree: TreeSearchCuda's decoder — kTreeSlotsPerChild × batch slots fed `tree_chunk`
  // rows at a time.
  const bool tree = cfg.workload == Workload::kTree;
  const double W = static_cast<double>(cfg.window);
  const double B = tree ? static_cast<double>(std::max<int64_t>(3, kTreeSlotsPerChild * cfg.batch))
                        : static_cast<double>(cfg.batch);
  // spec: verifies of T = spec_t + 1 rows; the standard layout keeps T + 1
  // states per sequence, either layout keeps a verify's pre-conv rows.
  // beam, best-of-n, tree: forks, with a spare slot per sequence (standard:
  // the copy's target; replay: a pool for folds out of shared checkpoints).
  const bool forks = cfg.workload == Workload::kBeam || cfg.workload == Workload::kBestOfN || tree;
  const bool verifies = spec || tree;
  // restore: prompt chunks of restore_chunk rows; replay keeps each log
  // entry's pre-conv row and the checkpoint's window (Decoder's rewind option).
  const bool restore = cfg.workload == Workload::kRestore, rewind = restore && replay;
  // recompute: the live state (and a spare with forks), a sparse
  // checkpoint with its window, verifies in place and its re-runs as
  // feeds of at least 4 rows.
  const bool recompute = cfg.strategy == Strategy::kRecompute;
  const double T0 = spec ? static_cast<double>(cfg.spec_t + 1)
                    : tree    ? static_cast<double>(tree_chunk(cfg.window))
                    : restore ? static_cast<double>(restore_chunk(cfg.batch))
                              : 1.0;
  const double T = recompute ? std::max(T0, 4.0) : T0;
  // tree: feeds only, so the standard layout keeps no per-draft states.
  const double states = recompute ? (forks ? 3.0 : 2.0) : spec && !replay ? T + 1.0 : forks ? 2.0 : 1.0;
  const double windows = recompute ? 2.0 : 1.0;
  const bool pending = verifies || recompute;
  // The context of bench/decoder_runner.cpp's decoder (decoder_context).
  const double L = static_cast<double>(opt.prompt_tokens + opt.new_tokens) +
                   (spec ? static_cast<double>(opt.new_tokens) + 3.0 * T : tree ? 1.0 + T : 0.0);
  const double pages = std::ceil((L + T) / 64.0) * 64.0;  // 64-row KV pages, room for a feed's dropped rows
  const Mamba2Config& m = c.mamba;
  const GdnConfig& g = c.gdn;
  const AttentionConfig& a = c.attn;
  double per_seq = 0.0, m_scratch = 0.0, g_scratch = 0.0, a_scratch = 0.0;  // scratch: once per kind
  double one_state = 0.0;  // every SSM layer's state once: the scratch slot of a feed's dropped rows
  for (BlockKind k : c.blocks) {
    if (k == BlockKind::kMamba2) {
      const double HP = static_cast<double>(m.n_heads * m.head_dim);
      const double GN = static_cast<double>(m.n_groups * m.state_size);
      one_state += HP * static_cast<double>(m.state_size) * 4.0;
      per_seq += states * HP * static_cast<double>(m.state_size) * 4.0 +
                 windows * static_cast<double>((m.conv_width - 1) * m.conv_channels()) * 2.0;
      if (pending) per_seq += T * static_cast<double>(m.conv_channels()) * 2.0;
      if (replay) per_seq += W * (HP + GN + static_cast<double>(m.n_heads)) * 4.0;
      if (rewind) per_seq += (W + static_cast<double>(m.conv_width - 1)) * static_cast<double>(m.conv_channels()) * 2.0;
      m_scratch = std::max(m_scratch, (2.0 * HP + 2.0 * GN + 2.0 * static_cast<double>(m.n_heads)) * 4.0);
    } else if (k == BlockKind::kGatedDeltaNet) {
      const double K = static_cast<double>(g.n_k_heads * g.k_dim), V = static_cast<double>(g.n_v_heads * g.v_dim);
      one_state += static_cast<double>(g.n_v_heads * g.k_dim * g.v_dim) * 4.0;
      per_seq += states * static_cast<double>(g.n_v_heads * g.k_dim * g.v_dim) * 4.0 +
                 windows * static_cast<double>((g.conv_width - 1) * g.conv_channels()) * 2.0;
      if (pending) per_seq += T * static_cast<double>(g.conv_channels()) * 2.0;
      if (replay) per_seq += W * (K + V + static_cast<double>(g.n_v_heads)) * 4.0;
      if (rewind) per_seq += (W + static_cast<double>(g.conv_width - 1)) * static_cast<double>(g.conv_channels()) * 2.0;
      g_scratch = std::max(g_scratch, (2.0 * K + V + 2.0 * static_cast<double>(g.n_v_heads)) * 4.0);
    } else if (k == BlockKind::kAttention) {
      const double D = static_cast<double>(a.head_dim);
      per_seq += pages * 2.0 * static_cast<double>(a.n_kv_heads) * D * 2.0 + pages / 64.0 * 20.0;
      // Flash-decoding scratch: a split per 512 context rows (only at small batches, counted always).
      const double Hq = static_cast<double>(a.n_heads), Hkv = static_cast<double>(a.n_kv_heads);
      a_scratch = std::max(a_scratch, Hq * std::ceil(L / 512.0) * (D + 2.0) * 4.0 + (3.0 * Hq + 2.0 * Hkv) * D * 4.0);
    }
  }
  // Per row of a step; logits for every row only where verifies or feeds
  // return them all, else one row per sequence.
  const double act = (3.0 * static_cast<double>(c.hidden_size) + 2.0 * static_cast<double>(widest_row(c))) * 4.0 +
                     m_scratch + g_scratch + a_scratch + 64.0;
  const double logit_rows = pending ? T : 1.0;
  const double cublas = static_cast<double>(32 << 20);
  // A fork stages the largest per-layer array it copies: a layer's K/V (or log).
  double staging = 0.0;
  if (forks) {
    staging = pages * 2.0 * static_cast<double>(a.n_kv_heads * a.head_dim) * 2.0;
    for (BlockKind k : c.blocks)
      if (k == BlockKind::kMamba2) staging = std::max(staging, W * static_cast<double>(m.n_heads * m.head_dim) * 2.0);
      else if (k == BlockKind::kGatedDeltaNet) staging = std::max(staging, W * static_cast<double>(g.n_v_heads * g.v_dim) * 4.0);
  }
  const double scratch_slot = replay ? 0.0 : one_state;
  // Rows a step's activations hold: T a sequence; the tree's decoder at
  // least its prompt's ragged steps (Decoder: batch × max(max_chunk, spec)).
  const double act_rows = tree ? B * std::max(T, std::ceil(double(kTreePrefillChunk) / B)) : B * T;
  return static_cast<int64_t>(std::ceil(
             (B * (per_seq + logit_rows * static_cast<double>(c.vocab_size) * 4.0 + staging) + act_rows * act +
              scratch_slot + cublas) *
             1.1)) +
         (int64_t{256} << 20);
}

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
