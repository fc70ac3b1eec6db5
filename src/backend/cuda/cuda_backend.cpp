// CudaBackend (see cuda_backend.h): creation and the model's limits, a
// step's preparation and order, each block around the stateful layers'
// launches (layer_launches.cpp), the LM head, storage ops outside a step,
// read_state and the reads.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "backend/cuda/state_options_rule.h"
#include "core/dtype.h"
#include "ops/cuda/attention_decode.h"
#include "ops/cuda/attention_prefill.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/gdn_scan.h"
#include "ops/cuda/mamba2_scan.h"
#include "ops/cuda/moe.h"
#include "ops/cuda/norm.h"
#include "ops/cuda/rope.h"
#include "ops/cuda/ssm_append.h"

namespace replayssm::cuda {

namespace oc = replayssm::ops::cuda;

#define RSSM_BK_CU(expr, what) RSSM_RETURN_IF_ERROR(cuda_status((expr), "cuda backend", (what)))

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Adds the time from its construction to its destruction to *sum.
struct Timed {
  double* sum;
  double t0 = now_s();
  explicit Timed(double* s) : sum(s) {}
  ~Timed() { *sum += now_s() - t0; }
};

// The model against the kernels' limits, naming the config field.
Status check_model(const ModelConfig& c) {
  bool has_mamba = false, has_gdn = false, has_attn = false;
  for (BlockKind k : c.blocks)
    has_mamba |= k == BlockKind::kMamba2, has_gdn |= k == BlockKind::kGatedDeltaNet, has_attn |= k == BlockKind::kAttention;
  auto over = [&](const std::string& field, int64_t v, int64_t hi) {
    const std::string where = c.dir.empty() ? "" : c.dir + ": ";  // presets have no directory
    return unsupported("cuda backend: " + where + field + " = " + std::to_string(v) +
                       " is over the CUDA kernels' limit " + std::to_string(hi));
  };
  if (c.count(BlockKind::kMoe) > 0) {
    if (c.moe.n_experts > oc::kMoeMaxExperts) return over("num_experts", c.moe.n_experts, oc::kMoeMaxExperts);
    if (c.moe.top_k > oc::kMoeMaxTopK) return over("num_experts_per_tok", c.moe.top_k, oc::kMoeMaxTopK);
  }
  if (has_mamba && c.mamba.state_size > 256) return over("ssm_state_size", c.mamba.state_size, 256);
  if (has_mamba && c.mamba.conv_width > oc::kConvMaxK) return over("conv_kernel", c.mamba.conv_width, oc::kConvMaxK);
  if (has_gdn && c.gdn.conv_width > oc::kConvMaxK) return over("linear_conv_kernel_dim", c.gdn.conv_width, oc::kConvMaxK);
  if (has_gdn && c.gdn.v_dim > 256) return over("linear_value_head_dim", c.gdn.v_dim, 256);  // the replay kernels'
  if (has_gdn && c.gdn.k_dim > 512) return over("linear_key_head_dim", c.gdn.k_dim, 512);    // the step's, the scan's
  if (has_attn && c.attn.head_dim > oc::kAttnMaxD) return over("head_dim", c.attn.head_dim, oc::kAttnMaxD);
  if (has_attn && c.attn.n_heads / c.attn.n_kv_heads > oc::kAttnPrefillMaxRep)
    return over("num_attention_heads / num_key_value_heads", c.attn.n_heads / c.attn.n_kv_heads,
                oc::kAttnPrefillMaxRep);
  return {};
}

}  // namespace

