// Decoder (see decoder.h): buffers, the per-step plan, the launch sequence
// of one step and its CUDA graphs.
#include "runtime/cuda/decoder.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/cuda/attention_decode.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/norm.h"
#include "ops/cuda/rope.h"
#include "ops/cuda/sampling.h"
#include "ops/cuda/ssm_append.h"

namespace replayssm::cuda {

namespace oc = replayssm::ops::cuda;

const char* decode_strategy_name(DecodeStrategy s) {
  return s == DecodeStrategy::kStandard ? "standard" : "replay";
}

namespace {

// The plan: one int32 array per field, `batch` each, in one buffer.
enum PlanField {
  kTokens, kPos, kSeqLen,         // the step
  kMEntry, kMLog, kMFold,         // Mamba2 layers: log entry of the new token, entries, fold
  kGEntry, kGLog, kGFold,         // Gated DeltaNet layers, likewise
  kSlot, kMoveFrom, kMoveCount,   // constant: slot b = sequence b; GDN's post-fold move
  kPlanFields
};

Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return {};
  cudaGetLastError();
  return io_error("cuda decode: " + what + ": " + cudaGetErrorString(e));
}

#define RSSM_CU(expr, what) RSSM_RETURN_IF_ERROR(cuda_status((expr), (what)))

}  // namespace

// Buffers of one stateful layer (CacheSpec order).
struct LayerState {
  BlockKind kind = BlockKind::kMlp;
  float* state = nullptr;       // (B, heads, rows, cols): the state (standard) or checkpoint (replay)
  uint16_t* window = nullptr;   // (B, K−1, C) conv window
  uint16_t* log_x = nullptr;    // Mamba2 log (B, W, H·P)
  uint16_t* log_B = nullptr;    //            (B, W, G·N)
  float* log_dt = nullptr;      //            (B, W, H)
  uint16_t* log_k = nullptr;    // GDN log    (B, W, Hk·dk)
  float* log_u = nullptr;       //            (B, W, Hv·dv)
  float* log_g = nullptr;       //            (B, W, Hv)
  oc::PagedKv kv;               // attention
  size_t state_bytes = 0;       // what reset() zeroes at `state` and `window`
  size_t window_bytes = 0;
};

struct Decoder::Impl {
  const DeviceModel& m;
  DecoderOptions opt;
  cudaStream_t stream = nullptr;
  oc::Gemm gemm;
  std::vector<void*> allocs;
  std::vector<LayerState> layers;
  int32_t* plan = nullptr;        // device
  int32_t* plan_host = nullptr;   // pinned
  int32_t* next = nullptr;        // device (B)
  int32_t* next_host = nullptr;   // pinned
  // Activations, `batch` rows each.
  float* h = nullptr;             // fp32 residual stream (B, hidden)
  uint16_t* xn = nullptr;         // normed input of a block (B, hidden)
  uint16_t* d = nullptr;          // a block's output (B, hidden)
  uint16_t* proj = nullptr;       // fused input projection (B, widest in)
  uint16_t* y = nullptr;          // mixer output before out_proj (B, widest)
  uint16_t *cx = nullptr, *cB = nullptr, *cC = nullptr;  // Mamba2 compact x, B, C
  float* cdt = nullptr;
  uint16_t *gq = nullptr, *gk = nullptr, *gv = nullptr;  // GDN dense q, k, v
  float *gg = nullptr, *gbeta = nullptr;
  uint16_t *aq = nullptr, *ak = nullptr, *av = nullptr;  // attention q, k, v (qk-norm models)
  float* mamba_scratch = nullptr;
  float* attn_scratch = nullptr;
  float* logits = nullptr;        // (B, vocab) fp32
  float* inv_freq = nullptr;
  int32_t* page_table = nullptr;  // (B, pages per sequence): sequence b owns pages b·n .. b·n + n − 1
  int pages_per_seq = 0;
  cudaGraphExec_t graph[2] = {nullptr, nullptr};  // [fold]
  bool ran_eager[2] = {false, false};
  int m_count = 0, g_count = 0;   // replay: log entries before this step (Mamba2, GDN layers)
  bool has_mamba = false, has_gdn = false;  // a kind without layers never folds

