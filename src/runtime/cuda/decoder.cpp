// Decoder (see decoder.h): buffers, the per-step plan, the launch sequence
// of one step and its CUDA graphs.
#include "runtime/cuda/decoder.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/cuda/attention_decode.h"
#include "ops/cuda/attention_prefill.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/gdn_decode.h"
#include "ops/cuda/gemm.h"
#include "ops/cuda/mamba2_decode.h"
#include "ops/cuda/norm.h"
#include "ops/cuda/rope.h"
#include "ops/cuda/sampling.h"
#include "ops/cuda/ssm_append.h"
#include "ops/cuda/seq_copy.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/slot_pool.h"

namespace replayssm::cuda {

namespace oc = replayssm::ops::cuda;

const char* decode_strategy_name(DecodeStrategy s) {
  return s == DecodeStrategy::kStandard ? "standard" : "replay";
}

namespace {

// The plan: one int32 array per field in one buffer, each with room for
// every row of a step (batch × the most tokens per sequence) plus one. Per
// row r = b·T + t: kTokens, kRowPos, kRowSeq, kMEntry, kGEntry, kOutSlot.
// Per sequence b: the rest (kCuRows and kCommitRows have B + 1 entries).
enum PlanField {
  kTokens, kRowPos, kRowSeq,      // the step's rows
  kSeqPos, kSeqLen, kCuRows,      // per sequence: first new position, rows attended, rows b·T
  kMEntry, kMLog, kMFold,         // Mamba2 layers: log entry (standard: compact row) of each new row; entries; fold
  kGEntry, kGLog, kGFold,         // Gated DeltaNet layers, likewise
  kMSlot, kGSlot,                 // state or checkpoint slot each sequence reads (Mamba2, GDN layers)
  kMFoldSlot, kGFoldSlot,         // where a fold writes (replay: a fresh slot where others read the old one)
  kOutSlot, kWinSlot,             // where each row's state goes (standard); conv window = b
  kMMoveFrom, kMMoveCount,        // the post-fold log moves (replay)
  kGMoveFrom, kGMoveCount,
  kCommitRows, kCommitCount,      // the last verify's rows b·T and accepted count, rolled into the windows
  // reorder(): per sequence b, the source sequence and what to copy from it
  // (0 where b keeps its own): 1, K/V rows, Mamba2 / GDN log entries; the
  // standard layout's state slots from and to.
  kForkSrc, kForkDst, kForkOne, kForkKv, kForkMLog, kForkGLog, kForkStFrom, kForkStTo,
  kPlanFields
};

#define RSSM_CU(expr, what) RSSM_RETURN_IF_ERROR(cuda_status((expr), "cuda decode", (what)))

}  // namespace

// Buffers of one stateful layer (CacheSpec order).
struct LayerState {
  float* state = nullptr;       // (B, heads, rows, cols): the state (standard) or checkpoint (replay)
  uint16_t* window = nullptr;   // (B, K−1, C) conv window
  uint16_t* log_x = nullptr;    // Mamba2 log (B, W, H·P) (standard: the shared chunk log)
  uint16_t* log_B = nullptr;    //            (B, W, G·N)
  float* log_dt = nullptr;      //            (B, W, H)
  uint16_t* log_k = nullptr;    // GDN log    (B, W, Hk·dk)
  float* log_u = nullptr;       //            (B, W, Hv·dv)
  float* log_g = nullptr;       //            (B, W, Hv)
  uint16_t* pending = nullptr;  // speculation: a verify's pre-conv rows (B·T, C), until accept
  oc::PagedKv kv;               // attention
  uint16_t* kv_rows = nullptr;  // sequence b's K/V rows are a block of kv_block rows of kv.row_stride
  int64_t kv_block = 0;
  size_t state_bytes = 0;       // what reset() zeroes at `state` and `window`
  size_t window_bytes = 0;
  int64_t slot_bytes = 0, window_seq_bytes = 0;  // one slot's state, one sequence's window
  int64_t conv_channels = 0, log_row[3] = {};    // the log arrays' entry bytes (x|B|dt or k|u|g)
};

struct Decoder::Impl {
  const DeviceModel& m;
  DecoderOptions opt;
  cudaStream_t stream = nullptr;
  std::unique_ptr<oc::Gemm> gemm = std::make_unique<oc::Gemm>();  // released before the stream it is bound to
  std::vector<void*> allocs;
  std::vector<LayerState> layers;
  int32_t* plan = nullptr;        // device
  int32_t* plan_host = nullptr;   // pinned
  int32_t* next = nullptr;        // device (rows of logits)
  int32_t* next_host = nullptr;   // pinned
  // Activations, batch × max_chunk rows each.
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
  float* logits = nullptr;        // (B or B·max_chunk with all_logits, vocab) fp32
  uint16_t* xconv = nullptr;      // chunked steps: post-conv rows (R, widest conv)
  // Standard layout, chunked steps: one log of max_chunk entries shared by
  // every SSM layer (each layer folds it before the next one runs).
  uint16_t *s_log_x = nullptr, *s_log_B = nullptr;
  float* s_log_dt = nullptr;
  float* inv_freq = nullptr;
  int32_t* page_table = nullptr;  // (B, pages per sequence): sequence b owns pages b·n .. b·n + n − 1
  int pages_per_seq = 0;
  std::map<int, cudaGraphExec_t> graphs;  // graph_key(T, fold, verify, commit) → the captured step
  std::set<int> ran_eager;
  int64_t rows_cap = 0;           // rows a step may have: batch × max(max_chunk, spec_tokens)
  int slots_per_seq = 1;          // standard layout: spec_tokens + 1 with speculation, ≥ 2 with forks
  SlotPool m_pool, g_pool;        // replay: checkpoint slots of the Mamba2 / GDN layers (2 × batch with forks)
  void* fork_temp = nullptr;      // reorder()'s staging: the largest per-layer array a fork copies
  int64_t last_rows = 0;          // logits rows the last step left
  int32_t* top_ids = nullptr;     // top_logprobs(): rows × k, grown on demand
  double* top_lp = nullptr;
  int64_t top_cap = 0;
  int64_t mamba_log_w = 0, gdn_log_w = 0;  // one sequence's log bytes, all layers
  int64_t pending_w = 0;          // one sequence's verify pre-conv rows, all layers
  // Per sequence. Replay: committed log entries (Mamba2, GDN layers);
  // standard: which of its slots holds the state.
  std::vector<int> m_count, g_count, cur;
  // The verify awaiting accept(): whose logs folded their prefix (replay).
  std::vector<char> m_folded, g_folded;
  bool commit_pending = false;    // the next launch first rolls the windows over accepted rows
  int64_t mamba_state_w = 0, gdn_state_w = 0, window_w = 0;  // one sequence's state and window bytes, all layers
  bool has_mamba = false, has_gdn = false;  // a kind without layers never folds

