// The architecture-neutral size accounting of a config (see model.h): its
// tensor list, parameter count and cache layout. Apart from model loading,
// so that `info`, the memory checks and the config fuzzer need only the
// config and model/program.h.
#include "replayssm/model.h"

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
    specs.push_back({name, shape, optional});
    *ptr = nullptr;
  }
};

}  // namespace

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
  s.prefill_flops_per_token = 2.0 * static_cast<double>(parameter_count(c));
  return s;
}

}  // namespace replayssm