  Impl(const DeviceModel& model, const DecoderOptions& o) : m(model), opt(o) {}
  ~Impl() {
    for (cudaGraphExec_t g : graph)
      if (g != nullptr) cudaGraphExecDestroy(g);
    for (void* p : allocs) cudaFree(p);
    if (plan_host != nullptr) cudaFreeHost(plan_host);
    if (next_host != nullptr) cudaFreeHost(next_host);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  template <typename T>
  Status alloc(T** p, int64_t n, const std::string& what, int64_t* account) {
    const size_t bytes = sizeof(T) * size_t(std::max<int64_t>(n, 1));
    void* d = nullptr;
    if (cudaError_t e = cudaMalloc(&d, bytes); e != cudaSuccess) {
      cudaGetLastError();
      return out_of_budget("cuda decode: cannot allocate " + std::to_string(bytes) + " bytes for " + what + " (batch " +
                           std::to_string(opt.batch) + ", context " + std::to_string(opt.max_context) +
                           "): " + cudaGetErrorString(e));
    }
    allocs.push_back(d);
    *account += int64_t(bytes);
    *p = static_cast<T*>(d);
    return {};
  }

  int32_t* field(PlanField f) const { return plan + int64_t(f) * opt.batch; }

  Status enqueue(bool fold);
  Status run_mamba2(const DeviceBlock& blk, LayerState& L, bool fold);
  Status run_gdn(const DeviceBlock& blk, LayerState& L, bool fold);
  Status run_attention(const DeviceBlock& blk, LayerState& L);
  Status run_mlp(const DeviceBlock& blk);
};

Decoder::~Decoder() = default;

Result<std::unique_ptr<Decoder>> Decoder::create(const DeviceModel& model, const DecoderOptions& o) {
  const ModelConfig& c = model.config();
  if (o.batch < 1 || o.batch > 65535)
    return invalid_argument("cuda decode: batch " + std::to_string(o.batch) + " out of range [1, 65535]");
  if (o.max_context < 1 || o.max_context > (int64_t{1} << 24))
    return invalid_argument("cuda decode: max_context " + std::to_string(o.max_context) + " out of range [1, 16777216]");
  if (o.strategy == DecodeStrategy::kReplay && (o.window < 2 || o.window > oc::kMamba2MaxW))
    return invalid_argument("cuda decode: window " + std::to_string(o.window) + " out of range [2, 64]");
  if (o.kv_page < 1 || o.kv_page > 4096)
    return invalid_argument("cuda decode: kv_page " + std::to_string(o.kv_page) + " out of range [1, 4096]");

  std::unique_ptr<Decoder> dec(new Decoder());
  dec->opt_ = o;
  dec->impl_ = std::make_unique<Impl>(model, o);
  Impl& I = *dec->impl_;
  DecoderMemory& mem = dec->mem_;
  const int64_t B = o.batch, W = o.window, Hd = c.hidden_size;
  const bool replay = o.strategy == DecodeStrategy::kReplay;
  RSSM_CU(cudaStreamCreateWithFlags(&I.stream, cudaStreamNonBlocking), "stream");
  RSSM_CU(I.gemm.init(I.stream), "cuBLAS");
  mem.workspace_bytes += 32 << 20;

  RSSM_CU(cudaMallocHost(reinterpret_cast<void**>(&I.plan_host), sizeof(int32_t) * kPlanFields * B), "pinned plan");
  RSSM_CU(cudaMallocHost(reinterpret_cast<void**>(&I.next_host), sizeof(int32_t) * B), "pinned tokens");
  int64_t& ws = mem.workspace_bytes;
  RSSM_RETURN_IF_ERROR(I.alloc(&I.plan, kPlanFields * B, "the step plan", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.next, B, "next tokens", &ws));
  for (int64_t b = 0; b < B; ++b) {
    I.plan_host[kSlot * B + b] = int32_t(b);
    I.plan_host[kMoveFrom * B + b] = int32_t(W - 1);
    I.plan_host[kMoveCount * B + b] = 1;
  }

  // The widest activation each buffer must hold, over the blocks.
  int64_t widest_in = 0, widest_y = 0;
  for (const DeviceBlock& blk : model.blocks()) {
    widest_in = std::max(widest_in, blk.in.n_out);
    widest_y = std::max(widest_y, blk.out.n_in);
  }
  RSSM_RETURN_IF_ERROR(I.alloc(&I.h, B * Hd, "residual stream", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.xn, B * Hd, "normed input", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.d, B * Hd, "block output", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.proj, B * widest_in, "input projection", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.y, B * widest_y, "mixer output", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.logits, B * c.vocab_size, "logits", &ws));

  // Per stateful layer.
  const CacheSpec spec = cache_spec(c);
  const Mamba2Config& mc = c.mamba;
  const GdnConfig& gc = c.gdn;
  const AttentionConfig& ac = c.attn;
  I.pages_per_seq = int((o.max_context + o.kv_page - 1) / o.kv_page);
  bool any_mamba = false, any_gdn = false, any_attn = false;
  for (const DeviceBlock& blk : model.blocks()) {
    if (blk.cache_layer < 0) continue;
    if (I.layers.size() <= size_t(blk.cache_layer)) I.layers.resize(size_t(blk.cache_layer) + 1);
    LayerState& L = I.layers[size_t(blk.cache_layer)];
    L.kind = blk.kind;
    const std::string what = "layer " + std::to_string(blk.cache_layer);
    int64_t& st = mem.state_bytes;
    if (blk.kind == BlockKind::kMamba2) {
      any_mamba = true;
      const int64_t C = mc.conv_channels(), HP = mc.n_heads * mc.head_dim, GN = mc.n_groups * mc.state_size;
      RSSM_RETURN_IF_ERROR(I.alloc(&L.state, B * HP * mc.state_size, what + (replay ? " checkpoints" : " states"), &st));
      RSSM_RETURN_IF_ERROR(I.alloc(&L.window, B * (mc.conv_width - 1) * C, what + " conv windows", &st));
      L.state_bytes = size_t(B * HP * mc.state_size) * 4, L.window_bytes = size_t(B * (mc.conv_width - 1) * C) * 2;
      if (replay) {
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_x, B * W * HP, what + " log x", &st));
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_B, B * W * GN, what + " log B", &st));
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_dt, B * W * mc.n_heads, what + " log dt", &st));
      }
    } else if (blk.kind == BlockKind::kGatedDeltaNet) {
      any_gdn = true;
      const int64_t C = gc.conv_channels(), K = gc.n_k_heads * gc.k_dim, V = gc.n_v_heads * gc.v_dim;
      RSSM_RETURN_IF_ERROR(I.alloc(&L.state, B * gc.n_v_heads * gc.k_dim * gc.v_dim, what + " states", &st));
      RSSM_RETURN_IF_ERROR(I.alloc(&L.window, B * (gc.conv_width - 1) * C, what + " conv windows", &st));
      L.state_bytes = size_t(B * gc.n_v_heads * gc.k_dim * gc.v_dim) * 4;
      L.window_bytes = size_t(B * (gc.conv_width - 1) * C) * 2;
      if (replay) {
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_k, B * W * K, what + " log k", &st));
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_u, B * W * V, what + " log u", &st));
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_g, B * W * gc.n_v_heads, what + " log g", &st));
      }
    } else if (blk.kind == BlockKind::kAttention) {
      any_attn = true;
      const int64_t width = ac.n_kv_heads * ac.head_dim, n_pages = B * I.pages_per_seq;
      uint16_t* rows = nullptr;
      RSSM_RETURN_IF_ERROR(I.alloc(&rows, n_pages * o.kv_page * 2 * width, what + " K/V pages", &mem.kv_bytes));
      std::vector<uint16_t*> kp(static_cast<size_t>(n_pages)), vp(static_cast<size_t>(n_pages));
      for (int64_t p = 0; p < n_pages; ++p) {
        kp[size_t(p)] = rows + p * o.kv_page * 2 * width;  // K beside V in each row, as the store lays them out
        vp[size_t(p)] = kp[size_t(p)] + width;
      }
      uint16_t** kd = nullptr;
      uint16_t** vd = nullptr;
      RSSM_RETURN_IF_ERROR(I.alloc(&kd, n_pages, what + " page list", &mem.kv_bytes));
      RSSM_RETURN_IF_ERROR(I.alloc(&vd, n_pages, what + " page list", &mem.kv_bytes));
      RSSM_CU(cudaMemcpy(kd, kp.data(), sizeof(uint16_t*) * size_t(n_pages), cudaMemcpyHostToDevice), "page list");
      RSSM_CU(cudaMemcpy(vd, vp.data(), sizeof(uint16_t*) * size_t(n_pages), cudaMemcpyHostToDevice), "page list");
      L.kv.k_pages = kd, L.kv.v_pages = vd, L.kv.max_pages = I.pages_per_seq, L.kv.page_size = o.kv_page;
      L.kv.row_stride = 2 * width;
    }
  }
  I.has_mamba = any_mamba, I.has_gdn = any_gdn;
  if (int64_t(I.layers.size()) != int64_t(spec.layers.size()))
    return invalid_argument("cuda decode: the model's blocks do not cover its cache layers");
  int64_t& ws2 = mem.workspace_bytes;
  if (any_mamba) {
    const int64_t HP = mc.n_heads * mc.head_dim, GN = mc.n_groups * mc.state_size;
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cx, B * HP, "Mamba2 x", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cB, B * GN, "Mamba2 B", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cC, B * GN, "Mamba2 C", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cdt, B * mc.n_heads, "Mamba2 dt", &ws2));
    if (replay)
      RSSM_RETURN_IF_ERROR(I.alloc(&I.mamba_scratch, oc::mamba2_replay_scratch_floats(int(B), 1, int(mc.n_heads),
                                                                                      int(mc.head_dim)),
                                   "Mamba2 replay scratch", &ws2));
  }
  if (any_gdn) {
    const int64_t K = gc.n_k_heads * gc.k_dim, V = gc.n_v_heads * gc.v_dim;
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gq, B * K, "GDN q", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gk, B * K, "GDN k", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gv, B * V, "GDN v", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gg, B * gc.n_v_heads, "GDN g", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gbeta, B * gc.n_v_heads, "GDN beta", &ws2));
  }
  if (any_attn) {
    const int64_t D = ac.head_dim, q_width = (ac.output_gate ? 2 : 1) * ac.n_heads * D, d_kv = ac.n_kv_heads * D;
    if (ac.qk_norm) {
      RSSM_RETURN_IF_ERROR(I.alloc(&I.aq, B * q_width, "attention q", &ws2));
      RSSM_RETURN_IF_ERROR(I.alloc(&I.ak, B * d_kv, "attention k", &ws2));
      RSSM_RETURN_IF_ERROR(I.alloc(&I.av, B * d_kv, "attention v", &ws2));
    }
    // Split the context (flash-decoding) only when the heads alone leave SMs idle.
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (B * ac.n_kv_heads < sms)
      RSSM_RETURN_IF_ERROR(I.alloc(&I.attn_scratch,
                                   oc::attention_decode_scratch_floats(int(B), int(ac.n_heads), int(D), int(o.max_context)),
                                   "attention scratch", &ws2));
    std::vector<int32_t> table(size_t(B * I.pages_per_seq));
    for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
    RSSM_RETURN_IF_ERROR(I.alloc(&I.page_table, int64_t(table.size()), "page table", &mem.kv_bytes));
    RSSM_CU(cudaMemcpy(I.page_table, table.data(), sizeof(int32_t) * table.size(), cudaMemcpyHostToDevice), "page table");
    for (LayerState& L : I.layers) L.kv.page_table = I.page_table;
    if (ac.rotary_dim > 0) {
      const std::vector<float> f = oc::rope_inv_freq(int(ac.rotary_dim), ac.rope_theta);
      RSSM_RETURN_IF_ERROR(I.alloc(&I.inv_freq, int64_t(f.size()), "RoPE frequencies", &ws2));
      RSSM_CU(cudaMemcpy(I.inv_freq, f.data(), sizeof(float) * f.size(), cudaMemcpyHostToDevice), "RoPE frequencies");
    }
  }
  RSSM_RETURN_IF_ERROR(dec->reset());
  return dec;
}