  Impl(const DeviceModel& model, const DecoderOptions& o) : m(model), opt(o) {}
  ~Impl() {
    for (auto& [key, g] : graphs) cudaGraphExecDestroy(g);
    cudaFree(top_ids), cudaFree(top_lp);
    gemm.reset();
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

  int64_t field_len() const { return rows_cap + 1; }
  int32_t* field(PlanField f) const { return plan + int64_t(f) * field_len(); }
  int32_t* host_field(PlanField f) const { return plan_host + int64_t(f) * field_len(); }

  // A step of T tokens per sequence (rows = batch·T).
  Status enqueue(int T, bool fold, bool verify, bool commit);
  Status run_mamba2(const DeviceBlock& blk, LayerState& L, int T, bool fold, bool verify);
  Status run_gdn(const DeviceBlock& blk, LayerState& L, int T, bool fold, bool verify);
  Status run_attention(const DeviceBlock& blk, LayerState& L, int T);
  Status run_mlp(const DeviceBlock& blk, int T);
  // Conv1d over the projection's conv channels at column `off`: in place for
  // a one-token step; a chunk writes xconv (the prefill kernel must not
  // alias). *out, *ldo: where the post-conv rows are.
  Status run_conv(const DeviceBlock& blk, LayerState& L, int T, bool verify, int64_t C, int64_t K, int64_t off,
                  int64_t width, const uint16_t** out, int64_t* ldo);
  // The accepted rows of the last verify into every conv window.
  Status commit_windows();
};

namespace {
int graph_key(int T, bool fold, bool verify, bool commit) { return T * 8 + fold * 4 + verify * 2 + commit; }
}  // namespace

Decoder::~Decoder() = default;

const DeviceModel& Decoder::model() const { return impl_->m; }

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
  // The model against the kernels' limits, once, naming the config field.
  bool has_mamba = false, has_gdn = false, has_attn = false;
  for (BlockKind k : c.blocks) {
    has_mamba |= k == BlockKind::kMamba2, has_gdn |= k == BlockKind::kGatedDeltaNet, has_attn |= k == BlockKind::kAttention;
  }
  auto over = [&](const std::string& field, int64_t v, int64_t hi) {
    return unsupported("cuda decode: " + c.dir + ": " + field + " = " + std::to_string(v) + " is over the CUDA kernels' limit " +
                       std::to_string(hi));
  };
  if (has_mamba && c.mamba.state_size > 256) return over("ssm_state_size", c.mamba.state_size, 256);
  if (has_mamba && c.mamba.conv_width > oc::kConvMaxK) return over("conv_kernel", c.mamba.conv_width, oc::kConvMaxK);
  if (has_gdn && c.gdn.conv_width > oc::kConvMaxK) return over("linear_conv_kernel_dim", c.gdn.conv_width, oc::kConvMaxK);
  if (has_gdn && o.strategy == DecodeStrategy::kReplay && c.gdn.v_dim > 256)
    return over("linear_value_head_dim", c.gdn.v_dim, 256);
  if (has_gdn && o.strategy == DecodeStrategy::kStandard && c.gdn.k_dim > 512)
    return over("linear_key_head_dim", c.gdn.k_dim, 512);
  if (has_attn && c.attn.head_dim > oc::kAttnMaxD) return over("head_dim", c.attn.head_dim, oc::kAttnMaxD);
  if (has_attn && c.attn.n_heads / c.attn.n_kv_heads > oc::kAttnMaxRep)
    return over("num_attention_heads / num_key_value_heads", c.attn.n_heads / c.attn.n_kv_heads, oc::kAttnMaxRep);
  // GDN's standard layout takes one token per step (max_chunk()): no chunk rows to size for.
  const int chunk_limit =
      has_gdn && o.strategy == DecodeStrategy::kStandard
          ? 1
          : std::min({oc::kMamba2MaxT, oc::kGdnMaxT, o.strategy == DecodeStrategy::kReplay ? o.window - 1 : oc::kMamba2MaxT});
  if (o.max_chunk < 0 || o.max_chunk > chunk_limit)
    return invalid_argument("cuda decode: max_chunk " + std::to_string(o.max_chunk) + " out of range [1, " +
                            std::to_string(chunk_limit) + "] (0: the most allowed)" +
                            (o.strategy == DecodeStrategy::kReplay ? " (a chunk must fit the window with room)" : ""));

  // A verify leaves at most spec_tokens new entries that a later fold may
  // have to move to the front and still fit the next verify beside.
  const int spec_limit = std::min({oc::kMamba2MaxT, oc::kGdnMaxT, o.strategy == DecodeStrategy::kReplay ? o.window / 2 : 8});
  if (o.spec_tokens != 0 && (o.spec_tokens < 2 || o.spec_tokens > spec_limit))
    return invalid_argument("cuda decode: spec_tokens " + std::to_string(o.spec_tokens) + " out of range [2, " +
                            std::to_string(spec_limit) + "] (0: no speculation)" +
                            (o.strategy == DecodeStrategy::kReplay ? " (a verify must fit half the window)" : ""));

  std::unique_ptr<Decoder> dec(new Decoder());
  dec->opt_ = o;
  if (dec->opt_.max_chunk == 0) dec->opt_.max_chunk = chunk_limit;
  dec->impl_ = std::make_unique<Impl>(model, dec->opt_);
  Impl& I = *dec->impl_;
  DecoderMemory& mem = dec->mem_;
  const int chunk = dec->opt_.max_chunk, spec = o.spec_tokens;
  const int64_t B = o.batch, W = o.window, Hd = c.hidden_size;
  const bool replay = o.strategy == DecodeStrategy::kReplay;
  I.rows_cap = B * std::max(chunk, spec);
  I.slots_per_seq = replay ? 1 : std::max(spec + 1, o.forks ? 2 : 1);
  // Replay: a checkpoint slot per sequence, or a pool of twice that which
  // forks share (every sequence in use, and as many folds into fresh ones).
  const int64_t R = I.rows_cap, S = replay && o.forks ? 2 : I.slots_per_seq;
  I.m_pool = SlotPool(B, B * S), I.g_pool = SlotPool(B, B * S);
  dec->pos_.assign(size_t(B), 0);
  I.m_count.assign(size_t(B), 0), I.g_count.assign(size_t(B), 0), I.cur.assign(size_t(B), 0);
  I.m_folded.assign(size_t(B), 0), I.g_folded.assign(size_t(B), 0);
  RSSM_CU(cudaStreamCreateWithFlags(&I.stream, cudaStreamNonBlocking), "stream");
  RSSM_CU(I.gemm->init(I.stream), "cuBLAS handle and workspace");
  mem.workspace_bytes += 32 << 20;

  const int64_t logit_rows = o.all_logits || spec > 0 ? R : B;
  RSSM_CU(cudaMallocHost(reinterpret_cast<void**>(&I.plan_host), sizeof(int32_t) * kPlanFields * I.field_len()),
          "pinned plan");
  RSSM_CU(cudaMallocHost(reinterpret_cast<void**>(&I.next_host), sizeof(int32_t) * logit_rows), "pinned tokens");
  std::memset(I.plan_host, 0, sizeof(int32_t) * kPlanFields * I.field_len());
  int64_t& ws = mem.workspace_bytes;
  RSSM_RETURN_IF_ERROR(I.alloc(&I.plan, kPlanFields * I.field_len(), "the step plan", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.next, logit_rows, "next tokens", &ws));

  // The widest activation each buffer must hold, over the blocks.
  int64_t widest_in = 0, widest_y = 0;
  for (const DeviceBlock& blk : model.blocks()) {
    widest_in = std::max(widest_in, blk.in.n_out);
    widest_y = std::max(widest_y, blk.out.n_in);
  }
  RSSM_RETURN_IF_ERROR(I.alloc(&I.h, R * Hd, "residual stream", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.xn, R * Hd, "normed input", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.d, R * Hd, "block output", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.proj, R * widest_in, "input projection", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.y, R * widest_y, "mixer output", &ws));
  RSSM_RETURN_IF_ERROR(I.alloc(&I.logits, logit_rows * c.vocab_size, "logits", &ws));

