// The architecture-neutral size accounting of a config (see model.h): its
// tensor list, parameter count and cache layout. Apart from model loading,
// so that `info`, the memory checks and the config fuzzer need only the
// config and model/program.h.
#include "replayssm/model.h"

#include <optional>
#include <string>
#include <vector>

#include "model/program.h"

namespace replayssm {

namespace {

// Records the tensor list without touching any data.
class SpecBinder final : public WeightBinder {
 public:
  std::vector<TensorSpec> specs;
  void tensor(const std::string& name, const std::vector<int64_t>& shape, const float** ptr,
              bool optional) override {
    specs.push_back({name, shape, optional, {}, {}});
    *ptr = nullptr;
  }
  void experts(const TensorSpec& spec, const float** ptr) override {
    specs.push_back(spec);
    *ptr = nullptr;
  }
};

// a × b for non-negative sizes; nullopt past kMaxElements.
std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxElements) return std::nullopt;
  return r;
}

std::string dims_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Checks each tensor's shape as bind_program lists it; keeps the first error.
class SizeBinder final : public WeightBinder {
 public:
  explicit SizeBinder(const std::string& file) : file_(file) {}
  Status status;
  int64_t total = 0;

  void tensor(const std::string& name, const std::vector<int64_t>& shape, const float** ptr, bool) override {
    *ptr = nullptr;
    if (!status.ok()) return;
    std::optional<int64_t> n = 1;
    for (int64_t d : shape) {
      if (d < 1) {
        status = invalid_argument(file_ + ": tensor '" + name + "' would have shape " + dims_str(shape) +
                                  ": every dimension must be positive");
        return;
      }
      if (n) n = checked_mul(*n, d);
    }
    if (!n) {
      status = invalid_argument(file_ + ": tensor '" + name + "' of shape " + dims_str(shape) +
                                " would hold more than 2^48 elements");
      return;
    }
    total += *n;  // both at most 2^48: no overflow
    if (total > kMaxElements)
      status = invalid_argument(file_ + ": the model's parameters would number more than 2^48");
  }
  // An expert stack is one tensor of its stacked shape.
  void experts(const TensorSpec& spec, const float** ptr) override { tensor(spec.name, spec.shape, ptr, false); }

 private:
  const std::string& file_;
};

}  // namespace

Status check_model_sizes(const ModelConfig& c, const std::string& file) {
  SizeBinder b(file);
  Program p;
  bind_program(c, b, &p);
  RSSM_RETURN_IF_ERROR(b.status);
  // Past the tensor check every conv width and channel count is a tensor
  // dimension; the state is a product of three sizes and is checked here.
  int64_t state = 0, kv = 0;
  const CacheSpec spec = cache_spec(c);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const CacheLayerSpec& l = spec.layers[i];
    std::optional<int64_t> n;
    if (l.kind == CacheLayerSpec::kAttention) {
      n = checked_mul(2 * l.n_kv_heads, l.head_dim);
      if (n) kv += *n;
    } else {
      n = checked_mul(l.n_heads, l.state_rows);
      if (n) n = checked_mul(*n, l.state_cols);
      const std::optional<int64_t> window = checked_mul(l.conv_width - 1, l.conv_channels);
      if (n && window) state += *n + *window;
      if (!window) n.reset();
    }
    if (!n || state > kMaxElements || kv > kMaxElements)
      return invalid_argument(file + ": cache layer " + std::to_string(i) + " (" +
                              (l.kind == CacheLayerSpec::kAttention ? "attention" : "SSM") +
                              "): a sequence's state or a token's K and V would hold more than 2^48 elements");
  }
  return {};
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  SpecBinder b;
  Program p;
  bind_program(c, b, &p);
  return b.specs;
}

int64_t parameter_count(const ModelConfig& c) {
  int64_t n = 0;
  for (const TensorSpec& t : expected_tensors(c)) {
    int64_t e = 1;
    for (int64_t d : t.shape) e *= d;
    n += e;
  }
  return n;
}

int64_t active_parameter_count(const ModelConfig& c) {
  const int64_t idle = c.moe.n_experts - c.moe.top_k;
  return parameter_count(c) - c.count(BlockKind::kMoe) * idle * c.moe.expert_parameters(c.hidden_size);
}

int64_t ssm_state_bytes_per_sequence(const ModelConfig& c, int64_t act_bytes) {
  int64_t n = 0;
  for (const CacheLayerSpec& l : cache_spec(c).layers) {
    if (l.kind == CacheLayerSpec::kAttention) continue;
    n += l.n_heads * l.state_rows * l.state_cols * 4;
    n += (l.conv_width - 1) * l.conv_channels * act_bytes;
  }
  return n;
}

int64_t kv_bytes_per_token(const ModelConfig& c, int64_t act_bytes) {
  int64_t n = 0;
  for (const CacheLayerSpec& l : cache_spec(c).layers)
    if (l.kind == CacheLayerSpec::kAttention) n += 2 * l.n_kv_heads * l.head_dim * act_bytes;
  return n;
}

CacheSpec cache_spec(const ModelConfig& c) {
  CacheSpec s;
  for (BlockKind k : c.blocks) {
    CacheLayerSpec l{};
    switch (k) {
      case BlockKind::kMlp:
      case BlockKind::kMoe:
        continue;
      case BlockKind::kAttention:
        l.kind = CacheLayerSpec::kAttention;
        l.n_kv_heads = c.attn.n_kv_heads;
        l.head_dim = c.attn.head_dim;
        break;
      case BlockKind::kMamba2:
        l.kind = CacheLayerSpec::kMamba2;
        l.conv_channels = c.mamba.conv_channels();
        l.conv_width = c.mamba.conv_width;
        l.n_heads = c.mamba.n_heads;
        l.state_rows = c.mamba.head_dim;
        l.state_cols = c.mamba.state_size;
        break;
      case BlockKind::kGatedDeltaNet:
        l.kind = CacheLayerSpec::kGatedDeltaNet;
        l.conv_channels = c.gdn.conv_channels();
        l.conv_width = c.gdn.conv_width;
        l.n_heads = c.gdn.n_v_heads;
        l.state_rows = c.gdn.k_dim;
        l.state_cols = c.gdn.v_dim;
        break;
    }
    s.layers.push_back(l);
  }
  // A token's multiply-adds run through its active parameters only.
  s.prefill_flops_per_token = 2.0 * static_cast<double>(active_parameter_count(c));
  return s;
}

}  // namespace replayssm