Status Decoder::reset() {
  Impl& I = *impl_;
  for (LayerState& L : I.layers) {
    if (L.state != nullptr) RSSM_CU(cudaMemsetAsync(L.state, 0, L.state_bytes, I.stream), "reset");
    if (L.window != nullptr) RSSM_CU(cudaMemsetAsync(L.window, 0, L.window_bytes, I.stream), "reset");
  }
  RSSM_CU(cudaStreamSynchronize(I.stream), "reset");
  pos_ = 0;
  I.m_count = 0, I.g_count = 0;
  return {};
}

Status Decoder::Impl::run_mamba2(const DeviceBlock& blk, LayerState& L, bool fold) {
  const ModelConfig& c = m.config();
  const Mamba2Config& mc = c.mamba;
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t HP = mc.n_heads * mc.head_dim, C = mc.conv_channels(), width = blk.in.n_out;
  const bool replay = opt.strategy == DecodeStrategy::kReplay;
  RSSM_CU(gemm.linear(xn, Hd, B, blk.in.w, width, Hd, blk.in.b, proj, width, false), "Mamba2 in_proj");
  oc::Conv1dArgs cv;
  cv.batch = B, cv.C = int(C), cv.K = int(mc.conv_width), cv.weight = blk.conv_w, cv.bias = blk.conv_b;
  cv.window = L.window, cv.slot = field(kSlot), cv.x = proj + HP, cv.ldx = width, cv.y = proj + HP, cv.ldy = width;
  RSSM_CU(oc::conv1d_step_cuda(cv, stream), "Mamba2 conv1d");
  oc::Mamba2AppendArgs ap;
  ap.rows = B, ap.H = int(mc.n_heads), ap.P = int(mc.head_dim), ap.G = int(mc.n_groups), ap.N = int(mc.state_size);
  ap.xbc = proj + HP, ap.ldxbc = width, ap.dt_raw = proj + HP + C, ap.lddt = width, ap.dt_bias = blk.dt_bias;
  ap.dt_min = mc.dt_min, ap.dt_max = mc.dt_max, ap.Cm = cC;
  ap.entry = replay ? field(kMEntry) : field(kSlot);
  ap.x = replay ? L.log_x : cx, ap.Bm = replay ? L.log_B : cB, ap.dt = replay ? L.log_dt : cdt;
  RSSM_CU(oc::mamba2_append_cuda(ap, stream), "Mamba2 append");
  oc::Mamba2DecodeArgs a;
  a.batch = B, a.H = int(mc.n_heads), a.P = int(mc.head_dim), a.N = int(mc.state_size), a.G = int(mc.n_groups), a.T = 1;
  a.A_log = blk.A_log, a.D = blk.D, a.dt_bias = blk.dt_bias, a.dt_min = mc.dt_min, a.dt_max = mc.dt_max;
  a.state = L.state, a.slot = field(kSlot), a.Cm = cC, a.y = y;
  if (!replay) {
    a.x = cx, a.Bm = cB, a.dt = cdt, a.out_slot = field(kSlot);
    RSSM_CU(oc::mamba2_step_cuda(a, stream), "Mamba2 step");
  } else {
    a.W = opt.window, a.n_log = field(kMLog), a.log_x = L.log_x, a.log_B = L.log_B, a.log_dt = L.log_dt;
    a.fold = fold ? field(kMFold) : nullptr, a.fold_slot = field(kSlot), a.max_fold = fold ? opt.window : 0;
    a.scratch = mamba_scratch;
    RSSM_CU(oc::mamba2_replay_cuda(a, stream), "Mamba2 replay");
  }
  RSSM_CU(oc::rmsnorm_gated_group_cuda(y, HP, proj, width, B, HP, HP / mc.n_groups, blk.norm_w, c.norm_eps, y, HP,
                                       stream),
          "Mamba2 gated norm");
  RSSM_CU(gemm.linear(y, HP, B, blk.out.w, Hd, HP, blk.out.b, d, Hd, false), "Mamba2 out_proj");
  return {};
}