  // Per stateful layer.
  const CacheSpec cspec = cache_spec(c);
  const Mamba2Config& mc = c.mamba;
  const GdnConfig& gc = c.gdn;
  const AttentionConfig& ac = c.attn;
  I.pages_per_seq = int((o.max_context + o.kv_page - 1) / o.kv_page);
  bool any_mamba = false, any_gdn = false, any_attn = false;
  for (const DeviceBlock& blk : model.blocks()) {
    if (blk.cache_layer < 0) continue;
    if (I.layers.size() <= size_t(blk.cache_layer)) I.layers.resize(size_t(blk.cache_layer) + 1);
    LayerState& L = I.layers[size_t(blk.cache_layer)];
    const std::string what = "layer " + std::to_string(blk.cache_layer);
    int64_t& st = mem.state_bytes;
    if (blk.kind == BlockKind::kMamba2) {
      any_mamba = true;
      const int64_t C = mc.conv_channels(), HP = mc.n_heads * mc.head_dim, GN = mc.n_groups * mc.state_size;
      RSSM_RETURN_IF_ERROR(
          I.alloc(&L.state, B * S * HP * mc.state_size, what + (replay ? " checkpoints" : " states"), &st));
      RSSM_RETURN_IF_ERROR(I.alloc(&L.window, B * (mc.conv_width - 1) * C, what + " conv windows", &st));
      L.state_bytes = size_t(B * S * HP * mc.state_size) * 4, L.window_bytes = size_t(B * (mc.conv_width - 1) * C) * 2;
      I.mamba_state_w += HP * mc.state_size * 4, I.window_w += (mc.conv_width - 1) * C * 2;
      if (spec > 0) RSSM_RETURN_IF_ERROR(I.alloc(&L.pending, B * spec * C, what + " verify conv rows", &st));
      I.pending_w += spec > 0 ? spec * C * 2 : 0;
      L.slot_bytes = HP * mc.state_size * 4, L.window_seq_bytes = (mc.conv_width - 1) * C * 2, L.conv_channels = C;
      L.log_row[0] = HP * 2, L.log_row[1] = GN * 2, L.log_row[2] = mc.n_heads * 4;
      if (replay) {
        I.mamba_log_w += W * (HP * 2 + GN * 2 + mc.n_heads * 4);
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_x, B * W * HP, what + " log x", &st));
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_B, B * W * GN, what + " log B", &st));
        RSSM_RETURN_IF_ERROR(I.alloc(&L.log_dt, B * W * mc.n_heads, what + " log dt", &st));
      }
    } else if (blk.kind == BlockKind::kGatedDeltaNet) {
      any_gdn = true;
      const int64_t C = gc.conv_channels(), K = gc.n_k_heads * gc.k_dim, V = gc.n_v_heads * gc.v_dim;
      RSSM_RETURN_IF_ERROR(I.alloc(&L.state, B * S * gc.n_v_heads * gc.k_dim * gc.v_dim, what + " states", &st));
      RSSM_RETURN_IF_ERROR(I.alloc(&L.window, B * (gc.conv_width - 1) * C, what + " conv windows", &st));
      if (spec > 0) RSSM_RETURN_IF_ERROR(I.alloc(&L.pending, B * spec * C, what + " verify conv rows", &st));
      I.pending_w += spec > 0 ? spec * C * 2 : 0;
      L.state_bytes = size_t(B * S * gc.n_v_heads * gc.k_dim * gc.v_dim) * 4;
      L.slot_bytes = gc.n_v_heads * gc.k_dim * gc.v_dim * 4, L.window_seq_bytes = (gc.conv_width - 1) * C * 2;
      L.conv_channels = C, L.log_row[0] = K * 2, L.log_row[1] = V * 4, L.log_row[2] = gc.n_v_heads * 4;
      I.gdn_state_w += gc.n_v_heads * gc.k_dim * gc.v_dim * 4, I.window_w += (gc.conv_width - 1) * C * 2;
      L.window_bytes = size_t(B * (gc.conv_width - 1) * C) * 2;
      if (replay) {
        I.gdn_log_w += W * (K * 2 + V * 4 + gc.n_v_heads * 4);
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
      L.kv_rows = rows, L.kv_block = int64_t(I.pages_per_seq) * o.kv_page;
    }
  }
  I.has_mamba = any_mamba, I.has_gdn = any_gdn;
  if (o.forks) {  // reorder() stages the largest per-layer array it copies through here
    int64_t widest = 0;
    for (const LayerState& L : I.layers) {
      widest = std::max({widest, L.window_seq_bytes, L.kv_block * L.kv.row_stride * 2});
      if (replay) widest = std::max(widest, W * std::max({L.log_row[0], L.log_row[1], L.log_row[2]}));
    }
    uint8_t* t = nullptr;
    RSSM_RETURN_IF_ERROR(I.alloc(&t, B * widest, "fork staging", &mem.workspace_bytes));
    I.fork_temp = t;
  }
  if (int64_t(I.layers.size()) != int64_t(cspec.layers.size()))
    return invalid_argument("cuda decode: the model's blocks do not cover its cache layers");
  int64_t& ws2 = mem.workspace_bytes;
  if (any_mamba) {
    const int64_t HP = mc.n_heads * mc.head_dim, GN = mc.n_groups * mc.state_size;
    // x, B, dt compact only for the standard layout's step kernel (chunks
    // and replay append to a log): a row per sequence, or per verify row.
    // C goes to every kernel.
    const int64_t compact = replay ? B : B * std::max(spec, 1);
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cx, compact * HP, "Mamba2 x", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cB, compact * GN, "Mamba2 B", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cC, R * GN, "Mamba2 C", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cdt, compact * mc.n_heads, "Mamba2 dt", &ws2));
    if (replay || chunk > 1)
      RSSM_RETURN_IF_ERROR(I.alloc(&I.mamba_scratch,
                                   oc::mamba2_replay_scratch_floats(int(B), int(R / B), int(mc.n_heads),
                                                                    int(mc.head_dim)),
                                   "Mamba2 replay scratch", &ws2));
    if (!replay && chunk > 1) {  // the standard layout's chunks fold through a shared log
      RSSM_RETURN_IF_ERROR(I.alloc(&I.s_log_x, B * chunk * HP, "Mamba2 chunk log x", &ws2));
      RSSM_RETURN_IF_ERROR(I.alloc(&I.s_log_B, B * chunk * GN, "Mamba2 chunk log B", &ws2));
      RSSM_RETURN_IF_ERROR(I.alloc(&I.s_log_dt, B * chunk * mc.n_heads, "Mamba2 chunk log dt", &ws2));
    }
  }
  if (R > B)
    RSSM_RETURN_IF_ERROR(I.alloc(&I.xconv, R * std::max(any_mamba ? mc.conv_channels() : 0,
                                                       any_gdn ? gc.conv_channels() : 0),
                                 "chunk conv output", &ws2));
  if (any_gdn) {
    const int64_t K = gc.n_k_heads * gc.k_dim, V = gc.n_v_heads * gc.v_dim;
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gq, R * K, "GDN q", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gk, R * K, "GDN k", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gv, R * V, "GDN v", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gg, R * gc.n_v_heads, "GDN g", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.gbeta, R * gc.n_v_heads, "GDN beta", &ws2));
  }
  if (any_attn) {
    const int64_t D = ac.head_dim, q_width = (ac.output_gate ? 2 : 1) * ac.n_heads * D, d_kv = ac.n_kv_heads * D;
    if (ac.qk_norm) {
      RSSM_RETURN_IF_ERROR(I.alloc(&I.aq, R * q_width, "attention q", &ws2));
      RSSM_RETURN_IF_ERROR(I.alloc(&I.ak, R * d_kv, "attention k", &ws2));
      RSSM_RETURN_IF_ERROR(I.alloc(&I.av, R * d_kv, "attention v", &ws2));
    }
    // Split the context (flash-decoding) only when the heads alone leave SMs idle.
    int sms = 0, dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      sms = 132;  // an H100/H200's count; only decides whether to split the context
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
  // The page lists, page table and RoPE frequencies went up on the legacy
  // stream, which the decoder's non-blocking stream does not wait for.
  RSSM_CU(cudaDeviceSynchronize(), "setup uploads");
  RSSM_RETURN_IF_ERROR(dec->reset());
  return dec;
}

Status Decoder::logits_row(int64_t row, std::span<float> out) {
  Impl& I = *impl_;
  const int64_t V = I.m.config().vocab_size;
  if (row < 0 || row >= I.last_rows)
    return invalid_argument("cuda decode: logits row " + std::to_string(row) + " out of range [0, " +
                            std::to_string(I.last_rows) + ")");
  if (int64_t(out.size()) != V)
    return invalid_argument("cuda decode: a logits row is " + std::to_string(V) + " floats, got room for " +
                            std::to_string(out.size()));
  RSSM_CU(cudaMemcpyAsync(out.data(), I.logits + row * V, sizeof(float) * size_t(V), cudaMemcpyDeviceToHost, I.stream),
          "logits row");
  RSSM_CU(cudaStreamSynchronize(I.stream), "logits row");
  return {};
}

