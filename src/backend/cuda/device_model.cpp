// DeviceModel::create — the host side of the upload (see device_model.h).
#include "backend/cuda/device_model.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/dtype.h"
#include "model/program.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/device_fill.h"

namespace replayssm::cuda {

class DeviceModel::Builder {
 public:
  Builder(DeviceModel& m, uint64_t seed) : m_(m), seed_(seed) {}

  // An fp32 vector, or nullptr for an absent optional tensor.
  Result<const float*> vec(const float* host, int64_t n, const std::string& what) {
    if (host == nullptr) return static_cast<const float*>(nullptr);
    RSSM_ASSIGN_OR_RETURN(void* d, alloc(size_t(n) * 4, what));
    RSSM_RETURN_IF_ERROR(check(cudaMemcpy(d, host, size_t(n) * 4, cudaMemcpyHostToDevice), what));
    return static_cast<const float*>(d);
  }

  // Linears reading the same input, fused row-wise into one bf16 matrix;
  // their biases (zeros where a part has none) likewise.
  Status fused(std::initializer_list<const Linear*> parts, DeviceLinear* out, const std::string& what) {
    int64_t n_out = 0;
    const int64_t n_in = (*parts.begin())->n_in;
    bool bias = false;
    for (const Linear* l : parts) {
      if (l->n_in != n_in) return invalid_argument(what + ": fused projections read different widths");
      n_out += l->n_out;
      bias |= l->b != nullptr;
    }
    RSSM_ASSIGN_OR_RETURN(void* d, alloc(size_t(n_out * n_in) * 2, what));
    uint16_t* w = static_cast<uint16_t*>(d);
    std::vector<float> b;
    if (bias) b.assign(size_t(n_out), 0.0f);
    int64_t row = 0;
    for (const Linear* l : parts) {
      RSSM_RETURN_IF_ERROR(matrix(l->w, l->n_out, l->n_in, std::sqrt(3.0f / float(l->n_in)), w + row * n_in, what));
      if (l->b != nullptr) std::copy_n(l->b, l->n_out, b.begin() + row);
      row += l->n_out;
    }
    *out = {w, nullptr, n_out, n_in};
    if (bias) {
      RSSM_ASSIGN_OR_RETURN(out->b, vec(b.data(), n_out, what + " bias"));
    }
    return {};
  }

  // A bf16 matrix from host fp32 rows, or filled on the device when the
  // model has none.
  Status matrix(const float* host, int64_t rows, int64_t cols, float bound, uint16_t* dst, const std::string& what) {
    const int64_t n = rows * cols;
    if (host == nullptr)
      return check(fill_uniform_bf16(dst, n, bound, seed_ ^ (0x9e3779b97f4a7c15ull * ++fills_), nullptr), what);
    constexpr int64_t kChunk = int64_t{1} << 22;
    std::vector<uint16_t> buf(size_t(std::min(n, kChunk)));
    for (int64_t off = 0; off < n; off += kChunk) {
      const int64_t m = std::min(kChunk, n - off);
      for (int64_t i = 0; i < m; ++i) buf[size_t(i)] = f32_to_bf16(host[off + i]);
      RSSM_RETURN_IF_ERROR(check(cudaMemcpy(dst + off, buf.data(), size_t(m) * 2, cudaMemcpyHostToDevice), what));
    }
    return {};
  }

  // An fp32 matrix (the router, the shared gate): from the host, or filled
  // on the device with Model::random's distribution when the model has none.
  Result<const float*> f32_matrix(const float* host, int64_t rows, int64_t cols, const std::string& what) {
    if (host != nullptr) return vec(host, rows * cols, what);
    RSSM_ASSIGN_OR_RETURN(void* d, alloc(size_t(rows * cols) * 4, what));
    const float k = std::sqrt(3.0f / float(cols));
    RSSM_RETURN_IF_ERROR(check(fill_uniform_f32(static_cast<float*>(d), rows * cols, -k, k,
                                                seed_ ^ (0x9e3779b97f4a7c15ull * ++fills_), nullptr),
                               what));
    return static_cast<const float*>(d);
  }

  // A stack of E bf16 matrices (E, rows, cols), each of fan-in cols.
  Result<const uint16_t*> stack(const float* host, int64_t E, int64_t rows, int64_t cols, const std::string& what) {
    RSSM_ASSIGN_OR_RETURN(void* d, alloc(size_t(E * rows * cols) * 2, what));
    RSSM_RETURN_IF_ERROR(matrix(host, E * rows, cols, std::sqrt(3.0f / float(cols)), static_cast<uint16_t*>(d), what));
    return static_cast<const uint16_t*>(d);
  }