CudaBackend::CudaBackend(const Model& model, const CudaBackendOptions& opt)
    : model_(model), opt_(opt), spec_(replayssm::cache_spec(model.config())) {}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  storage_.reset();
  logits_.reset();
  gemm_.reset();  // before the stream it is bound to
  for (void* p : allocs_) cudaFree(p);
  cudaFree(sched_dev_), cudaFree(attn_scratch_), cudaFree(win_stage_);
  if (sched_host_ != nullptr) cudaFreeHost(sched_host_);
  if (ev_begin_ != nullptr) cudaEventDestroy(ev_begin_);
  if (ev_end_ != nullptr) cudaEventDestroy(ev_end_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(const Model& model, const CudaBackendOptions& opt) {
  RSSM_RETURN_IF_ERROR(device_visible());
  RSSM_RETURN_IF_ERROR(check_model(model.config()));
  if (opt.max_step_rows < 1 || opt.max_step_rows > (int64_t{1} << 20))
    return invalid_argument("cuda backend: max_step_rows " + std::to_string(opt.max_step_rows) +
                            " out of range [1, 1048576]");
  if (opt.limits.decode_tokens < 0 || opt.limits.decode_tokens > std::min(oc::kMamba2MaxT, oc::kGdnMaxT) ||
      opt.limits.decode_log < 0 || opt.limits.decode_log > std::min(oc::kMamba2MaxW, oc::kGdnMaxW))
    return invalid_argument("cuda backend: schedule limits past the decode kernels'");
  std::unique_ptr<CudaBackend> b(new CudaBackend(model, opt));
  RSSM_ASSIGN_OR_RETURN(b->dm_, DeviceModel::create(model, opt.seed));
  RSSM_RETURN_IF_ERROR(b->init());
  return b;
}

template <typename T>
Status CudaBackend::grow(T** p, int64_t* cap, int64_t n, const char* what) {
  if (n <= *cap) return {};
  const int64_t c = std::max(n, 2 * *cap);
  void* d = nullptr;
  if (cudaError_t e = cudaMalloc(&d, sizeof(T) * size_t(c)); e != cudaSuccess) {
    cudaGetLastError();
    return out_of_budget(std::string("cuda backend: cannot allocate ") + std::to_string(sizeof(T) * c) +
                         " bytes for " + what + ": " + cudaGetErrorString(e));
  }
  cudaFree(*p);
  *p = static_cast<T*>(d), *cap = c;
  return {};
}

Status CudaBackend::init() {
  const ModelConfig& c = model_.config();
  const int64_t R = opt_.max_step_rows, Hd = c.hidden_size;
  for (BlockKind k : c.blocks)
    has_mamba_ |= k == BlockKind::kMamba2, has_gdn_ |= k == BlockKind::kGatedDeltaNet,
        has_attn_ |= k == BlockKind::kAttention, has_moe_ |= k == BlockKind::kMoe;
  RSSM_BK_CU(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  RSSM_BK_CU(cudaEventCreate(&ev_begin_), "step events");
  RSSM_BK_CU(cudaEventCreate(&ev_end_), "step events");
  gemm_ = std::make_unique<oc::Gemm>();
  RSSM_BK_CU(gemm_->init(stream_), "cuBLAS handle and workspace");
  workspace_bytes_ += 32 << 20;
  logits_ = std::make_unique<DeviceLogits>(c.vocab_size);
  auto alloc = [&](auto** p, int64_t n, const char* what) -> Status {
    using T = std::remove_reference_t<decltype(**p)>;
    void* d = nullptr;
    const size_t bytes = sizeof(T) * size_t(std::max<int64_t>(n, 1));
    if (cudaError_t e = cudaMalloc(&d, bytes); e != cudaSuccess) {
      cudaGetLastError();
      return out_of_budget("cuda backend: cannot allocate " + std::to_string(bytes) + " bytes for " + what + " (" +
                           std::to_string(R) + " rows a step): " + cudaGetErrorString(e));
    }
    allocs_.push_back(d);
    workspace_bytes_ += int64_t(bytes);
    *p = static_cast<T*>(d);
    return {};
  };
  int64_t widest_in = 0, widest_y = 0;
  for (const DeviceBlock& blk : dm_->blocks()) {
    widest_in = std::max(widest_in, blk.in.n_out);
    widest_y = std::max(widest_y, blk.out.n_in);
  }
  RSSM_RETURN_IF_ERROR(alloc(&h_, R * Hd, "the residual stream"));
  RSSM_RETURN_IF_ERROR(alloc(&xn_, R * Hd, "normed inputs"));
  RSSM_RETURN_IF_ERROR(alloc(&d_, R * Hd, "block outputs"));
  RSSM_RETURN_IF_ERROR(alloc(&proj_, R * widest_in, "input projections"));
  RSSM_RETURN_IF_ERROR(alloc(&y_, R * widest_y, "mixer outputs"));
  const Mamba2Config& mc = c.mamba;
  const GdnConfig& gc = c.gdn;
  RSSM_RETURN_IF_ERROR(alloc(&xconv_, R * std::max(has_mamba_ ? mc.conv_channels() : 0,
                                                  has_gdn_ ? gc.conv_channels() : 0),
                             "post-conv rows"));
  if (has_mamba_) {
    RSSM_RETURN_IF_ERROR(alloc(&cC_, R * mc.n_groups * mc.state_size, "Mamba2 C"));
    RSSM_RETURN_IF_ERROR(alloc(&mamba_scratch_,
                               oc::mamba2_replay_scratch_floats(int(R), 1, int(mc.n_heads), int(mc.head_dim)),
                               "Mamba2 replay scratch"));
  }
  if (has_gdn_) {
    const int64_t Kd = gc.n_k_heads * gc.k_dim, V = gc.n_v_heads * gc.v_dim;
    RSSM_RETURN_IF_ERROR(alloc(&gq_, R * Kd, "GDN q"));
    RSSM_RETURN_IF_ERROR(alloc(&gk_, R * Kd, "GDN k"));
    RSSM_RETURN_IF_ERROR(alloc(&gv_, R * V, "GDN v"));
    RSSM_RETURN_IF_ERROR(alloc(&gg_, R * gc.n_v_heads, "GDN g"));
    RSSM_RETURN_IF_ERROR(alloc(&gbeta_, R * gc.n_v_heads, "GDN beta"));
    RSSM_RETURN_IF_ERROR(alloc(&gu_, R * V, "GDN u"));
  }
  if (has_moe_) {
    const MoeConfig& mc = c.moe;
    const int64_t E = mc.n_experts, slots = R * mc.top_k, U = (mc.gated ? 2 : 1) * mc.intermediate;
    RSSM_RETURN_IF_ERROR(alloc(&moe_logits_, R * E, "MoE router logits"));
    if (opt_.keep_router_logits)
      RSSM_RETURN_IF_ERROR(alloc(&moe_kept_, c.count(BlockKind::kMoe) * R * E, "kept router logits"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_experts_, slots, "MoE choices"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_weights_, slots, "MoE weights"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_first_, E + 1, "MoE groups"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_src_row_, slots, "MoE groups"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_slot_of_, slots, "MoE groups"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_tiles_, oc::moe_max_tiles(slots, E), "MoE tiles"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_n_tiles_, 1, "MoE tiles"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_h_, slots * U, "MoE expert activations"));
    RSSM_RETURN_IF_ERROR(alloc(&moe_y_, slots * Hd, "MoE expert outputs"));
    if (mc.shared_intermediate > 0) RSSM_RETURN_IF_ERROR(alloc(&moe_shared_, R * Hd, "MoE shared expert output"));
    if (mc.shared_gate) RSSM_RETURN_IF_ERROR(alloc(&moe_gate_, R, "MoE shared expert gate"));
  }
  if (has_attn_) {
    const AttentionConfig& ac = c.attn;
    const int64_t D = ac.head_dim, q_width = (ac.output_gate ? 2 : 1) * ac.n_heads * D, d_kv = ac.n_kv_heads * D;
    if (ac.qk_norm) {
      RSSM_RETURN_IF_ERROR(alloc(&aq_, R * q_width, "attention q"));
      RSSM_RETURN_IF_ERROR(alloc(&ak_, R * d_kv, "attention k"));
      RSSM_RETURN_IF_ERROR(alloc(&av_, R * d_kv, "attention v"));
    }
    if (ac.rotary_dim > 0) {
      const std::vector<float> f = oc::rope_inv_freq(int(ac.rotary_dim), ac.rope_theta);
      RSSM_RETURN_IF_ERROR(alloc(&inv_freq_, int64_t(f.size()), "RoPE frequencies"));
      RSSM_BK_CU(cudaMemcpyAsync(inv_freq_, f.data(), sizeof(float) * f.size(), cudaMemcpyHostToDevice, stream_),
                 "RoPE frequencies");
    }
  }
  // The model's weights went up on the legacy stream, which this
  // non-blocking one does not wait for.
  RSSM_BK_CU(cudaDeviceSynchronize(), "setup uploads");
  return {};
}

StepBuffers CudaBackend::bufs() const {
  StepBuffers s;
  s.context = "cuda backend", s.gemm = gemm_.get(), s.stream = stream_;
  s.h = h_, s.xn = xn_, s.d = d_, s.proj = proj_, s.aq = aq_, s.ak = ak_, s.av = av_, s.inv_freq = inv_freq_;
  return s;
}

StateUnits CudaBackend::units(const StateOptions&) const { return SlotStorage::units(spec_); }

Status CudaBackend::check_options(const StateOptions& opt) const {
  RSSM_RETURN_IF_ERROR(opt.validate());
  return check_cuda_state_options(opt);
}

Status CudaBackend::reset_storage(const StateOptions& opt) {
  RSSM_BK_CU(cudaStreamSynchronize(stream_), "reset");
  storage_ = std::make_unique<SlotStorage>(spec_, opt.page_size);
  logits_->set_kept(0);
  poisoned_ = false;
  return {};
}

Status CudaBackend::upload(const std::vector<int32_t>& buf) {
  const int64_t n = std::max<int64_t>(int64_t(buf.size()), 1);
  if (n > sched_cap_) {
    const int64_t cap = std::max(n, 2 * sched_cap_);
    int32_t* d = nullptr;
    int32_t* h = nullptr;
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&d), sizeof(int32_t) * size_t(cap)); e != cudaSuccess) {
      cudaGetLastError();
      return out_of_budget("cuda backend: cannot allocate a step's index arrays (" + std::to_string(cap * 4) +
                           " bytes): " + cudaGetErrorString(e));
    }
    if (cudaError_t e = cudaMallocHost(reinterpret_cast<void**>(&h), sizeof(int32_t) * size_t(cap)); e != cudaSuccess) {
      cudaGetLastError();
      cudaFree(d);
      return out_of_budget(std::string("cuda backend: cannot pin a step's index arrays: ") + cudaGetErrorString(e));
    }
    cudaFree(sched_dev_);
    if (sched_host_ != nullptr) cudaFreeHost(sched_host_);
    sched_dev_ = d, sched_host_ = h, sched_cap_ = cap;
  }
  // The pinned buffer is free: every step and read waits for its stream.
  if (!buf.empty()) std::memcpy(sched_host_, buf.data(), sizeof(int32_t) * buf.size());
  RSSM_BK_CU(cudaMemcpyAsync(sched_dev_, sched_host_, sizeof(int32_t) * size_t(n), cudaMemcpyHostToDevice, stream_),
             "a step's index arrays");
  return {};
}