Status Decoder::top_logprobs(int k, std::span<int32_t> ids, std::span<double> lp) {
  Impl& I = *impl_;
  const int64_t V = I.m.config().vocab_size, rows = I.last_rows;
  if (rows == 0) return invalid_argument("cuda decode: top_logprobs before any step");
  if (k < 1 || k > std::min<int64_t>(V, oc::kTopLogprobsMaxK))
    return invalid_argument("cuda decode: top_logprobs k = " + std::to_string(k) + " out of range [1, " +
                            std::to_string(std::min<int64_t>(V, oc::kTopLogprobsMaxK)) + "]");
  if (int64_t(ids.size()) != rows * k || int64_t(lp.size()) != rows * k)
    return invalid_argument("cuda decode: top_logprobs fills " + std::to_string(rows * k) + " entries, got room for " +
                            std::to_string(std::min(ids.size(), lp.size())));
  if (rows * k > I.top_cap) {  // outside any capture: this runs eagerly
    cudaFree(I.top_ids), cudaFree(I.top_lp);
    I.top_ids = nullptr, I.top_lp = nullptr, I.top_cap = 0;
    RSSM_CU(cudaMalloc(reinterpret_cast<void**>(&I.top_ids), sizeof(int32_t) * size_t(rows * k)), "top_logprobs");
    RSSM_CU(cudaMalloc(reinterpret_cast<void**>(&I.top_lp), sizeof(double) * size_t(rows * k)), "top_logprobs");
    I.top_cap = rows * k;
  }
  RSSM_CU(oc::top_logprobs_cuda(I.logits, V, rows, V, k, I.top_ids, I.top_lp, I.stream), "top_logprobs");
  RSSM_CU(cudaMemcpyAsync(ids.data(), I.top_ids, sizeof(int32_t) * size_t(rows * k), cudaMemcpyDeviceToHost, I.stream),
          "top_logprobs");
  RSSM_CU(cudaMemcpyAsync(lp.data(), I.top_lp, sizeof(double) * size_t(rows * k), cudaMemcpyDeviceToHost, I.stream),
          "top_logprobs");
  RSSM_CU(cudaStreamSynchronize(I.stream), "top_logprobs");
  return {};
}

Status Decoder::reorder(std::span<const int32_t> parent) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch;
  if (!opt_.forks) return invalid_argument("cuda decode: reorder needs a decoder created with forks");
  if (poisoned_)
    return invalid_argument("cuda decode: an earlier step failed part-way; the states are undefined until reset()");
  if (verify_T_ != 0) return invalid_argument("cuda decode: the last verify awaits accept()");
  if (int64_t(parent.size()) != B)
    return invalid_argument("cuda decode: reorder takes a parent per sequence (" + std::to_string(B) + "), got " +
                            std::to_string(parent.size()));
  for (int64_t b = 0; b < B; ++b)
    if (parent[size_t(b)] < 0 || parent[size_t(b)] >= B)
      return invalid_argument("cuda decode: sequence " + std::to_string(b) + "'s parent " +
                              std::to_string(parent[size_t(b)]) + " is out of range [0, " + std::to_string(B) + ")");
  const bool replay = opt_.strategy == DecodeStrategy::kReplay;
  const int S = I.slots_per_seq;
  int64_t moved = 0, max_kv = 0, max_m = 0, max_g = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int32_t p = parent[size_t(b)];
    const bool mv = p != b;
    moved += mv;
    I.host_field(kForkSrc)[b] = p, I.host_field(kForkDst)[b] = int32_t(b), I.host_field(kForkOne)[b] = mv;
    I.host_field(kForkKv)[b] = mv ? int32_t(pos_[size_t(p)]) : 0;
    I.host_field(kForkMLog)[b] = mv ? I.m_count[size_t(p)] : 0;
    I.host_field(kForkGLog)[b] = mv ? I.g_count[size_t(p)] : 0;
    I.host_field(kForkStFrom)[b] = int32_t(p * S + I.cur[size_t(p)]);
    I.host_field(kForkStTo)[b] = int32_t(b * S + (I.cur[size_t(b)] + 1) % S);
    if (mv) max_kv = std::max(max_kv, pos_[size_t(p)]), max_m = std::max<int64_t>(max_m, I.m_count[size_t(p)]),
            max_g = std::max<int64_t>(max_g, I.g_count[size_t(p)]);
  }
  if (moved == 0) return {};
  // A failure from here on leaves sequences part-copied.
  poisoned_ = true;
  RSSM_CU(cudaMemcpyAsync(I.plan, I.plan_host, sizeof(int32_t) * kPlanFields * I.field_len(), cudaMemcpyHostToDevice,
                          I.stream),
          "fork plan");
  if (I.commit_pending) {  // the windows take an accepted verify's rows before they are copied
    RSSM_RETURN_IF_ERROR(I.commit_windows());
    I.commit_pending = false;
  }
  auto copy = [&](void* array, int64_t block, int64_t row, PlanField rows, int64_t max_rows, const char* what,
                  PlanField src = kForkSrc, PlanField dst = kForkDst, bool direct = false) -> Status {
    if (array == nullptr || max_rows == 0) return {};
    oc::SeqCopyArgs a;
    a.batch = int(B), a.array = array, a.block_bytes = block, a.row_bytes = row, a.max_rows = int(max_rows);
    a.src = I.field(src), a.dst = I.field(dst), a.rows = I.field(rows), a.temp = I.fork_temp, a.direct = direct;
    RSSM_CU(oc::seq_copy_cuda(a, I.stream), what);
    return {};
  };
  const int64_t W = opt_.window;
  for (LayerState& L : I.layers) {
    if (L.kv_rows != nullptr) {
      RSSM_RETURN_IF_ERROR(copy(L.kv_rows, L.kv_block * L.kv.row_stride * 2, L.kv.row_stride * 2, kForkKv, max_kv,
                                "fork K/V"));
      continue;
    }
    if (L.window_seq_bytes > 0)
      RSSM_RETURN_IF_ERROR(copy(L.window, L.window_seq_bytes, L.window_seq_bytes, kForkOne, 1, "fork conv window"));
    if (!replay) {  // a full copy of the state into the child's spare slot
      RSSM_RETURN_IF_ERROR(
          copy(L.state, L.slot_bytes, L.slot_bytes, kForkOne, 1, "fork state", kForkStFrom, kForkStTo, true));
      continue;
    }
    const bool m = L.log_x != nullptr;  // the checkpoint is shared by slot; the log entries are copied
    void* logs[3] = {m ? static_cast<void*>(L.log_x) : L.log_k, m ? static_cast<void*>(L.log_B) : L.log_u,
                     m ? static_cast<void*>(L.log_dt) : L.log_g};
    for (int i = 0; i < 3; ++i)
      RSSM_RETURN_IF_ERROR(copy(logs[i], W * L.log_row[i], L.log_row[i], m ? kForkMLog : kForkGLog, m ? max_m : max_g,
                                "fork log"));
  }
  RSSM_CU(cudaStreamSynchronize(I.stream), "fork");
  poisoned_ = false;
  const std::vector<int64_t> pos = pos_;
  const std::vector<int> mc = I.m_count, gc = I.g_count;
  for (int64_t b = 0; b < B; ++b) {
    const int32_t p = parent[size_t(b)];
    pos_[size_t(b)] = pos[size_t(p)], I.m_count[size_t(b)] = mc[size_t(p)], I.g_count[size_t(b)] = gc[size_t(p)];
    if (!replay && p != b) I.cur[size_t(b)] = (I.cur[size_t(b)] + 1) % S;
  }
  if (replay) I.m_pool.share(parent), I.g_pool.share(parent);
  // What the fork wrote: windows, and full states (standard) or the log
  // entries (replay; per entry: a W-th of a sequence's log).
  for (int64_t b = 0; b < B; ++b)
    if (parent[size_t(b)] != b)
      state_written_ += I.window_w + (replay ? (I.host_field(kForkMLog)[b] * I.mamba_log_w +
                                                I.host_field(kForkGLog)[b] * I.gdn_log_w) / opt_.window
                                             : I.mamba_state_w + I.gdn_state_w);
  note_state_peak(replay ? 0 : moved);
  return {};
}

void Decoder::note_state_peak(int64_t copies) {
  const Impl& I = *impl_;
  const int64_t B = opt_.batch, state_w = I.mamba_state_w + I.gdn_state_w;
  int64_t now = B * (I.window_w + I.pending_w);
  if (opt_.strategy == DecodeStrategy::kStandard)
    now += (B * (opt_.spec_tokens > 0 ? opt_.spec_tokens + 1 : 1) + copies) * state_w;
  else
    now += I.m_pool.peak_live() * I.mamba_state_w + I.g_pool.peak_live() * I.gdn_state_w +
           B * (I.mamba_log_w + I.gdn_log_w);
  state_peak_ = std::max(state_peak_, now);
}

