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
  const int64_t B = cfg.batch, T = cfg.spec_t, W = std::max<int64_t>(cfg.window, 1);
  const int64_t L = opt.prompt_tokens + opt.new_tokens + T + 1;
  const int64_t S = ssm_state_bytes_per_sequence(c, 4);
  const int64_t per_token = kv_bytes_per_token(c, 4) + log_bytes_per_token(c);
  // Sequences alive at once and checkpoints (states) each may hold: the
  // live one, a flush target, snapshot's per-draft states, recompute's
  // sparse checkpoints.
  int64_t seqs = B, states = 3 + L / W, rows = B * std::max<int64_t>(opt.prompt_tokens, T + 1), logit_rows = B * (T + 1);
  switch (cfg.workload) {
    case Workload::kAr: break;
    case Workload::kSpec: states += T; break;
    case Workload::kBeam:
    case Workload::kBestOfN:
      seqs = 2 * B;
      rows = std::max(opt.prompt_tokens, B);
      break;
    case Workload::kTree:
      seqs = 1 + B * opt.new_tokens;
      states = 2;
      rows = opt.prompt_tokens;
      break;
    case Workload::kRestore:
      seqs = B + 1;
      rows = B * L;
      break;
  }
  const double store = static_cast<double>(seqs) * (static_cast<double>(states) * S + static_cast<double>(L) * per_token);
  const double act = static_cast<double>(rows) * (3.0 * c.hidden_size + 5.0 * widest_row(c)) * 4.0 +
                     static_cast<double>(logit_rows) * c.vocab_size * 16.0;
  return static_cast<int64_t>(std::ceil((store + act) * 1.1)) + (int64_t{64} << 20);
}

namespace {

int64_t read_int_file(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return -1;
  try {
    return std::stoll(s);
  } catch (...) {
    return -1;
  }
}

// "Key:   123 kB" from a /proc file, in bytes.
int64_t proc_kb(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::istringstream v(line.substr(key.size() + 1));
    int64_t kb = -1;
    v >> kb;
    return kb < 0 ? -1 : kb * 1024;
  }
  return -1;
}

}  // namespace

int64_t available_memory_bytes() {
  int64_t avail = proc_kb("/proc/meminfo", "MemAvailable");
  // A cgroup limit (v2, then v1) caps what this process may use.
  for (const auto& [limit_file, usage_file] :
       {std::pair<const char*, const char*>{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const int64_t limit = read_int_file(limit_file), usage = read_int_file(usage_file);
    if (limit <= 0 || usage < 0 || limit >= (int64_t{1} << 60)) continue;
    const int64_t room = std::max<int64_t>(0, limit - usage);
    avail = avail < 0 ? room : std::min(avail, room);
  }
  return avail;
}

int64_t peak_rss_bytes() { return proc_kb("/proc/self/status", "VmHWM"); }

bool reset_peak_rss() {
  // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
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