Status Decoder::Impl::run_gdn(const DeviceBlock& blk, LayerState& L, bool fold) {
  const ModelConfig& c = m.config();
  const GdnConfig& g = c.gdn;
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t K = g.n_k_heads * g.k_dim, V = g.n_v_heads * g.v_dim, C = g.conv_channels(), width = blk.in.n_out;
  const bool replay = opt.strategy == DecodeStrategy::kReplay;
  RSSM_CU(gemm.linear(xn, Hd, B, blk.in.w, width, Hd, blk.in.b, proj, width, false), "GDN in_proj");
  oc::Conv1dArgs cv;
  cv.batch = B, cv.C = int(C), cv.K = int(g.conv_width), cv.weight = blk.conv_w, cv.bias = nullptr;
  cv.window = L.window, cv.slot = field(kSlot), cv.x = proj, cv.ldx = width, cv.y = proj, cv.ldy = width;
  RSSM_CU(oc::conv1d_step_cuda(cv, stream), "GDN conv1d");
  oc::GdnPrepareArgs pr;
  pr.rows = B, pr.Hk = int(g.n_k_heads), pr.Hv = int(g.n_v_heads), pr.dk = int(g.k_dim);
  pr.A_log = blk.A_log, pr.dt_bias = blk.dt_bias, pr.q = proj, pr.k = proj + K, pr.ldq = width, pr.ldk = width;
  pr.a = proj + C + V, pr.b = proj + C + V + g.n_v_heads, pr.lda = width, pr.ldb = width;
  pr.q_out = gq, pr.k_out = gk, pr.g = gg, pr.beta = gbeta;
  RSSM_CU(oc::gdn_prepare_cuda(pr, stream), "GDN prepare");
  oc::GdnAppendArgs ap;
  ap.rows = B, ap.Hk = int(g.n_k_heads), ap.Hv = int(g.n_v_heads), ap.dk = int(g.k_dim), ap.dv = int(g.v_dim);
  ap.v_in = proj + 2 * K, ap.ldv = width, ap.v = gv;
  if (replay) ap.entry = field(kGEntry), ap.k = gk, ap.g = gg, ap.log_k = L.log_k, ap.log_g = L.log_g;
  RSSM_CU(oc::gdn_append_cuda(ap, stream), "GDN append");
  oc::GdnDecodeArgs a;
  a.batch = B, a.Hk = int(g.n_k_heads), a.Hv = int(g.n_v_heads), a.dk = int(g.k_dim), a.dv = int(g.v_dim), a.T = 1;
  a.state = L.state, a.slot = field(kSlot), a.q = gq, a.v = gv, a.beta = gbeta, a.o = y;
  if (!replay) {
    a.k = gk, a.g = gg, a.out_slot = field(kSlot);
    RSSM_CU(oc::gdn_step_cuda(a, stream), "GDN step");
  } else {
    a.W = opt.window, a.n_log = field(kGLog), a.log_k = L.log_k, a.log_u = L.log_u, a.log_g = L.log_g;
    a.fold = fold ? field(kGFold) : nullptr, a.fold_slot = field(kSlot), a.max_fold = fold ? opt.window : 0;
    RSSM_CU(oc::gdn_replay_cuda(a, stream), "GDN replay");
    if (fold) {
      oc::GdnLogMoveArgs mv;
      mv.batch = B, mv.W = opt.window, mv.Hk = a.Hk, mv.Hv = a.Hv, mv.dk = a.dk, mv.dv = a.dv;
      // The fold left the new token's entry (whose u this step wrote) at
      // W−1; it becomes entry 0. kMoveCount is 1 only on steps whose GDN
      // log filled (step()), so a Mamba2-only fold moves nothing.
      mv.from = field(kMoveFrom), mv.count = field(kMoveCount);
      mv.log_k = L.log_k, mv.log_u = L.log_u, mv.log_g = L.log_g;
      RSSM_CU(oc::gdn_log_move_cuda(mv, stream), "GDN log move");
    }
  }
  RSSM_CU(oc::rmsnorm_then_gate_cuda(y, V, proj + C, width, B, g.n_v_heads, g.v_dim, blk.norm_w, c.norm_eps, y, V,
                                     stream),
          "GDN norm and gate");
  RSSM_CU(gemm.linear(y, V, B, blk.out.w, Hd, V, blk.out.b, d, Hd, false), "GDN out_proj");
  return {};
}