Status Decoder::reset() {
  Impl& I = *impl_;
  for (LayerState& L : I.layers) {
    if (L.state != nullptr) RSSM_CU(cudaMemsetAsync(L.state, 0, L.state_bytes, I.stream), "reset");
    if (L.window != nullptr) RSSM_CU(cudaMemsetAsync(L.window, 0, L.window_bytes, I.stream), "reset");
  }
  RSSM_CU(cudaStreamSynchronize(I.stream), "reset");
  std::fill(pos_.begin(), pos_.end(), 0);
  I.last_rows = 0;
  std::fill(I.m_count.begin(), I.m_count.end(), 0), std::fill(I.g_count.begin(), I.g_count.end(), 0);
  std::fill(I.cur.begin(), I.cur.end(), 0);
  I.m_pool.reset(), I.g_pool.reset();
  I.commit_pending = false, verify_T_ = 0;
  state_peak_ = 0;
  note_state_peak(0);
  poisoned_ = false;
  return {};
}

Status Decoder::Impl::run_mamba2(const DeviceBlock& blk, LayerState& L, int T, bool fold, bool verify) {
  const ModelConfig& c = m.config();
  const Mamba2Config& mc = c.mamba;
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t rows = int64_t(B) * T;
  const int64_t HP = mc.n_heads * mc.head_dim, C = mc.conv_channels(), width = blk.in.n_out;
  const bool replay = opt.strategy == DecodeStrategy::kReplay;
  RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, proj, width, false), "Mamba2 in_proj");
  const uint16_t* xbc = nullptr;
  int64_t ldxbc = 0;
  RSSM_RETURN_IF_ERROR(run_conv(blk, L, T, verify, C, mc.conv_width, HP, width, &xbc, &ldxbc));
  // Standard layout, T > 1: a prompt chunk goes through the replay kernel
  // over a shared log of T entries folded in place — the dual form of a
  // chunk scan; a verify goes through the step kernel, a state per token.
  const bool chunk_log = !replay && T > 1 && !verify;
  oc::Mamba2AppendArgs ap;
  ap.rows = rows, ap.H = int(mc.n_heads), ap.P = int(mc.head_dim), ap.G = int(mc.n_groups), ap.N = int(mc.state_size);
  ap.xbc = xbc, ap.ldxbc = ldxbc, ap.dt_raw = proj + HP + C, ap.lddt = width, ap.dt_bias = blk.dt_bias;
  ap.dt_min = mc.dt_min, ap.dt_max = mc.dt_max, ap.Cm = cC;
  ap.entry = field(kMEntry);
  ap.x = replay ? L.log_x : chunk_log ? s_log_x : cx;
  ap.Bm = replay ? L.log_B : chunk_log ? s_log_B : cB;
  ap.dt = replay ? L.log_dt : chunk_log ? s_log_dt : cdt;
  RSSM_CU(oc::mamba2_append_cuda(ap, stream), "Mamba2 append");
  oc::Mamba2DecodeArgs a;
  a.batch = B, a.H = int(mc.n_heads), a.P = int(mc.head_dim), a.N = int(mc.state_size), a.G = int(mc.n_groups), a.T = T;
  a.A_log = blk.A_log, a.D = blk.D, a.dt_bias = blk.dt_bias, a.dt_min = mc.dt_min, a.dt_max = mc.dt_max;
  a.state = L.state, a.slot = field(kMSlot), a.Cm = cC, a.y = y;
  if (!replay && !chunk_log) {
    a.x = cx, a.Bm = cB, a.dt = cdt, a.out_slot = field(kOutSlot);
    RSSM_CU(oc::mamba2_step_cuda(a, stream), "Mamba2 step");
  } else {
    a.W = replay ? opt.window : T, a.n_log = field(kMLog);
    a.log_x = ap.x, a.log_B = ap.Bm, a.log_dt = ap.dt;
    a.fold = fold || chunk_log ? field(kMFold) : nullptr, a.fold_slot = field(kMFoldSlot);
    a.max_fold = a.fold != nullptr ? a.W : 0;
    a.scratch = mamba_scratch;
    RSSM_CU(oc::mamba2_replay_cuda(a, stream), "Mamba2 replay");
    if (replay && fold && verify) {
      // A verify folds only the committed prefix: its T entries move to the
      // front of the log (kMMoveCount is 0 where the log did not fold).
      oc::LogMoveArgs mv;
      mv.batch = B, mv.W = opt.window, mv.from = field(kMMoveFrom), mv.count = field(kMMoveCount);
      mv.array[0] = L.log_x, mv.width[0] = HP;
      mv.array[1] = L.log_B, mv.width[1] = mc.n_groups * mc.state_size;
      mv.array[2] = L.log_dt, mv.width[2] = 2 * mc.n_heads;
      RSSM_CU(oc::log_move_cuda(mv, stream), "Mamba2 log move");
    }
  }
  RSSM_CU(oc::rmsnorm_gated_group_cuda(y, HP, proj, width, rows, HP, HP / mc.n_groups, blk.norm_w, c.norm_eps, y, HP,
                                       stream),
          "Mamba2 gated norm");
  RSSM_CU(gemm->linear(y, HP, rows, blk.out.w, Hd, HP, blk.out.b, d, Hd, false), "Mamba2 out_proj");
  return {};
}

Status Decoder::Impl::run_conv(const DeviceBlock& blk, LayerState& L, int T, bool verify, int64_t C, int64_t K,
                               int64_t off, int64_t width, const uint16_t** out, int64_t* ldo) {
  oc::Conv1dArgs cv;
  cv.batch = int(opt.batch), cv.C = int(C), cv.K = int(K), cv.weight = blk.conv_w, cv.bias = blk.conv_b;
  cv.window = L.window, cv.slot = field(kWinSlot), cv.x = proj + off, cv.ldx = width;
  if (T == 1) {
    cv.y = proj + off, cv.ldy = width;
    RSSM_CU(oc::conv1d_step_cuda(cv, stream), "conv1d");
  } else {
    cv.y = xconv, cv.ldy = C, cv.cu_rows = field(kCuRows), cv.max_rows = T;
    // A verify leaves the window as it was and keeps its pre-conv rows for
    // the accepted prefix to roll in (commit_windows).
    cv.keep_window = verify;
    RSSM_CU(oc::conv1d_prefill_cuda(cv, stream), "conv1d chunk");
    if (verify)
      RSSM_CU(cudaMemcpy2DAsync(L.pending, sizeof(uint16_t) * C, proj + off, sizeof(uint16_t) * width,
                                sizeof(uint16_t) * C, size_t(opt.batch) * T, cudaMemcpyDeviceToDevice, stream),
              "verify conv rows");
  }
  *out = cv.y, *ldo = cv.ldy;
  return {};
}