Status CudaBackend::execute(const StepPlan& plan, std::span<const int64_t> logit_rows) {
  const double t0 = now_s();
  logits_->set_kept(0);
  if (poisoned_)
    return invalid_argument("cuda backend: an earlier step failed after it had changed storage; its state is "
                            "undefined until a new session claims the backend");
  if (storage_ == nullptr || plan.page_size != storage_->page_size())
    return invalid_argument("cuda backend: a plan of pages of " + std::to_string(plan.page_size) +
                            " tokens, but no session with that page size holds the backend");
  const ModelConfig& c = model_.config();
  const int64_t R = plan.rows();
  if (R > opt_.max_step_rows)
    return invalid_argument("cuda backend: a step of " + std::to_string(R) + " rows; it takes at most " +
                            std::to_string(opt_.max_step_rows));
  for (int32_t t : plan.tokens)
    if (t < 0 || t >= c.vocab_size)
      return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(c.vocab_size) +
                              ")");
  // 1. The schedule and room for it; nothing stored changes.
  const SlotsNamed named = slots_named(plan);
  RSSM_RETURN_IF_ERROR(storage_->reserve(named, 0, 0, stream_));
  RSSM_ASSIGN_OR_RETURN(StepSchedule s, build_schedule(plan, logit_rows, has_mamba_, has_gdn_, opt_.limits,
                                                       storage_->scratch_slots()));
  RSSM_RETURN_IF_ERROR(storage_->reserve(named, s.log_scratch, s.ckpt_scratch, stream_));
  RSSM_RETURN_IF_ERROR(logits_->reserve(int64_t(logit_rows.size())));
  int64_t window = 0;
  for (const SsmStore& st : storage_->ssm_layers()) window = std::max(window, st.shape.window_elems());
  RSSM_RETURN_IF_ERROR(grow(&win_stage_, &win_stage_cap_, int64_t(s.total_writes) * window, "the writes' windows"));
  if (has_attn_ && s.all_single && decode_attention() && s.n_seqs > 0) {
    const AttentionConfig& ac = c.attn;
    RSSM_RETURN_IF_ERROR(grow(&attn_scratch_, &attn_scratch_cap_,
                              oc::attention_decode_scratch_floats(s.n_seqs, int(ac.n_heads), int(ac.n_kv_heads),
                                                                  int(ac.head_dim), s.max_len),
                              "attention scratch"));
  }
  RSSM_RETURN_IF_ERROR(upload(s.buf));
  const double t1 = now_s();
  // 2–4: from here on a failure leaves storage half-changed.
  Status st = cuda_status(cudaEventRecord(ev_begin_, stream_), "cuda backend", "step event");
  if (st.ok()) st = storage_->apply(plan.ops, stream_);
  if (st.ok() && R > 0) st = forward(s);
  if (st.ok()) st = cuda_status(cudaEventRecord(ev_end_, stream_), "cuda backend", "step event");
  const double t2 = now_s();
  if (st.ok()) st = cuda_status(cudaStreamSynchronize(stream_), "cuda backend", "step");
  if (!st.ok()) {
    poisoned_ = true;
    return st;
  }
  const double t3 = now_s();
  float gpu_ms = 0.0f;
  if (cudaEventElapsedTime(&gpu_ms, ev_begin_, ev_end_) != cudaSuccess) cudaGetLastError(), gpu_ms = 0.0f;
  times_.steps++, times_.prepare_s += t1 - t0, times_.launch_s += t2 - t1, times_.wait_s += t3 - t2;
  times_.gpu_s += 1e-3 * gpu_ms;
  logits_->set_kept(int64_t(logit_rows.size()));
  last_rows_ = R;
  return {};
}