  Result<void*> alloc(size_t bytes, const std::string& what) {
    void* d = nullptr;
    if (cudaError_t e = cudaMalloc(&d, bytes); e != cudaSuccess) {
      cudaGetLastError();
      return out_of_budget("device weights: cannot allocate " + std::to_string(bytes) + " bytes for " + what + ": " +
                           cudaGetErrorString(e) + " (" + std::to_string(m_.bytes_) + " bytes already held)");
    }
    m_.allocations_.push_back(d);
    m_.bytes_ += int64_t(bytes);
    return d;
  }

  static Status check(cudaError_t e, const std::string& what) { return cuda_status(e, "device weights", what); }

 private:
  DeviceModel& m_;
  uint64_t seed_;
  uint64_t fills_ = 0;
};

DeviceModel::~DeviceModel() {
  for (void* p : allocations_) cudaFree(p);
}

Status device_visible() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return {};
  cudaGetLastError();
  return unsupported(std::string("--device cuda: no CUDA device is visible to this process") +
                     (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : ""));
}

Result<DeviceInfo> device_info() {
  RSSM_RETURN_IF_ERROR(device_visible());
  int dev = 0;
  cudaError_t e = cudaSuccess;
  DeviceInfo info;
  cudaDeviceProp prop{};
  size_t free_b = 0, total_b = 0;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess ||
      (e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) {
    cudaGetLastError();
    return unsupported(std::string("--device cuda: cannot query the CUDA device: ") + cudaGetErrorString(e));
  }
  info.name = prop.name;
  info.free_bytes = static_cast<int64_t>(free_b);
  info.total_bytes = static_cast<int64_t>(total_b);
  return info;
}