Status Decoder::Impl::run_gdn(const DeviceBlock& blk, LayerState& L, int T, bool fold, bool verify) {
  const ModelConfig& c = m.config();
  const GdnConfig& g = c.gdn;
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t rows = int64_t(B) * T;
  const int64_t K = g.n_k_heads * g.k_dim, V = g.n_v_heads * g.v_dim, C = g.conv_channels(), width = blk.in.n_out;
  const bool replay = opt.strategy == DecodeStrategy::kReplay;
  RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, proj, width, false), "GDN in_proj");
  const uint16_t* qkv = nullptr;
  int64_t ldqkv = 0;
  RSSM_RETURN_IF_ERROR(run_conv(blk, L, T, verify, C, g.conv_width, 0, width, &qkv, &ldqkv));
  oc::GdnPrepareArgs pr;
  pr.rows = rows, pr.Hk = int(g.n_k_heads), pr.Hv = int(g.n_v_heads), pr.dk = int(g.k_dim);
  pr.A_log = blk.A_log, pr.dt_bias = blk.dt_bias, pr.q = qkv, pr.k = qkv + K, pr.ldq = ldqkv, pr.ldk = ldqkv;
  pr.a = proj + C + V, pr.b = proj + C + V + g.n_v_heads, pr.lda = width, pr.ldb = width;
  pr.q_out = gq, pr.k_out = gk, pr.g = gg, pr.beta = gbeta;
  RSSM_CU(oc::gdn_prepare_cuda(pr, stream), "GDN prepare");
  oc::GdnAppendArgs ap;
  ap.rows = rows, ap.Hk = int(g.n_k_heads), ap.Hv = int(g.n_v_heads), ap.dk = int(g.k_dim), ap.dv = int(g.v_dim);
  ap.v_in = qkv + 2 * K, ap.ldv = ldqkv, ap.v = gv;
  if (replay) ap.entry = field(kGEntry), ap.k = gk, ap.g = gg, ap.log_k = L.log_k, ap.log_g = L.log_g;
  RSSM_CU(oc::gdn_append_cuda(ap, stream), "GDN append");
  oc::GdnDecodeArgs a;
  a.batch = B, a.Hk = int(g.n_k_heads), a.Hv = int(g.n_v_heads), a.dk = int(g.k_dim), a.dv = int(g.v_dim), a.T = T;
  a.state = L.state, a.slot = field(kGSlot), a.q = gq, a.v = gv, a.beta = gbeta, a.o = y;
  if (!replay) {  // T = 1, or a verify's state per token (max_chunk() keeps prompts to single tokens)
    a.k = gk, a.g = gg, a.out_slot = field(kOutSlot);
    RSSM_CU(oc::gdn_step_cuda(a, stream), "GDN step");
  } else {
    a.W = opt.window, a.n_log = field(kGLog), a.log_k = L.log_k, a.log_u = L.log_u, a.log_g = L.log_g;
    a.fold = fold ? field(kGFold) : nullptr, a.fold_slot = field(kGFoldSlot), a.max_fold = fold ? opt.window : 0;
    RSSM_CU(oc::gdn_replay_cuda(a, stream), "GDN replay");
    if (fold) {
      // The fold left this step's T entries (whose u the kernel just wrote)
      // at the end of the log; they become its first entries. kGMoveCount
      // is 0 where a GDN log did not fold.
      oc::LogMoveArgs mv;
      mv.batch = B, mv.W = opt.window, mv.from = field(kGMoveFrom), mv.count = field(kGMoveCount);
      mv.array[0] = L.log_k, mv.width[0] = K;
      mv.array[1] = L.log_u, mv.width[1] = 2 * V;
      mv.array[2] = L.log_g, mv.width[2] = 2 * g.n_v_heads;
      RSSM_CU(oc::log_move_cuda(mv, stream), "GDN log move");
    }
  }
  RSSM_CU(oc::rmsnorm_then_gate_cuda(y, V, proj + C, width, rows, g.n_v_heads, g.v_dim, blk.norm_w, c.norm_eps, y, V,
                                     stream),
          "GDN norm and gate");
  RSSM_CU(gemm->linear(y, V, rows, blk.out.w, Hd, V, blk.out.b, d, Hd, false), "GDN out_proj");
  return {};
}

Status Decoder::Impl::run_attention(const DeviceBlock& blk, LayerState& L, int T) {
  const ModelConfig& c = m.config();
  const AttentionConfig& ac = c.attn;
  const int B = int(opt.batch), Hd = int(c.hidden_size);
  const int64_t rows = int64_t(B) * T;
  const int64_t D = ac.head_dim, d_q = ac.n_heads * D, d_kv = ac.n_kv_heads * D;
  const int64_t head_stride = ac.output_gate ? 2 * D : D, q_width = ac.n_heads * head_stride;
  uint16_t *q, *k, *v;
  int64_t ldq, ldk;
  if (!ac.qk_norm) {  // one GEMM: q | k | v side by side
    const int64_t width = blk.in.n_out;
    RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, proj, width, false), "attention qkv");
    q = proj, k = proj + q_width, v = proj + q_width + d_kv, ldq = ldk = width;
  } else {  // per-head norms want q and k each in their own rows
    const float* bq = blk.in.b;
    RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w, q_width, Hd, bq, aq, q_width, false), "attention q");
    RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w + q_width * Hd, d_kv, Hd, bq ? bq + q_width : nullptr, ak, d_kv, false),
            "attention k");
    RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w + (q_width + d_kv) * Hd, d_kv, Hd, bq ? bq + q_width + d_kv : nullptr,
                        av, d_kv, false),
            "attention v");
    q = aq, k = ak, v = av, ldq = q_width, ldk = d_kv;
    RSSM_CU(oc::rmsnorm_cuda(q, head_stride, rows * ac.n_heads, D, blk.q_norm, c.norm_eps, c.norm_unit_offset, q,
                             head_stride, stream),
            "q norm");
    RSSM_CU(oc::rmsnorm_cuda(k, D, rows * ac.n_kv_heads, D, blk.k_norm, c.norm_eps, c.norm_unit_offset, k, D, stream),
            "k norm");
  }
  if (ac.rotary_dim > 0) {
    RSSM_CU(oc::rope_cuda(q, ldq, head_stride, rows, int(ac.n_heads), int(ac.rotary_dim), inv_freq, field(kRowPos),
                          stream),
            "RoPE q");
    RSSM_CU(oc::rope_cuda(k, ldk, D, rows, int(ac.n_kv_heads), int(ac.rotary_dim), inv_freq, field(kRowPos), stream),
            "RoPE k");
  }
  const int64_t ldv = ac.qk_norm ? d_kv : ldk;
  if (T == 1) {
    oc::KvAppendArgs ka;
    ka.batch = B, ka.width = int(d_kv), ka.k = k, ka.v = v, ka.ldk = ldk, ka.ldv = ldv;
    ka.pos = field(kRowPos), ka.kv = L.kv;
    RSSM_CU(oc::kv_append_cuda(ka, stream), "KV append");
    oc::AttentionDecodeArgs at;
    at.batch = B, at.Hq = int(ac.n_heads), at.Hkv = int(ac.n_kv_heads), at.D = int(D);
    at.scale = 1.0f / std::sqrt(static_cast<float>(D));
    at.q = q, at.ldq = ldq, at.q_head_stride = head_stride;
    if (ac.output_gate) at.gate = q + D, at.ldg = ldq, at.g_head_stride = head_stride;
    at.out = y, at.ldo = d_q, at.kv = L.kv, at.seq_len = field(kSeqLen), at.max_seq_len = int(opt.max_context);
    at.scratch = attn_scratch;
    RSSM_CU(oc::attention_decode_cuda(at, stream), "attention");
  } else {
    oc::KvAppendRowsArgs ka;
    ka.rows = int(rows), ka.width = int(d_kv), ka.k = k, ka.v = v, ka.ldk = ldk, ka.ldv = ldv;
    ka.seq = field(kRowSeq), ka.pos = field(kRowPos), ka.kv = L.kv;
    RSSM_CU(oc::kv_append_rows_cuda(ka, stream), "KV append rows");
    oc::AttentionPrefillArgs at;
    at.batch = B, at.Hq = int(ac.n_heads), at.Hkv = int(ac.n_kv_heads), at.D = int(D);
    at.scale = 1.0f / std::sqrt(static_cast<float>(D));
    at.q = q, at.ldq = ldq, at.q_head_stride = head_stride;
    if (ac.output_gate) at.gate = q + D, at.ldg = ldq, at.g_head_stride = head_stride;
    at.out = y, at.ldo = d_q, at.kv = L.kv, at.cu_rows = field(kCuRows), at.pos = field(kSeqPos), at.max_rows = T;
    RSSM_CU(oc::attention_prefill_cuda(at, stream), "attention chunk");
  }
  RSSM_CU(gemm->linear(y, d_q, rows, blk.out.w, Hd, d_q, blk.out.b, d, Hd, false), "attention o_proj");
  return {};
}

Status Decoder::Impl::run_mlp(const DeviceBlock& blk, int T) {
  const ModelConfig& c = m.config();
  const int Hd = int(c.hidden_size);
  const int64_t rows = opt.batch * T, I = c.mlp.intermediate, width = blk.in.n_out;
  RSSM_CU(gemm->linear(xn, Hd, rows, blk.in.w, width, Hd, blk.in.b, proj, width, false), "MLP up");
  uint16_t* act = c.mlp.gated ? proj + I : proj;  // act(gate) ⊙ up lands on up
  RSSM_CU(oc::mlp_activation_cuda(c.mlp.act, c.mlp.gated ? proj : nullptr, width, act, width, rows, I, act, width,
                                  stream),
          "MLP activation");
  RSSM_CU(gemm->linear(act, width, rows, blk.out.w, Hd, I, blk.out.b, d, Hd, false), "MLP down");
  return {};
}