Status Decoder::Impl::run_attention(const DeviceBlock& blk, LayerState& L) {
  const ModelConfig& c = m.config();
  const AttentionConfig& ac = c.attn;
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t D = ac.head_dim, d_q = ac.n_heads * D, d_kv = ac.n_kv_heads * D;
  const int64_t head_stride = ac.output_gate ? 2 * D : D, q_width = ac.n_heads * head_stride;
  uint16_t *q, *k, *v;
  int64_t ldq, ldk;
  if (!ac.qk_norm) {  // one GEMM: q | k | v side by side
    const int64_t width = blk.in.n_out;
    RSSM_CU(gemm.linear(xn, Hd, B, blk.in.w, width, Hd, blk.in.b, proj, width, false), "attention qkv");
    q = proj, k = proj + q_width, v = proj + q_width + d_kv, ldq = ldk = width;
  } else {  // per-head norms want q and k each in their own rows
    const float* bq = blk.in.b;
    RSSM_CU(gemm.linear(xn, Hd, B, blk.in.w, q_width, Hd, bq, aq, q_width, false), "attention q");
    RSSM_CU(gemm.linear(xn, Hd, B, blk.in.w + q_width * Hd, d_kv, Hd, bq ? bq + q_width : nullptr, ak, d_kv, false),
            "attention k");
    RSSM_CU(gemm.linear(xn, Hd, B, blk.in.w + (q_width + d_kv) * Hd, d_kv, Hd, bq ? bq + q_width + d_kv : nullptr, av,
                        d_kv, false),
            "attention v");
    q = aq, k = ak, v = av, ldq = q_width, ldk = d_kv;
    RSSM_CU(oc::rmsnorm_cuda(q, head_stride, int64_t(B) * ac.n_heads, D, blk.q_norm, c.norm_eps, c.norm_unit_offset, q,
                             head_stride, stream),
            "q norm");
    RSSM_CU(oc::rmsnorm_cuda(k, D, int64_t(B) * ac.n_kv_heads, D, blk.k_norm, c.norm_eps, c.norm_unit_offset, k, D,
                             stream),
            "k norm");
  }
  if (ac.rotary_dim > 0) {
    RSSM_CU(oc::rope_cuda(q, ldq, head_stride, B, int(ac.n_heads), int(ac.rotary_dim), inv_freq, field(kPos), stream),
            "RoPE q");
    RSSM_CU(oc::rope_cuda(k, ldk, D, B, int(ac.n_kv_heads), int(ac.rotary_dim), inv_freq, field(kPos), stream),
            "RoPE k");
  }
  oc::KvAppendArgs ka;
  ka.batch = B, ka.width = int(d_kv), ka.k = k, ka.v = v, ka.ldk = ldk, ka.ldv = ac.qk_norm ? d_kv : ldk;
  ka.pos = field(kPos), ka.kv = L.kv;
  RSSM_CU(oc::kv_append_cuda(ka, stream), "KV append");
  oc::AttentionDecodeArgs at;
  at.batch = B, at.Hq = int(ac.n_heads), at.Hkv = int(ac.n_kv_heads), at.D = int(D);
  at.scale = 1.0f / std::sqrt(static_cast<float>(D));
  at.q = q, at.ldq = ldq, at.q_head_stride = head_stride;
  if (ac.output_gate) at.gate = q + D, at.ldg = ldq, at.g_head_stride = head_stride;
  at.out = y, at.ldo = d_q, at.kv = L.kv, at.seq_len = field(kSeqLen), at.max_seq_len = int(opt.max_context);
  at.scratch = attn_scratch;
  RSSM_CU(oc::attention_decode_cuda(at, stream), "attention");
  RSSM_CU(gemm.linear(y, d_q, B, blk.out.w, Hd, d_q, blk.out.b, d, Hd, false), "attention o_proj");
  return {};
}