Status CudaBackend::router_logits(int moe_index, std::vector<float>* out) {
  const int64_t E = model_.config().moe.n_experts;
  if (moe_kept_ == nullptr) return invalid_argument("cuda backend: router logits are kept only with keep_router_logits");
  if (moe_index < 0 || moe_index >= int(model_.config().count(BlockKind::kMoe)))
    return invalid_argument("cuda backend: no MoE block " + std::to_string(moe_index));
  out->resize(size_t(last_rows_ * E));
  RSSM_BK_CU(cudaMemcpyAsync(out->data(), moe_kept_ + moe_index * opt_.max_step_rows * E,
                             sizeof(float) * out->size(), cudaMemcpyDeviceToHost, stream_),
             "router logits");
  RSSM_BK_CU(cudaStreamSynchronize(stream_), "router logits");
  return {};
}

Status CudaBackend::apply(std::span<const StorageOp> ops) {
  if (storage_ == nullptr) return invalid_argument("cuda backend: storage ops, but no session holds the backend");
  if (poisoned_) return invalid_argument("cuda backend: an earlier step failed after it had changed storage");
  RSSM_RETURN_IF_ERROR(storage_->reserve(slots_named(ops), 0, 0, stream_));
  Status st = storage_->apply(ops, stream_);
  if (st.ok()) st = cuda_status(cudaStreamSynchronize(stream_), "cuda backend", "storage ops");
  if (!st.ok()) poisoned_ = true;
  return st;
}