Status Decoder::Impl::commit_windows() {
  const ModelConfig& c = m.config();
  for (const DeviceBlock& blk : m.blocks()) {
    if (blk.kind != BlockKind::kMamba2 && blk.kind != BlockKind::kGatedDeltaNet) continue;
    const bool mamba = blk.kind == BlockKind::kMamba2;
    LayerState& L = layers[size_t(blk.cache_layer)];
    oc::Conv1dArgs cv;
    cv.batch = int(opt.batch), cv.C = int(mamba ? c.mamba.conv_channels() : c.gdn.conv_channels());
    cv.K = int(mamba ? c.mamba.conv_width : c.gdn.conv_width);
    cv.window = L.window, cv.slot = field(kWinSlot), cv.x = L.pending, cv.ldx = cv.C;
    cv.cu_rows = field(kCommitRows), cv.n_rows = field(kCommitCount);
    RSSM_CU(oc::conv1d_window_cuda(cv, stream), "conv window commit");
  }
  return {};
}

Status Decoder::Impl::enqueue(int T, bool fold, bool verify, bool commit) {
  const ModelConfig& c = m.config();
  const int B = int(opt.batch);
  const int64_t Hd = c.hidden_size, V = c.vocab_size, rows = int64_t(B) * T;
  RSSM_CU(cudaMemcpyAsync(plan, plan_host, sizeof(int32_t) * kPlanFields * field_len(), cudaMemcpyHostToDevice, stream),
          "plan");
  if (commit) RSSM_RETURN_IF_ERROR(commit_windows());
  RSSM_CU(oc::embedding_cuda(field(kTokens), rows, m.embed(), V, Hd, Hd, h, Hd, stream), "embedding");
  const uint16_t* pending = nullptr;  // the previous block's output, added to h by the next norm
  for (const DeviceBlock& blk : m.blocks()) {
    RSSM_CU(oc::residual_rmsnorm_cuda(h, Hd, pending, Hd, rows, Hd, blk.norm, c.norm_eps, c.norm_unit_offset, xn, Hd,
                                      stream),
            "block norm");
    switch (blk.kind) {
      case BlockKind::kMamba2:
        RSSM_RETURN_IF_ERROR(run_mamba2(blk, layers[size_t(blk.cache_layer)], T, fold, verify));
        break;
      case BlockKind::kGatedDeltaNet:
        RSSM_RETURN_IF_ERROR(run_gdn(blk, layers[size_t(blk.cache_layer)], T, fold, verify));
        break;
      case BlockKind::kAttention: RSSM_RETURN_IF_ERROR(run_attention(blk, layers[size_t(blk.cache_layer)], T)); break;
      case BlockKind::kMlp: RSSM_RETURN_IF_ERROR(run_mlp(blk, T)); break;
    }
    pending = d;
  }
  RSSM_CU(oc::residual_rmsnorm_cuda(h, Hd, pending, Hd, rows, Hd, m.final_norm(), c.norm_eps, c.norm_unit_offset, xn,
                                    Hd, stream),
          "final norm");
  // Logits of every row (all_logits, verify), or of each sequence's last row (rows b·T + T − 1).
  const DeviceLinear& lm = m.lm_head();
  const bool every = opt.all_logits || verify;
  const int64_t out_rows = every ? rows : B;
  const uint16_t* x = every ? xn : xn + (T - 1) * Hd;
  const int64_t ldx = every ? Hd : T * Hd;
  RSSM_CU(gemm->linear(x, ldx, out_rows, lm.w, V, Hd, lm.b, logits, V, true), "LM head");
  RSSM_CU(oc::argmax_cuda(logits, V, out_rows, V, next, stream), "argmax");
  RSSM_CU(cudaMemcpyAsync(next_host, next, sizeof(int32_t) * out_rows, cudaMemcpyDeviceToHost, stream), "next tokens");
  return {};
}

int Decoder::max_chunk() const {
  const Impl& I = *impl_;
  int t = opt_.max_chunk;
  if (I.has_gdn && opt_.strategy == DecodeStrategy::kStandard) return 1;  // GDN folds need their u first: no chunk log
  if (opt_.strategy == DecodeStrategy::kReplay) {
    for (size_t b = 0; b < pos_.size(); ++b) {
      if (I.has_mamba) t = std::min(t, opt_.window - I.m_count[b]);
      if (I.has_gdn) t = std::min(t, opt_.window - std::max(I.g_count[b], 1));
    }
    // A GDN fold keeps the step's T entries, which must leave a verify room.
    if (I.has_gdn && opt_.spec_tokens > 0) t = std::min(t, opt_.window - opt_.spec_tokens);
  }
  return std::max(t, 1);
}

Status Decoder::step(std::span<const int32_t> tokens, int T, std::span<int32_t> next, float* logits) {
  if (T < 1 || T > max_chunk())
    return invalid_argument("cuda decode: " + std::to_string(T) + " tokens per sequence this step; the decoder takes 1.." +
                            std::to_string(max_chunk()) + " now (max_chunk " + std::to_string(opt_.max_chunk) + ")");
  if (int64_t(next.size()) != opt_.batch)
    return invalid_argument("cuda decode: a step returns one token per sequence (" + std::to_string(opt_.batch) +
                            "), got room for " + std::to_string(next.size()));
  return run(tokens, T, false, next, logits);
}

Status Decoder::verify(std::span<const int32_t> tokens, int T, std::span<int32_t> argmax, float* logits) {
  if (opt_.spec_tokens == 0) return invalid_argument("cuda decode: verify needs a decoder created with spec_tokens > 0");
  if (T < 2 || T > opt_.spec_tokens)
    return invalid_argument("cuda decode: a verify of " + std::to_string(T) + " tokens per sequence; this decoder takes 2.." +
                            std::to_string(opt_.spec_tokens) + " (spec_tokens)");
  if (int64_t(argmax.size()) != opt_.batch * T)
    return invalid_argument("cuda decode: a verify returns " + std::to_string(opt_.batch * T) + " argmax rows, got room for " +
                            std::to_string(argmax.size()));
  return run(tokens, T, true, argmax, logits);
}

Status Decoder::accept(std::span<const int32_t> accepted) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch;
  const int T = verify_T_;
  if (T == 0) return invalid_argument("cuda decode: accept() without a verify to accept");
  if (int64_t(accepted.size()) != B)
    return invalid_argument("cuda decode: accept takes one count per sequence (" + std::to_string(B) + "), got " +
                            std::to_string(accepted.size()));
  for (int64_t b = 0; b < B; ++b)
    if (accepted[size_t(b)] < 0 || accepted[size_t(b)] > T)
      return invalid_argument("cuda decode: sequence " + std::to_string(b) + " accepts " +
                              std::to_string(accepted[size_t(b)]) + " tokens of a verify of " + std::to_string(T) +
                              " (0.." + std::to_string(T) + ")");
  const bool replay = opt_.strategy == DecodeStrategy::kReplay;
  for (int64_t b = 0; b < B; ++b) {
    const int a = accepted[size_t(b)];
    pos_[size_t(b)] += a;
    if (replay) {  // a folded log holds the verify's T at its front
      I.m_count[size_t(b)] = (I.m_folded[size_t(b)] ? 0 : I.m_count[size_t(b)]) + a;
      I.g_count[size_t(b)] = (I.g_folded[size_t(b)] ? 0 : I.g_count[size_t(b)]) + a;
    } else {  // the state after the last accepted token is in the verify's slot for it
      I.cur[size_t(b)] = (I.cur[size_t(b)] + a) % I.slots_per_seq;
    }
    I.host_field(kCommitRows)[b] = int32_t(b * T);
    I.host_field(kCommitCount)[b] = a;
  }
  I.host_field(kCommitRows)[B] = int32_t(B * T);
  I.commit_pending = true;
  verify_T_ = 0;
  return {};
}