Result<std::unique_ptr<DeviceModel>> DeviceModel::create(const Model& model, uint64_t seed) {
  RSSM_RETURN_IF_ERROR(device_visible());
  std::unique_ptr<DeviceModel> m(new DeviceModel());
  m->config_ = model.config();
  const ModelConfig& c = m->config_;
  const Program& p = model.program();
  Builder b(*m, seed);
  const int64_t H = c.hidden_size;

  RSSM_ASSIGN_OR_RETURN(void* e, b.alloc(size_t(c.vocab_size * H) * 2, "embedding"));
  m->embed_ = static_cast<uint16_t*>(e);
  RSSM_RETURN_IF_ERROR(b.matrix(p.embed, c.vocab_size, H, std::sqrt(3.0f), static_cast<uint16_t*>(e), "embedding"));
  RSSM_ASSIGN_OR_RETURN(m->final_norm_, b.vec(p.final_norm, H, "final norm"));
  const bool tied = p.embed != nullptr ? p.lm_head.w == p.embed : c.tie_embeddings;
  if (tied) {
    m->lm_head_ = {m->embed_, nullptr, c.vocab_size, H};
  } else {
    RSSM_RETURN_IF_ERROR(b.fused({&p.lm_head}, &m->lm_head_, "lm_head"));
  }

  int n_moe = 0;
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    const Block& s = p.blocks[i];
    const std::string name = "block " + std::to_string(i) + " (" + block_kind_name(s.kind) + ")";
    DeviceBlock d;
    d.kind = s.kind;
    d.cache_layer = s.cache_layer;
    RSSM_ASSIGN_OR_RETURN(d.norm, b.vec(s.norm, H, name + " norm"));
    switch (s.kind) {
      case BlockKind::kMamba2: {
        const Mamba2Config& mc = c.mamba;
        const int64_t C = mc.conv_channels(), Hm = mc.n_heads;
        RSSM_RETURN_IF_ERROR(b.fused({&s.mamba.in_proj}, &d.in, name + " in_proj"));
        RSSM_RETURN_IF_ERROR(b.fused({&s.mamba.out_proj}, &d.out, name + " out_proj"));
        RSSM_ASSIGN_OR_RETURN(d.conv_w, b.vec(s.mamba.conv_w, C * mc.conv_width, name + " conv1d"));
        RSSM_ASSIGN_OR_RETURN(d.conv_b, b.vec(s.mamba.conv_b, C, name + " conv1d bias"));
        RSSM_ASSIGN_OR_RETURN(d.A_log, b.vec(s.mamba.A_log, Hm, name + " A_log"));
        RSSM_ASSIGN_OR_RETURN(d.D, b.vec(s.mamba.D, Hm, name + " D"));
        RSSM_ASSIGN_OR_RETURN(d.dt_bias, b.vec(s.mamba.dt_bias, Hm, name + " dt_bias"));
        RSSM_ASSIGN_OR_RETURN(d.norm_w, b.vec(s.mamba.norm_w, Hm * mc.head_dim, name + " norm"));
        break;
      }
      case BlockKind::kGatedDeltaNet: {
        const GdnConfig& g = c.gdn;
        const int64_t C = g.conv_channels();
        RSSM_RETURN_IF_ERROR(
            b.fused({&s.gdn.in_qkv, &s.gdn.in_z, &s.gdn.in_a, &s.gdn.in_b}, &d.in, name + " in_proj"));
        RSSM_RETURN_IF_ERROR(b.fused({&s.gdn.out_proj}, &d.out, name + " out_proj"));
        RSSM_ASSIGN_OR_RETURN(d.conv_w, b.vec(s.gdn.conv_w, C * g.conv_width, name + " conv1d"));
        RSSM_ASSIGN_OR_RETURN(d.A_log, b.vec(s.gdn.A_log, g.n_v_heads, name + " A_log"));
        RSSM_ASSIGN_OR_RETURN(d.dt_bias, b.vec(s.gdn.dt_bias, g.n_v_heads, name + " dt_bias"));
        RSSM_ASSIGN_OR_RETURN(d.norm_w, b.vec(s.gdn.norm_w, g.v_dim, name + " norm"));
        break;
      }
      case BlockKind::kAttention: {
        RSSM_RETURN_IF_ERROR(b.fused({&s.attn.q, &s.attn.k, &s.attn.v}, &d.in, name + " qkv"));
        RSSM_RETURN_IF_ERROR(b.fused({&s.attn.o}, &d.out, name + " o_proj"));
        RSSM_ASSIGN_OR_RETURN(d.q_norm, b.vec(s.attn.q_norm, c.attn.head_dim, name + " q_norm"));
        RSSM_ASSIGN_OR_RETURN(d.k_norm, b.vec(s.attn.k_norm, c.attn.head_dim, name + " k_norm"));
        break;
      }
      case BlockKind::kMlp:
        if (c.mlp.gated) {
          RSSM_RETURN_IF_ERROR(b.fused({&s.mlp.gate, &s.mlp.up}, &d.in, name + " gate|up"));
        } else {
          RSSM_RETURN_IF_ERROR(b.fused({&s.mlp.up}, &d.in, name + " up"));
        }
        RSSM_RETURN_IF_ERROR(b.fused({&s.mlp.down}, &d.out, name + " down"));
        break;
      case BlockKind::kMoe: {
        const MoeConfig& e = c.moe;
        const MoeWeights& w = s.moe;
        const int64_t E = e.n_experts, I = e.intermediate;
        d.moe_index = n_moe++;
        RSSM_ASSIGN_OR_RETURN(d.router, b.f32_matrix(w.router.w, E, H, name + " router"));
        RSSM_ASSIGN_OR_RETURN(d.correction_bias, b.vec(w.correction_bias, E, name + " e_score_correction_bias"));
        RSSM_ASSIGN_OR_RETURN(d.experts_up, b.stack(w.up, E, e.gated ? 2 * I : I, H, name + " experts up"));
        RSSM_ASSIGN_OR_RETURN(d.experts_down, b.stack(w.down, E, H, I, name + " experts down"));
        if (e.shared_intermediate > 0) {
          if (e.gated) {
            RSSM_RETURN_IF_ERROR(b.fused({&w.shared.gate, &w.shared.up}, &d.in, name + " shared gate|up"));
          } else {
            RSSM_RETURN_IF_ERROR(b.fused({&w.shared.up}, &d.in, name + " shared up"));
          }
          RSSM_RETURN_IF_ERROR(b.fused({&w.shared.down}, &d.out, name + " shared down"));
          if (e.shared_gate) {
            RSSM_ASSIGN_OR_RETURN(d.shared_gate, b.f32_matrix(w.shared_gate.w, 1, H, name + " shared_expert_gate"));
          }
        }
        break;
      }
    }
    m->blocks_.push_back(d);
  }
  RSSM_RETURN_IF_ERROR(Builder::check(cudaDeviceSynchronize(), "upload"));
  return m;
}

}  // namespace replayssm::cuda