Status CudaBackend::forward(const StepSchedule& s) {
  const StepBuffers b = bufs();
  const ModelConfig& c = model_.config();
  const int64_t Hd = c.hidden_size, V = c.vocab_size;
  RSSM_RETURN_IF_ERROR(embed_rows(b, *dm_, dev(s.tokens), s.rows));
  const std::vector<DeviceBlock>& blocks = dm_->blocks();
  for (size_t i = 0; i < blocks.size(); ++i) {
    const DeviceBlock& blk = blocks[i];
    const float* next_norm = i + 1 < blocks.size() ? blocks[i + 1].norm : dm_->final_norm();
    switch (blk.kind) {
      case BlockKind::kMamba2:
      case BlockKind::kGatedDeltaNet:
        RSSM_RETURN_IF_ERROR(run_ssm(blk, *storage_->ssm(blk.cache_layer), s, next_norm));
        break;
      case BlockKind::kAttention:
        RSSM_RETURN_IF_ERROR(run_attention(blk, *storage_->kv(blk.cache_layer), s, next_norm));
        break;
      case BlockKind::kMlp: RSSM_RETURN_IF_ERROR(mlp_block(b, *dm_, blk, s.rows, next_norm)); break;
      case BlockKind::kMoe: RSSM_RETURN_IF_ERROR(run_moe(blk, s.rows, next_norm)); break;
    }
  }
  // The final norm is in xn (the last block's project_out): the kept rows
  // gathered into d, then the LM head over them alone.
  const int64_t kept = s.logit_rows.n;
  if (kept == 0) return {};
  oc::LogRowsArgs g;
  g.rows = kept, g.width = Hd, g.src = xn_, g.lds = Hd, g.src_row = dev(s.logit_rows), g.dst = d_;
  RSSM_BK_CU(oc::log_rows_cuda(g, stream_), "kept rows");
  const DeviceLinear& lm = dm_->lm_head();
  RSSM_BK_CU(gemm_->linear(d_, Hd, kept, lm.w, V, Hd, lm.b, logits_->rows(), V, true), "LM head");
  return {};
}

LayerArgs CudaBackend::layer_args(const DeviceBlock& blk) const {
  LayerArgs a;
  a.config = &model_.config(), a.blk = &blk, a.page_size = storage_->page_size(), a.sched = sched_dev_;
  a.stream = stream_;
  a.proj = proj_, a.xconv = xconv_, a.y = y_, a.cC = cC_, a.mamba_scratch = mamba_scratch_;
  a.gq = gq_, a.gk = gk_, a.gv = gv_, a.gg = gg_, a.gbeta = gbeta_, a.gu = gu_, a.win_stage = win_stage_;
  a.attn_scratch = attn_scratch_, a.decode_attention = decode_attention();
  return a;
}

Status CudaBackend::run_ssm(const DeviceBlock& blk, SsmStore& st, const StepSchedule& s, const float* next_norm) {
  const ModelConfig& c = model_.config();
  const int Hd = int(c.hidden_size);
  const int64_t width = blk.in.n_out;
  const bool mamba = blk.kind == BlockKind::kMamba2;
  RSSM_BK_CU(gemm_->linear(xn_, Hd, s.rows, blk.in.w, width, Hd, blk.in.b, proj_, width, false),
             mamba ? "Mamba2 in_proj" : "GDN in_proj");
  LayerArgs a = layer_args(blk);
  a.ssm = &st;
  RSSM_RETURN_IF_ERROR(ssm_layer(a, s));
  if (mamba) {  // z | xBC | dt: the gate is z
    const Mamba2Config& mc = c.mamba;
    const int64_t HP = mc.n_heads * mc.head_dim;
    RSSM_BK_CU(oc::rmsnorm_gated_group_cuda(y_, HP, proj_, width, s.rows, HP, HP / mc.n_groups, blk.norm_w,
                                            c.norm_eps, y_, HP, stream_, /*release_early=*/true),  // next: out_proj
               "Mamba2 gated norm");
    return project_out(bufs(), *dm_, blk, y_, HP, HP, s.rows, next_norm, "Mamba2 out_proj");
  }
  const GdnConfig& g = c.gdn;  // qkv | z | a | b: the gate is z
  const int64_t V = g.n_v_heads * g.v_dim, C = g.conv_channels();
  RSSM_BK_CU(oc::rmsnorm_then_gate_cuda(y_, V, proj_ + C, width, s.rows, g.n_v_heads, g.v_dim, blk.norm_w, c.norm_eps,
                                        y_, V, stream_, /*release_early=*/true),  // next: out_proj
             "GDN norm and gate");
  return project_out(bufs(), *dm_, blk, y_, V, V, s.rows, next_norm, "GDN out_proj");
}