Status Decoder::run(std::span<const int32_t> tokens, int T, bool verify, std::span<int32_t> next, float* logits) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch, V = I.m.config().vocab_size;
  if (poisoned_)
    return invalid_argument("cuda decode: an earlier step failed part-way; the states are undefined until reset()");
  if (verify_T_ != 0) return invalid_argument("cuda decode: the last verify awaits accept()");
  if (int64_t(tokens.size()) != B * T)
    return invalid_argument("cuda decode: a step takes " + std::to_string(T) + " token(s) per sequence (" +
                            std::to_string(B * T) + " in all), got " + std::to_string(tokens.size()));
  for (int64_t b = 0; b < B; ++b)
    if (pos_[size_t(b)] + T > opt_.max_context)
      return out_of_budget("cuda decode: sequence " + std::to_string(b) + " would pass the context (" +
                           std::to_string(opt_.max_context) + " positions)");
  for (int32_t t : tokens)
    if (t < 0 || t >= V)
      return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(V) + ")");
  const bool replay = opt_.strategy == DecodeStrategy::kReplay;
  const int W = opt_.window, S = I.slots_per_seq;
  // A log folds where the step would leave it without room for the next
  // step: one token, or a whole verify with speculation. A fold takes the
  // committed prefix and, under AR, Mamba2's new entries too (they are
  // committed on arrival); GDN's new u are only known after the pass, and a
  // verify's entries are not committed, so those move to the front.
  const int need = std::max(opt_.spec_tokens, 1);
  bool fold = false;
  for (int64_t b = 0; b < B; ++b) {
    const int m = I.m_count[size_t(b)], g = I.g_count[size_t(b)];
    const bool m_fold = replay && I.has_mamba && m + T + need > W;
    const bool g_fold = replay && I.has_gdn && g + T + need > W;
    fold = fold || m_fold || g_fold;
    I.m_folded[size_t(b)] = m_fold, I.g_folded[size_t(b)] = g_fold;
    const int64_t pos = pos_[size_t(b)];
    for (int t = 0; t < T; ++t) {
      const int64_t r = b * T + t;
      I.host_field(kTokens)[r] = tokens[size_t(r)];
      I.host_field(kRowPos)[r] = int32_t(pos + t);
      I.host_field(kRowSeq)[r] = int32_t(b);
      // Replay: the sequence's log; standard: the step's compact row (or the chunk log's entry).
      I.host_field(kMEntry)[r] = int32_t(replay ? b * W + m + t : r);
      I.host_field(kGEntry)[r] = int32_t(b * W + g + t);
      // Standard: a verify writes each token's state to the sequence's next
      // slots; anything else updates the current one in place.
      I.host_field(kOutSlot)[r] = int32_t(b * S + (verify ? (I.cur[size_t(b)] + 1 + t) % S : I.cur[size_t(b)]));
    }
    I.host_field(kSeqPos)[b] = int32_t(pos);
    I.host_field(kSeqLen)[b] = int32_t(pos + T);
    I.host_field(kCuRows)[b] = int32_t(b * T);
    if (replay) {  // a fold writes in place unless another sequence reads the checkpoint
      I.host_field(kMSlot)[b] = I.m_pool.slot(b), I.host_field(kGSlot)[b] = I.g_pool.slot(b);
      I.host_field(kMFoldSlot)[b] = m_fold ? I.m_pool.fold_target(b) : I.m_pool.slot(b);
      I.host_field(kGFoldSlot)[b] = g_fold ? I.g_pool.fold_target(b) : I.g_pool.slot(b);
    } else {
      const int32_t slot = int32_t(b * S + I.cur[size_t(b)]);
      I.host_field(kMSlot)[b] = I.host_field(kGSlot)[b] = I.host_field(kMFoldSlot)[b] = I.host_field(kGFoldSlot)[b] = slot;
    }
    I.host_field(kWinSlot)[b] = int32_t(b);
    I.host_field(kMLog)[b] = replay ? m + T : T;
    // Standard chunks fold all their T entries; replay folds its prefix, or
    // everything under AR.
    I.host_field(kMFold)[b] = replay ? (m_fold ? (verify ? m : m + T) : 0) : T;
    I.host_field(kMMoveFrom)[b] = m;
    I.host_field(kMMoveCount)[b] = m_fold && verify ? T : 0;
    I.host_field(kGLog)[b] = g + T;
    I.host_field(kGFold)[b] = g_fold ? g : 0;
    I.host_field(kGMoveFrom)[b] = g;
    I.host_field(kGMoveCount)[b] = g_fold ? T : 0;
  }
  I.host_field(kCuRows)[B] = int32_t(B * T);
  // From the first launch on, a failure leaves the device part-way through
  // the step (windows shifted, states or logs written): the decoder refuses
  // further steps until reset().
  if (const Status st = launch_step(T, fold, verify, I.commit_pending, logits); !st.ok()) {
    cudaStreamSynchronize(I.stream);  // nothing of the step may still be reading the plan
    cudaGetLastError();
    poisoned_ = true;
    return st;
  }
  I.commit_pending = false;
  if (fold) ++folds_;
  if (replay)
    for (int64_t b = 0; b < B; ++b) {
      if (I.m_folded[size_t(b)]) I.m_pool.folded(b, I.host_field(kMFoldSlot)[b]);
      if (I.g_folded[size_t(b)]) I.g_pool.folded(b, I.host_field(kGFoldSlot)[b]);
    }
  note_state_peak(0);
  for (int64_t b = 0; b < B; ++b)
    state_written_ += I.window_w + (replay ? I.m_folded[size_t(b)] * I.mamba_state_w + I.g_folded[size_t(b)] * I.gdn_state_w
                                           : (verify ? T : 1) * (I.mamba_state_w + I.gdn_state_w));
  if (verify) {
    for (int64_t r = 0; r < B * T; ++r) next[size_t(r)] = I.next_host[r];
    verify_T_ = T;  // positions and logs move in accept()
    return {};
  }
  for (int64_t b = 0; b < B; ++b) {
    next[size_t(b)] = I.next_host[opt_.all_logits ? b * T + T - 1 : b];
    pos_[size_t(b)] += T;
    if (replay) {
      I.m_count[size_t(b)] = I.m_folded[size_t(b)] ? 0 : I.m_count[size_t(b)] + T;
      I.g_count[size_t(b)] = I.g_folded[size_t(b)] ? T : I.g_count[size_t(b)] + T;
    }
  }
  return {};
}

Status Decoder::launch_step(int T, bool fold, bool verify, bool commit, float* logits) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch, V = I.m.config().vocab_size;
  // The first step of each kind runs eagerly (cuBLAS settles its choices
  // and workspace there); the second captures the graph every later one
  // replays.
  const int key = graph_key(T, fold, verify, commit);
  if (!opt_.graphs || !I.ran_eager.count(key)) {
    RSSM_RETURN_IF_ERROR(I.enqueue(T, fold, verify, commit));
    I.ran_eager.insert(key);
  } else {
    auto it = I.graphs.find(key);
    if (it == I.graphs.end()) {
      RSSM_CU(cudaStreamBeginCapture(I.stream, cudaStreamCaptureModeThreadLocal), "graph capture");
      const Status s = I.enqueue(T, fold, verify, commit);
      cudaGraph_t g = nullptr;
      const cudaError_t e = cudaStreamEndCapture(I.stream, &g);
      if (!s.ok() || e != cudaSuccess) {
        if (g != nullptr) cudaGraphDestroy(g);
        RSSM_RETURN_IF_ERROR(s);
        RSSM_CU(e, "graph capture");
      }
      cudaGraphExec_t exec = nullptr;
      const cudaError_t ie = cudaGraphInstantiate(&exec, g, 0);
      cudaGraphDestroy(g);
      RSSM_CU(ie, "graph instantiate");
      it = I.graphs.emplace(key, exec).first;
    }
    RSSM_CU(cudaGraphLaunch(it->second, I.stream), "graph launch");
  }
  const int64_t out_rows = opt_.all_logits || verify ? B * T : B;
  I.last_rows = out_rows;
  if (logits != nullptr)
    RSSM_CU(cudaMemcpyAsync(logits, I.logits, sizeof(float) * size_t(out_rows * V), cudaMemcpyDeviceToHost, I.stream),
            "logits");
  RSSM_CU(cudaStreamSynchronize(I.stream), "step");
  return {};
}

}  // namespace replayssm::cuda