Status Decoder::Impl::run_mlp(const DeviceBlock& blk) {
  const ModelConfig& c = m.config();
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t I = c.mlp.intermediate, width = blk.in.n_out;
  RSSM_CU(gemm.linear(xn, Hd, B, blk.in.w, width, Hd, blk.in.b, proj, width, false), "MLP up");
  uint16_t* act = c.mlp.gated ? proj + I : proj;  // act(gate) ⊙ up lands on up
  RSSM_CU(oc::mlp_activation_cuda(c.mlp.act, c.mlp.gated ? proj : nullptr, width, act, width, B, I, act, width, stream),
          "MLP activation");
  RSSM_CU(gemm.linear(act, width, B, blk.out.w, Hd, I, blk.out.b, d, Hd, false), "MLP down");
  return {};
}

Status Decoder::Impl::enqueue(bool fold) {
  const ModelConfig& c = m.config();
  const int B = int(opt.batch);
  const int64_t Hd = c.hidden_size, V = c.vocab_size;
  RSSM_CU(cudaMemcpyAsync(plan, plan_host, sizeof(int32_t) * kPlanFields * B, cudaMemcpyHostToDevice, stream), "plan");
  RSSM_CU(oc::embedding_cuda(field(kTokens), B, m.embed(), V, Hd, Hd, h, Hd, stream), "embedding");
  const uint16_t* pending = nullptr;  // the previous block's output, added to h by the next norm
  for (const DeviceBlock& blk : m.blocks()) {
    RSSM_CU(oc::residual_rmsnorm_cuda(h, Hd, pending, Hd, B, Hd, blk.norm, c.norm_eps, c.norm_unit_offset, xn, Hd,
                                      stream),
            "block norm");
    switch (blk.kind) {
      case BlockKind::kMamba2: RSSM_RETURN_IF_ERROR(run_mamba2(blk, layers[size_t(blk.cache_layer)], fold)); break;
      case BlockKind::kGatedDeltaNet: RSSM_RETURN_IF_ERROR(run_gdn(blk, layers[size_t(blk.cache_layer)], fold)); break;
      case BlockKind::kAttention: RSSM_RETURN_IF_ERROR(run_attention(blk, layers[size_t(blk.cache_layer)])); break;
      case BlockKind::kMlp: RSSM_RETURN_IF_ERROR(run_mlp(blk)); break;
    }
    pending = d;
  }
  RSSM_CU(oc::residual_rmsnorm_cuda(h, Hd, pending, Hd, B, Hd, m.final_norm(), c.norm_eps, c.norm_unit_offset, xn, Hd,
                                    stream),
          "final norm");
  const DeviceLinear& lm = m.lm_head();
  RSSM_CU(gemm.linear(xn, Hd, B, lm.w, V, Hd, lm.b, logits, V, true), "LM head");
  RSSM_CU(oc::argmax_cuda(logits, V, B, V, next, stream), "argmax");
  RSSM_CU(cudaMemcpyAsync(next_host, next, sizeof(int32_t) * B, cudaMemcpyDeviceToHost, stream), "next tokens");
  return {};
}