Status CudaBackend::run_moe(const DeviceBlock& blk, int64_t rows, const float* next_norm) {
  const ModelConfig& c = model_.config();
  const MoeConfig& mc = c.moe;
  const int64_t Hd = c.hidden_size, E = mc.n_experts, K = mc.top_k, I = mc.intermediate;
  const int64_t U = (mc.gated ? 2 : 1) * I, slots = rows * K;
  float* logits = moe_kept_ != nullptr ? moe_kept_ + blk.moe_index * opt_.max_step_rows * E : moe_logits_;
  RSSM_BK_CU(oc::moe_router_cuda(xn_, Hd, rows, Hd, blk.router, E, logits, E, stream_), "MoE router");
  const ops::MoeRoutingParams rp = ops::moe_routing_params(mc, blk.correction_bias);
  RSSM_BK_CU(oc::moe_route_cuda(rp, logits, E, rows, moe_experts_, moe_weights_, stream_), "MoE routing");
  oc::MoeGroups g;
  g.first = moe_first_, g.src_row = moe_src_row_, g.slot_of = moe_slot_of_, g.tiles = moe_tiles_;
  g.n_tiles = moe_n_tiles_;
  RSSM_BK_CU(oc::moe_group_cuda(moe_experts_, rows, K, E, g, stream_), "MoE grouping");
  // The chosen experts: up (gate | up) over each row's input, the
  // activation in place, down into fp32 rows the combine sums.
  oc::MoeGroupedLinearArgs up;
  up.slots = slots, up.E = E, up.N = U, up.Kd = Hd, up.x = xn_, up.ldx = Hd, up.x_row = moe_src_row_;
  up.w = blk.experts_up, up.first = moe_first_, up.tiles = moe_tiles_, up.n_tiles = moe_n_tiles_;
  up.out = moe_h_, up.ldo = U;
  RSSM_BK_CU(oc::moe_grouped_linear_cuda(up, stream_), "MoE experts up");
  uint16_t* act = mc.gated ? moe_h_ + I : moe_h_;  // act(gate) ⊙ up lands on up
  RSSM_BK_CU(oc::mlp_activation_cuda(mc.act, mc.gated ? moe_h_ : nullptr, U, act, U, slots, I, act, U, stream_),
             "MoE experts activation");
  oc::MoeGroupedLinearArgs down = up;
  down.N = Hd, down.Kd = I, down.x = act, down.ldx = U, down.x_row = nullptr, down.w = blk.experts_down;
  down.out = nullptr, down.out_f32 = moe_y_, down.ldo = Hd;
  RSSM_BK_CU(oc::moe_grouped_linear_cuda(down, stream_), "MoE experts down");
  oc::MoeCombineArgs cb;
  cb.rows = rows, cb.K = K, cb.D = Hd, cb.y = moe_y_, cb.ldy = Hd, cb.experts = moe_experts_;
  cb.weights = moe_weights_, cb.slot_of = moe_slot_of_, cb.out = d_, cb.ldo = Hd;
  if (mc.shared_intermediate > 0) {  // the shared expert over every row, as an MLP block's in and out
    const int64_t Is = mc.shared_intermediate, width = blk.in.n_out;
    uint16_t* sact = mc.gated ? proj_ + Is : proj_;
    if (mc.gated) {
      RSSM_BK_CU(gemm_->linear(xn_, Hd, rows, blk.in.w, width, Hd, blk.in.b, proj_, width, false), "MoE shared up");
      RSSM_BK_CU(oc::mlp_activation_cuda(mc.act, proj_, width, sact, width, rows, Is, sact, width, stream_),
                 "MoE shared activation");
    } else {
      RSSM_BK_CU(gemm_->linear_act(xn_, Hd, rows, blk.in.w, width, Hd, blk.in.b, mc.act, proj_, width),
                 "MoE shared up and activation");
    }
    RSSM_BK_CU(gemm_->linear(sact, width, rows, blk.out.w, Hd, Is, blk.out.b, moe_shared_, Hd, false),
               "MoE shared down");
    cb.shared = moe_shared_, cb.lds = Hd;
    if (blk.shared_gate != nullptr) {
      RSSM_BK_CU(oc::moe_router_cuda(xn_, Hd, rows, Hd, blk.shared_gate, 1, moe_gate_, 1, stream_),
                 "MoE shared gate");
      cb.shared_gate = moe_gate_;
    }
  }
  RSSM_BK_CU(oc::moe_combine_cuda(cb, stream_), "MoE combine");
  RSSM_BK_CU(oc::residual_rmsnorm_cuda(h_, Hd, d_, Hd, rows, Hd, next_norm, c.norm_eps, c.norm_unit_offset, xn_, Hd,
                                       stream_, /*release_early=*/true),
             "MoE residual and norm");
  return {};
}