Status Decoder::step(std::span<const int32_t> tokens, std::span<int32_t> next, float* logits) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch, V = I.m.config().vocab_size;
  if (int64_t(tokens.size()) != B || int64_t(next.size()) != B)
    return invalid_argument("cuda decode: a step takes one token per sequence (" + std::to_string(B) + "), got " +
                            std::to_string(tokens.size()));
  if (pos_ >= opt_.max_context)
    return out_of_budget("cuda decode: the context is full (" + std::to_string(opt_.max_context) + " positions)");
  for (int32_t t : tokens)
    if (t < 0 || t >= V)
      return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(V) + ")");
  const bool replay = opt_.strategy == DecodeStrategy::kReplay;
  const int W = opt_.window;
  const bool m_full = replay && I.has_mamba && I.m_count + 1 == W;
  const bool g_full = replay && I.has_gdn && I.g_count + 1 == W;
  const bool fold = m_full || g_full;
  int32_t* p = I.plan_host;
  for (int64_t b = 0; b < B; ++b) {
    p[kTokens * B + b] = tokens[size_t(b)];
    p[kPos * B + b] = int32_t(pos_);
    p[kSeqLen * B + b] = int32_t(pos_ + 1);
    p[kMEntry * B + b] = int32_t(b * W + I.m_count);
    p[kMLog * B + b] = I.m_count + 1;
    p[kMFold * B + b] = m_full ? W : 0;
    p[kGEntry * B + b] = int32_t(b * W + I.g_count);
    p[kGLog * B + b] = I.g_count + 1;
    p[kGFold * B + b] = g_full ? W - 1 : 0;
    p[kMoveCount * B + b] = g_full ? 1 : 0;
  }
  // The first step of each kind runs eagerly (cuBLAS settles its choices
  // and workspace there); the second captures the graph every later one replays.
  const int kind = fold ? 1 : 0;
  if (!opt_.graphs || !I.ran_eager[kind]) {
    RSSM_RETURN_IF_ERROR(I.enqueue(fold));
    I.ran_eager[kind] = true;
  } else {
    if (I.graph[kind] == nullptr) {
      RSSM_CU(cudaStreamBeginCapture(I.stream, cudaStreamCaptureModeThreadLocal), "graph capture");
      const Status s = I.enqueue(fold);
      cudaGraph_t g = nullptr;
      const cudaError_t e = cudaStreamEndCapture(I.stream, &g);
      RSSM_RETURN_IF_ERROR(s);
      RSSM_CU(e, "graph capture");
      const cudaError_t ie = cudaGraphInstantiate(&I.graph[kind], g, 0);
      cudaGraphDestroy(g);
      RSSM_CU(ie, "graph instantiate");
    }
    RSSM_CU(cudaGraphLaunch(I.graph[kind], I.stream), "graph launch");
  }
  if (logits != nullptr)
    RSSM_CU(cudaMemcpyAsync(logits, I.logits, sizeof(float) * size_t(B * V), cudaMemcpyDeviceToHost, I.stream),
            "logits");
  RSSM_CU(cudaStreamSynchronize(I.stream), "step");
  std::copy_n(I.next_host, B, next.begin());
  ++pos_;
  if (fold) ++folds_;
  if (replay) {
    I.m_count = m_full ? 0 : I.m_count + 1;
    I.g_count = g_full ? 1 : I.g_count + 1;
  }
  return {};
}

}  // namespace replayssm::cuda