Status CudaBackend::run_attention(const DeviceBlock& blk, KvStore& kv, const StepSchedule& s,
                                  const float* next_norm) {
  const AttentionConfig& ac = model_.config().attn;
  const int64_t d_q = ac.n_heads * ac.head_dim;
  AttentionRows q;
  RSSM_RETURN_IF_ERROR(attention_qkv(bufs(), *dm_, blk, s.rows, dev(s.row_pos), &q));
  LayerArgs a = layer_args(blk);
  a.kv = &kv, a.q = q.q, a.k = q.k, a.v = q.v, a.ldq = q.ldq, a.ldk = q.ldk, a.ldv = q.ldv;
  a.q_head_stride = q.head_stride;
  RSSM_RETURN_IF_ERROR(attention_layer(a, s));
  return project_out(bufs(), *dm_, blk, y_, d_q, d_q, s.rows, next_norm, "attention o_proj");
}

Status CudaBackend::read_state(const StateRead& read, int layer, std::vector<float>* window,
                               std::vector<float>* state) {
  if (storage_ == nullptr) return invalid_argument("read state: no session holds the cuda backend");
  if (poisoned_) return invalid_argument("read state: an earlier step failed after it had changed storage");
  if (layer < 0 || layer >= int(spec_.layers.size()) || spec_.layers[size_t(layer)].kind == CacheLayerSpec::kAttention)
    return invalid_argument("read state: layer " + std::to_string(layer) + " is not an SSM layer");
  const int64_t B = storage_->page_size();
  if (read.page_size != B || read.base_pos < 0 || read.length < read.base_pos || (read.base < 0 && read.base_pos != 0) ||
      int64_t(read.logs.size()) < (read.length + B - 1) / B)
    return invalid_argument("read state: a read plan that does not fit this storage");
  SlotsNamed named;
  named.ckpts = read.base + 1;
  // Only the pages holding rows past the base are read: a read at its
  // checkpoint (a snapshot's) names no log.
  for (int64_t pi = read.base_pos / B; read.base_pos < read.length && pi * B < read.length; ++pi) {
    const int32_t slot = read.logs[size_t(pi)];
    if (slot < 0) return invalid_argument("read state: page " + std::to_string(pi) + " of the log has no slot");
    named.logs = std::max(named.logs, slot + 1);
  }
  RSSM_RETURN_IF_ERROR(storage_->reserve(named, 0, 1, stream_));
  const ScheduleSlots slots = storage_->scratch_slots();
  SsmStore& st = *storage_->ssm(layer);
  const SsmShape& sh = st.shape;
  const int32_t base = read.base >= 0 ? read.base : slots.zero, out = slots.ckpt_scratch;
  const int64_t n = read.length - read.base_pos;
  // One sequence: the state after the log (a scan of no rows) and the
  // window before the length (the gather), as a step's writes are made.
  std::vector<int32_t> buf = {base, out, 0, 0, int32_t(n), int32_t(read.base_pos % B), read.base, int32_t(n), 0};
  const int64_t table_at = int64_t(buf.size());
  for (int64_t pi = read.base_pos / B; pi * B < std::max(read.length, read.base_pos + 1); ++pi)
    buf.push_back(pi < int64_t(read.logs.size()) ? std::max(read.logs[size_t(pi)], 0) : 0);
  const int stride = int(int64_t(buf.size()) - table_at);
  RSSM_RETURN_IF_ERROR(upload(buf));
  RSSM_RETURN_IF_ERROR(grow(&win_stage_, &win_stage_cap_, sh.window_elems(), "a window read"));
  const int32_t* d = sched_dev_;
  oc::LogPages pages{d + table_at, stride, d + 5, int(B)};
  if (n == 0) {
    RSSM_BK_CU(cudaMemcpyAsync(st.state + out * sh.state_floats(), st.state + base * sh.state_floats(),
                               size_t(sh.state_floats() * 4), cudaMemcpyDeviceToDevice, stream_),
               "read state");
  } else if (sh.mamba) {
    const Mamba2Config& mc = model_.config().mamba;
    oc::Mamba2ScanArgs a;
    a.batch = 1, a.H = int(sh.H), a.P = int(sh.rows), a.N = int(sh.cols), a.G = int(mc.n_groups), a.T = 1;
    for (const DeviceBlock& blk : dm_->blocks())
      if (blk.cache_layer == layer) a.A_log = blk.A_log, a.D = blk.D, a.dt_bias = blk.dt_bias;
    a.dt_min = mc.dt_min, a.dt_max = mc.dt_max;
    a.state = st.state, a.slot = d + 0, a.out_slot = d + 1;
    a.x = xconv_, a.ldx = sh.C, a.Bm = xconv_, a.Cm = xconv_, a.ldbc = sh.C, a.dt_raw = proj_, a.lddt = sh.H;
    a.y = y_, a.ldy = sh.H * sh.rows;  // no rows: none of these is read
    a.cu_rows = d + 2, a.n_rows = d + 3, a.apply_log_alone = true;
    a.n_log = d + 4, a.log_x = st.log_a, a.log_B = static_cast<const uint16_t*>(st.log_b), a.log_dt = st.log_c;
    a.pages = pages;
    RSSM_BK_CU(oc::mamba2_scan_cuda(a, stream_), "read state");
  } else {
    const GdnConfig& gc = model_.config().gdn;
    oc::GdnScanArgs a;
    a.batch = 1, a.Hk = int(gc.n_k_heads), a.Hv = int(sh.H), a.dk = int(sh.rows), a.dv = int(sh.cols), a.T = 1;
    a.state = st.state, a.slot = d + 0, a.out_slot = d + 1;
    a.q = gq_, a.k = gk_, a.v = gv_, a.g = gg_, a.beta = gbeta_, a.o = y_;  // no rows: not read
    a.cu_rows = d + 2, a.n_rows = d + 3, a.apply_log_alone = true;
    a.n_log = d + 4, a.log_k = st.log_a, a.log_u = static_cast<const float*>(st.log_b), a.log_g = st.log_c;
    a.pages = pages;
    RSSM_BK_CU(oc::gdn_scan_cuda(a, stream_), "read state");
  }
  std::vector<uint16_t> win(static_cast<size_t>(sh.window_elems()));
  if (sh.K > 1 && n == 0) {  // the checkpoint's own window (a snapshot's read may have no log at all)
    if (read.base >= 0)
      RSSM_BK_CU(cudaMemcpyAsync(win.data(), st.window + int64_t(read.base) * sh.window_elems(), win.size() * 2,
                                 cudaMemcpyDeviceToHost, stream_),
                 "read window");
  } else if (sh.K > 1) {
    oc::Conv1dArgs cv;
    cv.batch = 1, cv.C = int(sh.C), cv.K = int(sh.K), cv.log_rows = st.log_pre, cv.pages = pages;
    cv.ckpt_window = st.window, cv.ckpt_slot = d + 6;
    RSSM_BK_CU(oc::conv1d_gather_window_cuda(cv, d + 7, win_stage_, d + 8, stream_), "read window");
    RSSM_BK_CU(cudaMemcpyAsync(win.data(), win_stage_, win.size() * 2, cudaMemcpyDeviceToHost, stream_), "read window");
  }
  state->assign(size_t(sh.state_floats()), 0.0f);
  RSSM_BK_CU(cudaMemcpyAsync(state->data(), st.state + out * sh.state_floats(), size_t(sh.state_floats() * 4),
                             cudaMemcpyDeviceToHost, stream_),
             "read state");
  RSSM_BK_CU(cudaStreamSynchronize(stream_), "read state");
  window->resize(win.size());
  for (size_t i = 0; i < win.size(); ++i) (*window)[i] = bf16_to_f32(win[i]);
  return {};
}

Status CudaBackend::logits(std::span<const int64_t> rows, float* out) {
  Timed t(&times_.read_s);
  return logits_->logits(rows, out, stream_);
}
Status CudaBackend::argmax(std::span<const int64_t> rows, int32_t* out) {
  Timed t(&times_.read_s);
  return logits_->argmax(rows, out, stream_);
}
Status CudaBackend::top_logprobs(std::span<const int64_t> rows, int64_t k, TokenLogprob* out) {
  Timed t(&times_.read_s);
  return logits_->top_logprobs(rows, k, out, stream_);
}
Status CudaBackend::sample(std::span<const SampleRequest> requests, int32_t* ids, double* lp) {
  Timed t(&times_.read_s);
  return logits_->sample(requests, ids, lp, stream_);
}
Status CudaBackend::logprobs_of(std::span<const int64_t> rows, std::span<const int32_t> tokens, double* out) {
  Timed t(&times_.read_s);
  return logits_->logprobs_of(rows, tokens, out, stream_);
}

BackendMemory CudaBackend::memory() const {
  BackendMemory m;
  m.weights_bytes = dm_->bytes();
  m.state_bytes = storage_ != nullptr ? storage_->state_bytes() : 0;
  m.kv_bytes = storage_ != nullptr ? storage_->kv_bytes() : 0;
  m.workspace_bytes = workspace_bytes_ + logits_->bytes() + sched_cap_ * 4 + attn_scratch_cap_ * 4 + win_stage_cap_ * 2;
  return m;
}

}  // namespace replayssm::cuda
