// Decoder (see decoder.h): create (buffers), reset, the host's plan of a
// step or verify and accept(), and the CUDA graphs that replay a step.
#include "runtime/cuda/decoder_impl.h"

#include <cstring>

namespace replayssm::cuda {

const char* decode_strategy_name(DecodeStrategy s) {
  switch (s) {
    case DecodeStrategy::kStandard: return "standard";
    case DecodeStrategy::kReplay: return "replay";
    case DecodeStrategy::kRecompute: return "recompute";
  }
  return "?";
}

namespace {
// recompute without speculation: its re-prefills run as feeds of up to this many rows.
constexpr int kRecomputeFeedRows = 4;
}  // namespace

namespace {
// groups: the Mamba2 and GDN launches' group counts, each ≤ batch < 2^20;
// steps: how the launch's SSM layers take a plain step (Impl::m_step +
// 2 · Impl::g_step, 0..5).
int64_t graph_key(int T, bool fold, bool verify, bool commit, bool scan, int m_groups, int g_groups, int steps) {
  const int64_t groups = (int64_t(m_groups) << 20) | g_groups;
  return (((groups * (kMaxChunk + 1) + T) * 6 + steps) * 16) + scan * 8 + fold * 4 + verify * 2 + commit;
}
}  // namespace

Decoder::~Decoder() = default;

const DeviceModel& Decoder::model() const { return impl_->m; }
bool Decoder::replay_steps_mamba2() const { return impl_->m_steps; }
bool Decoder::replay_steps_gdn() const { return impl_->g_steps; }

Result<std::unique_ptr<Decoder>> Decoder::create(const DeviceModel& model, const DecoderOptions& o) {
  const ModelConfig& c = model.config();
  if (o.batch < 1 || o.batch > 65535)
    return invalid_argument("cuda decode: batch " + std::to_string(o.batch) + " out of range [1, 65535]");
  if (o.max_context < 1 || o.max_context > (int64_t{1} << 24))
    return invalid_argument("cuda decode: max_context " + std::to_string(o.max_context) + " out of range [1, 16777216]");
  if (o.fork_groups < -1 || o.fork_groups > 1)
    return invalid_argument("cuda decode: fork_groups " + std::to_string(o.fork_groups) +
                            " out of range (-1: where it pays, 0: never, 1: always)");
  if (o.strategy == DecodeStrategy::kReplay && (o.window < 2 || o.window > oc::kMamba2MaxW))
    return invalid_argument("cuda decode: window " + std::to_string(o.window) + " out of range [2, 64]");
  if (o.strategy == DecodeStrategy::kRecompute && (o.window < 1 || o.window > (1 << 20)))
    return invalid_argument("cuda decode: window " + std::to_string(o.window) +
                            " out of range [1, 1048576] (recompute: the sparse checkpoints' interval)");
  if (o.exact && o.strategy != DecodeStrategy::kReplay)
    return invalid_argument("cuda decode: exact needs the replay layout (the others step the state itself)");
  if (o.rewind && o.strategy != DecodeStrategy::kReplay)
    return invalid_argument("cuda decode: rewind needs the replay layout (the standard layout keeps no log to go back "
                            "through)");
  if (o.replay_step < -1 || o.replay_step > 1)
    return invalid_argument("cuda decode: replay_step " + std::to_string(o.replay_step) +
                            " out of range (-1: where the standard step is faster, 0: never, 1: always)");
  if (o.replay_step == 1 && (o.strategy != DecodeStrategy::kReplay || o.exact || o.rewind))
    return invalid_argument(std::string("cuda decode: replay_step 1 needs the replay layout without exact and rewind "
                                        "(") +
                            (o.strategy != DecodeStrategy::kReplay ? "not replay"
                             : o.exact                             ? "exact"
                                                                   : "rewind") +
                            ": those keep every log's kernels)");
  if (o.kv_page < 1 || o.kv_page > 4096)
    return invalid_argument("cuda decode: kv_page " + std::to_string(o.kv_page) + " out of range [1, 4096]");
  // The model against the kernels' limits, once, naming the config field.
  bool has_mamba = false, has_gdn = false, has_attn = false;
  for (BlockKind k : c.blocks) {
    has_mamba |= k == BlockKind::kMamba2, has_gdn |= k == BlockKind::kGatedDeltaNet, has_attn |= k == BlockKind::kAttention;
  }
  auto over = [&](const std::string& field, int64_t v, int64_t hi) {
    const std::string where = c.dir.empty() ? "" : c.dir + ": ";  // presets have no directory
    return unsupported("cuda decode: " + where + field + " = " + std::to_string(v) +
                       " is over the CUDA kernels' limit " + std::to_string(hi));
  };
  if (has_mamba && c.mamba.state_size > 256) return over("ssm_state_size", c.mamba.state_size, 256);
  if (has_mamba && c.mamba.conv_width > oc::kConvMaxK) return over("conv_kernel", c.mamba.conv_width, oc::kConvMaxK);
  if (has_gdn && c.gdn.conv_width > oc::kConvMaxK) return over("linear_conv_kernel_dim", c.gdn.conv_width, oc::kConvMaxK);
  if (has_gdn && o.strategy == DecodeStrategy::kReplay && c.gdn.v_dim > 256)
    return over("linear_value_head_dim", c.gdn.v_dim, 256);
  // The standard step's and the chunk scan's limit (replay's prompt chunks
  // take the scan where a log has no room for them).
  if (has_gdn && c.gdn.k_dim > 512) return over("linear_key_head_dim", c.gdn.k_dim, 512);
  if (has_attn && c.attn.head_dim > oc::kAttnMaxD) return over("head_dim", c.attn.head_dim, oc::kAttnMaxD);
  if (has_attn && c.attn.n_heads / c.attn.n_kv_heads > oc::kAttnMaxRep)
    return over("num_attention_heads / num_key_value_heads", c.attn.n_heads / c.attn.n_kv_heads, oc::kAttnMaxRep);
  // What the decode kernels take in one step (replay: a log step, which
  // must leave the log room); longer chunks run the chunk scans.
  const int log_limit =
      std::min({oc::kMamba2MaxT, oc::kGdnMaxT, o.strategy == DecodeStrategy::kReplay ? o.window - 1 : oc::kMamba2MaxT});
  if (o.max_chunk < 0 || o.max_chunk > kMaxChunk)
    return invalid_argument("cuda decode: max_chunk " + std::to_string(o.max_chunk) + " out of range [1, " +
                            std::to_string(kMaxChunk) + "] (0: the default)");

  // A verify leaves at most spec_tokens new entries that a later fold may
  // have to move to the front and still fit the next verify beside.
  const int spec_limit = std::min({oc::kMamba2MaxT, oc::kGdnMaxT, o.strategy == DecodeStrategy::kReplay ? o.window / 2 : 8});
  if (o.spec_tokens != 0 && (o.spec_tokens < 2 || o.spec_tokens > spec_limit))
    return invalid_argument("cuda decode: spec_tokens " + std::to_string(o.spec_tokens) + " out of range [2, " +
                            std::to_string(spec_limit) + "] (0: no speculation)" +
                            (o.strategy == DecodeStrategy::kReplay ? " (a verify must fit half the window)" : ""));

  std::unique_ptr<Decoder> dec(new Decoder());
  dec->opt_ = o;
  if (dec->opt_.max_chunk == 0)  // no longer than the context: its rows would never fill
    dec->opt_.max_chunk =
        int(std::max<int64_t>(log_limit, std::min({int64_t(kMaxChunk), kDefaultChunkRows / o.batch, o.max_context})));
  const bool recompute = o.strategy == DecodeStrategy::kRecompute;
  if (recompute && o.spec_tokens == 0) dec->opt_.spec_tokens = kRecomputeFeedRows;
  dec->impl_ = std::make_unique<Impl>(model, dec->opt_);
  Impl& I = *dec->impl_;
  I.log_limit = log_limit;
  DecoderMemory& mem = dec->mem_;
  const int chunk = dec->opt_.max_chunk, spec = dec->opt_.spec_tokens;
  const int64_t B = o.batch, W = o.window, Hd = c.hidden_size;
  const bool replay = o.strategy == DecodeStrategy::kReplay;
  I.rows_cap = B * std::max(chunk, spec);
  // Rows of a step through the decode kernels (log steps, verifies, feeds):
  // what their per-token buffers hold.
  const int64_t R_log = B * std::max(std::min(chunk, log_limit), spec);
  // Standard: a slot per verified token and a spare for fork copies;
  // recompute verifies in place, so only the spare.
  I.recompute = recompute;
  const bool per_draft = !replay && !recompute && o.draft_states && spec > 0;
  I.slots_per_seq = per_draft ? std::max(spec + 1, o.forks ? 2 : 1) : replay ? 1 : (o.forks ? 2 : 1);
  // Replay: a checkpoint slot per sequence, or a pool of twice that which
  // forks share (every sequence in use, and as many folds into fresh ones).
  const int64_t R = I.rows_cap, S = replay && o.forks ? 2 : I.slots_per_seq;
  I.m_pool = SlotPool(B, B * S), I.g_pool = SlotPool(B, B * S);
  I.sparse_base = B * S;
  I.state_slots = B * S + (recompute ? B : 0) + (replay ? 0 : 1);
  I.scratch_slot = int32_t(I.state_slots - 1);
  // Each sequence's tokens: recompute re-runs them; replay with forks
  // groups its families' folds by them.
  if (recompute || (replay && o.forks)) I.toks.assign(size_t(B), {});
  I.ck_pos.assign(size_t(B), 0), I.ck_mark.assign(size_t(B), 0);
  dec->pos_.assign(size_t(B), 0);
  I.m_count.assign(size_t(B), 0), I.g_count.assign(size_t(B), 0), I.cur.assign(size_t(B), 0);
  I.m_folded.assign(size_t(B), 0), I.g_folded.assign(size_t(B), 0);
  RSSM_CU(cudaStreamCreateWithFlags(&I.stream, cudaStreamNonBlocking), "stream");
  RSSM_CU(I.gemm->init(I.stream), "cuBLAS handle and workspace");
  mem.workspace_bytes += 32 << 20;

  // Every row's logits with all_logits, a verify's or a feed's rows, else one a sequence.
  const int64_t logit_rows = o.all_logits ? R : B * std::max(spec, 1);
  RSSM_CU(cudaMallocHost(reinterpret_cast<void**>(&I.plan_host), sizeof(int32_t) * kPlanFields * I.field_len()),
          "pinned plan");
  RSSM_CU(cudaMallocHost(reinterpret_cast<void**>(&I.next_host), sizeof(int32_t) * logit_rows), "pinned tokens");
  std::memset(I.plan_host, 0, sizeof(int32_t) * kPlanFields * I.field_len());
  for (int64_t b = 0; b <= B; ++b) I.host_field(kLogBase)[b] = int32_t(b * W), I.host_field(kWinSlot)[b] = int32_t(b);
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
  // A feed's dropped rows write K/V past a sequence's end: room for spec
  // rows beyond the context.
  I.pages_per_seq = int((o.max_context + spec + o.kv_page - 1) / o.kv_page);
  bool any_mamba = false, any_gdn = false, any_attn = false;
  for (const DeviceBlock& blk : model.blocks()) {
    if (blk.cache_layer < 0) continue;
    if (I.layers.size() <= size_t(blk.cache_layer)) I.layers.resize(size_t(blk.cache_layer) + 1);
    LayerState& L = I.layers[size_t(blk.cache_layer)];
    const std::string what = "layer " + std::to_string(blk.cache_layer);
    int64_t& st = mem.state_bytes;
    if (blk.kind == BlockKind::kMamba2 || blk.kind == BlockKind::kGatedDeltaNet) {
      // One sequence's shapes: the state slot, the conv window (K−1 rows of
      // C channels) and a log entry's arrays (Mamba2 x | B | dt, GDN k | u | g).
      const bool mamba = blk.kind == BlockKind::kMamba2;
      any_mamba |= mamba, any_gdn |= !mamba;
      const int64_t C = mamba ? mc.conv_channels() : gc.conv_channels();
      const int64_t K1 = (mamba ? mc.conv_width : gc.conv_width) - 1;
      const int64_t slot_floats = mamba ? mc.n_heads * mc.head_dim * mc.state_size : gc.n_v_heads * gc.k_dim * gc.v_dim;
      const int64_t HP = mc.n_heads * mc.head_dim, GN = mc.n_groups * mc.state_size;
      const int64_t GK = gc.n_k_heads * gc.k_dim, GV = gc.n_v_heads * gc.v_dim;
      if (mamba) L.log_row[0] = HP * 2, L.log_row[1] = GN * 2, L.log_row[2] = mc.n_heads * 4;
      else L.log_row[0] = GK * 2, L.log_row[1] = GV * 4, L.log_row[2] = gc.n_v_heads * 4;
      L.slot_bytes = slot_floats * 4, L.window_seq_bytes = K1 * C * 2, L.conv_row = C * 2;
      RSSM_RETURN_IF_ERROR(
          I.alloc(&L.state, I.state_slots * slot_floats, what + (replay ? " checkpoints" : " states"), &st));
      // recompute: the sparse checkpoints' windows are blocks B..2B−1 (one array for seq_copy_cuda).
      RSSM_RETURN_IF_ERROR(I.alloc(&L.window, (recompute ? 2 : 1) * B * K1 * C, what + " conv windows", &st));
      if (recompute) L.ck_window = L.window + B * K1 * C, I.rewind_w += K1 * C * 2;
      if (spec > 0) RSSM_RETURN_IF_ERROR(I.alloc(&L.pending, B * spec * C, what + " verify conv rows", &st));
      if (o.rewind) {
        RSSM_RETURN_IF_ERROR(I.alloc(&L.conv_log, B * W * C, what + " log pre-conv rows", &st));
        RSSM_RETURN_IF_ERROR(I.alloc(&L.ck_window, B * K1 * C, what + " checkpoint conv windows", &st));
        I.rewind_w += (W + K1) * C * 2;
      }
      (mamba ? I.mamba_state_w : I.gdn_state_w) += L.slot_bytes;
      I.window_w += L.window_seq_bytes;
      I.pending_w += spec * C * 2;
      if (replay) {
        (mamba ? I.mamba_log_w : I.gdn_log_w) += W * (L.log_row[0] + L.log_row[1] + L.log_row[2]);
        if (mamba) {
          RSSM_RETURN_IF_ERROR(I.alloc(&L.log_x, B * W * HP, what + " log x", &st));
          RSSM_RETURN_IF_ERROR(I.alloc(&L.log_B, B * W * GN, what + " log B", &st));
          RSSM_RETURN_IF_ERROR(I.alloc(&L.log_dt, B * W * mc.n_heads, what + " log dt", &st));
        } else {
          RSSM_RETURN_IF_ERROR(I.alloc(&L.log_k, B * W * GK, what + " log k", &st));
          RSSM_RETURN_IF_ERROR(I.alloc(&L.log_u, B * W * GV, what + " log u", &st));
          RSSM_RETURN_IF_ERROR(I.alloc(&L.log_g, B * W * gc.n_v_heads, what + " log g", &st));
        }
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
  // Plain one-token steps through the standard step where that measured
  // the faster decode step at this batch (DecoderOptions::replay_step):
  // Mamba2 layers by mamba2_replay_steps_faster; GDN's output-only kernels
  // measured faster end to end at every batch (H200, 2026-12-04, d14a59a).
  if (replay && !o.exact && !o.rewind && o.replay_step != 0) {
    oc::Mamba2DecodeArgs ma;
    ma.batch = int(B), ma.H = int(mc.n_heads), ma.P = int(mc.head_dim), ma.N = int(mc.state_size);
    const bool chosen = o.replay_step == 1, automatic = o.replay_step == -1 && o.fork_groups != 1;
    I.m_steps = any_mamba && (chosen || (automatic && oc::mamba2_replay_steps_faster(ma)));
    I.g_steps = any_gdn && chosen;
  }
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
    // x, B, dt compact only for the step kernel — the standard layout's, a
    // row per row of a step; replay's stepped one-token steps (replay_step),
    // a row per sequence (chunk scans read the conv's rows, replay's other
    // steps append to a log) — C for the decode kernels: a row per row of a
    // step — a ragged step's decoding sequences' rows lie anywhere among its R.
    const int64_t compact = replay ? B : R;
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cx, compact * HP, "Mamba2 x", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cB, compact * GN, "Mamba2 B", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cC, R * GN, "Mamba2 C", &ws2));
    RSSM_RETURN_IF_ERROR(I.alloc(&I.cdt, compact * mc.n_heads, "Mamba2 dt", &ws2));
    if (replay)
      RSSM_RETURN_IF_ERROR(I.alloc(&I.mamba_scratch,
                                   oc::mamba2_replay_scratch_floats(int(B), int(R_log / B), int(mc.n_heads),
                                                                    int(mc.head_dim)),
                                   "Mamba2 replay scratch", &ws2));
  }
  // Chunks, verifies, feeds and ragged steps (which may have as many rows
  // as the batch, a sequence taking several) convolve into it.
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
    if (replay && o.forks && o.fork_groups != 0 && !o.exact)  // fork groups (one token a sequence; not exact)
      RSSM_RETURN_IF_ERROR(I.alloc(&I.gdn_scratch, oc::gdn_replay_scratch_floats(int(B), 1, int(gc.n_v_heads), int(gc.v_dim)),
                                   "GDN fork groups' scratch", &ws2));
  }
  if (any_attn) {
    const int64_t D = ac.head_dim, q_width = (ac.output_gate ? 2 : 1) * ac.n_heads * D, d_kv = ac.n_kv_heads * D;
    if (ac.qk_norm) {
      RSSM_RETURN_IF_ERROR(I.alloc(&I.aq, R * q_width, "attention q", &ws2));
      RSSM_RETURN_IF_ERROR(I.alloc(&I.ak, R * d_kv, "attention k", &ws2));
      RSSM_RETURN_IF_ERROR(I.alloc(&I.av, R * d_kv, "attention v", &ws2));
    }
    // Split the context (flash-decoding) where the heads alone leave the
    // GPU short of blocks (attention_decode.h); with more heads every block
    // walks its whole context, as measured before the default split existed.
    if (B * ac.n_kv_heads < oc::kAttnTargetBlocks &&
        oc::attention_decode_splits(int(B), int(ac.n_kv_heads), int(o.max_context), 0) > 1)
      RSSM_RETURN_IF_ERROR(I.alloc(&I.attn_scratch,
                                   oc::attention_decode_scratch_floats(int(B), int(ac.n_heads), int(ac.n_kv_heads), int(D), int(o.max_context)),
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

void Decoder::note_state_peak(int64_t copies) {
  const Impl& I = *impl_;
  const int64_t B = opt_.batch, state_w = I.mamba_state_w + I.gdn_state_w;
  int64_t now = B * (I.window_w + I.pending_w + I.rewind_w);
  if (opt_.strategy == DecodeStrategy::kStandard)
    now += (B * (opt_.spec_tokens > 0 && opt_.draft_states ? opt_.spec_tokens + 1 : 1) + copies) * state_w;
  else if (I.recompute)  // live states and sparse checkpoints
    now += (2 * B + copies) * state_w;
  else
    now += I.m_pool.peak_live() * I.mamba_state_w + I.g_pool.peak_live() * I.gdn_state_w +
           B * (I.mamba_log_w + I.gdn_log_w);
  state_peak_ = std::max(state_peak_, now);
}

Status Decoder::reset() {
  Impl& I = *impl_;
  for (LayerState& L : I.layers) {
    if (L.state != nullptr) RSSM_CU(cudaMemsetAsync(L.state, 0, size_t(I.state_slots * L.slot_bytes), I.stream), "reset");
    if (L.window != nullptr)
      RSSM_CU(cudaMemsetAsync(L.window, 0, size_t(opt_.batch * L.window_seq_bytes), I.stream), "reset");
    if (L.ck_window != nullptr)
      RSSM_CU(cudaMemsetAsync(L.ck_window, 0, size_t(opt_.batch * L.window_seq_bytes), I.stream), "reset");
  }
  RSSM_CU(cudaStreamSynchronize(I.stream), "reset");
  std::fill(pos_.begin(), pos_.end(), 0);
  I.last_rows = 0;
  std::fill(I.m_count.begin(), I.m_count.end(), 0), std::fill(I.g_count.begin(), I.g_count.end(), 0);
  std::fill(I.cur.begin(), I.cur.end(), 0);
  for (auto& t : I.toks) t.clear();
  std::fill(I.ck_pos.begin(), I.ck_pos.end(), 0), std::fill(I.ck_mark.begin(), I.ck_mark.end(), 0);
  I.m_pool.reset(), I.g_pool.reset();
  I.commit_pending = false, verify_T_ = 0;
  state_peak_ = 0;
  note_state_peak(0);
  poisoned_ = false;
  return {};
}

Status Decoder::check_ready() const {
  if (poisoned_)
    return invalid_argument("cuda decode: an earlier step failed part-way; the states are undefined until reset()");
  if (verify_T_ != 0) return invalid_argument("cuda decode: the last verify awaits accept()");
  return {};
}

Status Decoder::clear(int64_t b) {
  Impl& I = *impl_;
  if (b < 0 || b >= opt_.batch)
    return invalid_argument("cuda decode: clear: sequence " + std::to_string(b) + " out of range [0, " +
                            std::to_string(opt_.batch) + ")");
  RSSM_RETURN_IF_ERROR(check_ready());
  const bool replay = opt_.strategy == DecodeStrategy::kReplay;
  if (I.commit_pending) {  // the other sequences' windows take their accepted rows first
    RSSM_CU(cudaMemcpyAsync(I.plan, I.plan_host, sizeof(int32_t) * kPlanFields * I.field_len(), cudaMemcpyHostToDevice,
                            I.stream),
            "clear");
    RSSM_RETURN_IF_ERROR(I.commit_windows());
    I.commit_pending = false;
  }
  // Replay: a slot of its own (fresh where others read the old one).
  const int32_t m_slot = replay ? I.m_pool.fold_target(b) : 0, g_slot = replay ? I.g_pool.fold_target(b) : 0;
  auto zero = [&](void* base, int64_t index, int64_t bytes) -> Status {
    if (base == nullptr || bytes == 0) return {};
    RSSM_CU(cudaMemsetAsync(static_cast<char*>(base) + index * bytes, 0, size_t(bytes), I.stream), "clear");
    return {};
  };
  for (LayerState& L : I.layers) {
    if (L.state == nullptr) continue;
    if (replay) {
      RSSM_RETURN_IF_ERROR(zero(L.state, L.log_k != nullptr ? g_slot : m_slot, L.slot_bytes));
    } else {
      RSSM_RETURN_IF_ERROR(zero(L.state, b * I.slots_per_seq + I.cur[size_t(b)], L.slot_bytes));
      if (I.recompute) RSSM_RETURN_IF_ERROR(zero(L.state, I.sparse_base + b, L.slot_bytes));
    }
    RSSM_RETURN_IF_ERROR(zero(L.window, b, L.window_seq_bytes));
    if (L.ck_window != nullptr) RSSM_RETURN_IF_ERROR(zero(L.ck_window, b, L.window_seq_bytes));
  }
  RSSM_CU(cudaStreamSynchronize(I.stream), "clear");
  if (replay) I.m_pool.folded(b, m_slot), I.g_pool.folded(b, g_slot);
  pos_[size_t(b)] = 0;
  I.m_count[size_t(b)] = I.g_count[size_t(b)] = 0;
  if (!I.toks.empty()) I.toks[size_t(b)].clear();
  I.ck_pos[size_t(b)] = I.ck_mark[size_t(b)] = 0;
  state_written_ += I.window_w + I.mamba_state_w + I.gdn_state_w;
  note_state_peak(0);
  return {};
}

int Decoder::log_room() const {
  const Impl& I = *impl_;
  int t = std::min(opt_.max_chunk, I.log_limit);
  for (size_t b = 0; b < pos_.size(); ++b) {
    if (I.has_mamba) t = std::min(t, opt_.window - I.m_count[b]);
    if (I.has_gdn) t = std::min(t, opt_.window - std::max(I.g_count[b], 1));
  }
  // A GDN fold keeps the step's T entries, which must leave a verify room.
  if (I.has_gdn && opt_.spec_tokens > 0) t = std::min(t, opt_.window - opt_.spec_tokens);
  return std::max(t, 1);
}

Status Decoder::step(std::span<const int32_t> tokens, int T, std::span<int32_t> next, float* logits) {
  if (T < 1 || T > max_chunk())
    return invalid_argument("cuda decode: " + std::to_string(T) + " tokens per sequence this step; the decoder takes 1.." +
                            std::to_string(max_chunk()) + " (max_chunk)");
  if (int64_t(next.size()) != opt_.batch)
    return invalid_argument("cuda decode: a step returns one token per sequence (" + std::to_string(opt_.batch) +
                            "), got room for " + std::to_string(next.size()));
  return run(tokens, T, false, next, logits);
}

Status Decoder::verify(std::span<const int32_t> tokens, int T, std::span<int32_t> argmax, float* logits) {
  if (opt_.spec_tokens == 0) return invalid_argument("cuda decode: verify needs a decoder created with spec_tokens > 0");
  if (opt_.strategy == DecodeStrategy::kStandard && !opt_.draft_states)
    return invalid_argument("cuda decode: verify needs the standard layout's per-draft states (draft_states); this "
                            "decoder takes feeds only");
  if (T < 2 || T > opt_.spec_tokens)
    return invalid_argument("cuda decode: a verify of " + std::to_string(T) + " tokens per sequence; this decoder takes 2.." +
                            std::to_string(opt_.spec_tokens) + " (spec_tokens)");
  if (int64_t(argmax.size()) != opt_.batch * T)
    return invalid_argument("cuda decode: a verify returns " + std::to_string(opt_.batch * T) + " argmax rows, got room for " +
                            std::to_string(argmax.size()));
  return run(tokens, T, true, argmax, logits);
}

Status Decoder::feed(std::span<const int32_t> tokens, int T, std::span<const int32_t> count,
                     std::span<int32_t> argmax, float* logits) {
  const int64_t B = opt_.batch;
  if (opt_.spec_tokens == 0) return invalid_argument("cuda decode: feed needs a decoder created with spec_tokens > 0");
  if (T < 2 || T > opt_.spec_tokens)
    return invalid_argument("cuda decode: a feed of " + std::to_string(T) + " tokens per sequence; this decoder takes 2.." +
                            std::to_string(opt_.spec_tokens) + " (spec_tokens)");
  if (int64_t(count.size()) != B)
    return invalid_argument("cuda decode: feed takes one count per sequence (" + std::to_string(B) + "), got " +
                            std::to_string(count.size()));
  for (int64_t b = 0; b < B; ++b)
    if (count[size_t(b)] < 0 || count[size_t(b)] > T)
      return invalid_argument("cuda decode: sequence " + std::to_string(b) + " takes " + std::to_string(count[size_t(b)]) +
                              " tokens of a feed of " + std::to_string(T) + " (0.." + std::to_string(T) + ")");
  if (int64_t(argmax.size()) != B * T)
    return invalid_argument("cuda decode: a feed returns " + std::to_string(B * T) + " argmax rows, got room for " +
                            std::to_string(argmax.size()));
  feed_count_ = count.data();
  const Status st = run(tokens, T, true, argmax, logits);
  feed_count_ = nullptr;
  RSSM_RETURN_IF_ERROR(st);
  return accept_rows(count, true);
}

Status Decoder::accept(std::span<const int32_t> accepted) { return accept_rows(accepted, false); }

Status Decoder::accept_rows(std::span<const int32_t> accepted, bool masked) {
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
  // recompute: a verify ran every sequence's live state through all T
  // rows; those that keep fewer go back to their sparse checkpoint.
  std::vector<int64_t> rerun(size_t(B), -1);
  bool any_rerun = false;
  for (int64_t b = 0; b < B; ++b) {
    const int a = accepted[size_t(b)];
    pos_[size_t(b)] += a;
    if (replay) {  // a folded log holds the verify's T at its front (Mamba2 after a feed: nothing)
      I.m_count[size_t(b)] = I.m_folded[size_t(b)] ? (masked ? 0 : a) : I.m_count[size_t(b)] + a;
      I.g_count[size_t(b)] = (I.g_folded[size_t(b)] ? 0 : I.g_count[size_t(b)]) + a;
    } else if (!masked && !I.recompute) {  // the state after the last accepted token is in the verify's slot for it
      I.cur[size_t(b)] = (I.cur[size_t(b)] + a) % I.slots_per_seq;
    }
    if (!I.toks.empty()) {
      const int32_t* row = I.host_field(kTokens) + b * T;
      I.toks[size_t(b)].insert(I.toks[size_t(b)].end(), row, row + a);
    }
    if (I.recompute && !masked && a < T) rerun[size_t(b)] = pos_[size_t(b)], any_rerun = true;
    I.host_field(kCommitRows)[b] = int32_t(b * T);
    I.host_field(kCommitCount)[b] = a;
  }
  I.host_field(kCommitRows)[B] = int32_t(B * T);
  I.commit_pending = true;
  verify_T_ = 0;
  if (any_rerun) RSSM_RETURN_IF_ERROR(rebuild(rerun));
  return note_checkpoints();
}

Status Decoder::run(std::span<const int32_t> tokens, int T, bool verify, std::span<int32_t> next, float* logits) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch, V = I.m.config().vocab_size;
  RSSM_RETURN_IF_ERROR(check_ready());
  if (int64_t(tokens.size()) != B * T)
    return invalid_argument("cuda decode: a step takes " + std::to_string(T) + " token(s) per sequence (" +
                            std::to_string(B * T) + " in all), got " + std::to_string(tokens.size()));
  // A feed's dropped rows land in the room past the context.
  for (int64_t b = 0; b < B; ++b)
    if (pos_[size_t(b)] + (feed_count_ != nullptr ? feed_count_[b] : T) > opt_.max_context)
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
  // A chunk the decode kernels do not take (or, under replay, that a log
  // has no room for) runs the chunk scans; replay's then folds every log
  // whole, with the chunk, into a new checkpoint.
  // Exact replay takes every chunk of a model with GDN layers through the
  // scans, as the standard layout does: GDN's scan rounds unlike its step
  // kernels (Mamba2's has the step's bits either way).
  const bool scan = !verify && T > 1 && (!replay || T > log_room() || (opt_.exact && I.has_gdn));
  // Where the standard step is the faster (Impl::m_steps, g_steps), a plain
  // one-token step folds every sequence's log with its token: through the
  // standard step where every log of that kind is empty, else Mamba2's
  // replay fold (which takes the new entry too) or, GDN, a one-token chunk
  // scan over the log — after which the logs stay empty.
  const bool plain = replay && !verify && !scan && T == 1 && feed_count_ == nullptr;
  const bool steps[2] = {plain && I.m_steps, plain && I.g_steps};
  const bool m_empty = std::all_of(I.m_count.begin(), I.m_count.end(), [](int c) { return c == 0; });
  const bool g_empty = std::all_of(I.g_count.begin(), I.g_count.end(), [](int c) { return c == 0; });
  I.m_step = steps[0] && m_empty;
  I.g_step = steps[1] ? (g_empty ? 1 : 2) : 0;
  bool fold = false;
  // Per kind (Mamba2, GDN), what each sequence's fold does: entries folded
  // into `target` (written only where `write`), entries moved to the front,
  // how far its checkpoint advances, and its log's length after the step.
  struct KindPlan {
    std::vector<int> fold_n, move_from, move_n, roll, after;
    std::vector<char> folds, write;
    std::vector<int32_t> target, join;  // join: a family member's new slot (−1: none)
  };
  KindPlan kp[2];
  for (int k = 0; k < 2; ++k) {
    const bool mamba = k == 0;
    const bool has = mamba ? I.has_mamba : I.has_gdn;
    const std::vector<int>& cnt = mamba ? I.m_count : I.g_count;
    SlotPool& pool = mamba ? I.m_pool : I.g_pool;
    KindPlan& P = kp[k];
    P.fold_n.assign(size_t(B), 0), P.move_from.assign(size_t(B), 0), P.move_n.assign(size_t(B), 0);
    P.roll.assign(size_t(B), 0), P.after.assign(size_t(B), 0), P.folds.assign(size_t(B), 0);
    P.write.assign(size_t(B), 0), P.target.assign(size_t(B), -1), P.join.assign(size_t(B), -1);
    for (int64_t b = 0; b < B; ++b) {
      const int c = cnt[size_t(b)];
      P.move_from[size_t(b)] = c;
      P.after[size_t(b)] = c + T;
      if (scan || steps[k]) {
        if (replay && has) P.folds[size_t(b)] = 1, P.fold_n[size_t(b)] = P.roll[size_t(b)] = c + T, P.after[size_t(b)] = 0;
        fold |= steps[k];
        continue;
      }
      if (!(replay && has && I.log_fills(c, T))) continue;
      fold = true;
      P.folds[size_t(b)] = 1;
      // AR Mamba2 folds everything, and a feed its counted rows too (they
      // are committed on arrival; the rest are dropped); a verify its
      // committed prefix; GDN its prefix (the step's u are only known after
      // the pass) — the rest move to the front.
      const bool feed_all = mamba && feed_count_ != nullptr;
      const int n = mamba && !verify ? c + T : feed_all ? c + feed_count_[b] : c;
      P.fold_n[size_t(b)] = P.roll[size_t(b)] = n;
      P.move_n[size_t(b)] = feed_all ? 0 : c + T - n;
      P.after[size_t(b)] = c + T - n;
    }
    // Families (plain steps of forked sequences): sequences reading one
    // checkpoint whose logs agree on their oldest entries fold those once,
    // into one new checkpoint they all read, and keep the rest (at least
    // W/2) — instead of each writing its own. Beams that parted recently
    // keep sharing a state.
    if (!replay || verify || scan || steps[k] || !has || I.toks.empty()) continue;
    const int keep = std::max(T, W / 2);
    std::map<std::pair<int32_t, int>, std::vector<int64_t>> groups;  // (slot, entries) → sequences
    for (int64_t b = 0; b < B; ++b)
      if (P.folds[size_t(b)] && pool.refs(pool.slot(b)) > 1) groups[{pool.slot(b), cnt[size_t(b)]}].push_back(b);
    for (auto& [key, members] : groups) {
      const int n = key.second + T, d = n - keep;
      if (members.size() < 2 || d < 1) continue;
      std::map<std::vector<int32_t>, std::vector<int64_t>> fams;  // by the tokens of the entries folded
      for (int64_t b : members) {
        const std::vector<int32_t>& t = I.toks[size_t(b)];
        const int64_t c0 = pos_[size_t(b)] - key.second;
        fams[std::vector<int32_t>(t.begin() + c0, t.begin() + c0 + d)].push_back(b);
      }
      for (auto& [prefix, fam] : fams) {
        if (fam.size() < 2) continue;
        const int32_t target = pool.fold_target(fam[0]);
        for (size_t i = 0; i < fam.size(); ++i) {
          const int64_t b = fam[i];
          P.fold_n[size_t(b)] = i == 0 ? d : 0;  // the first writes, the others read what it wrote
          P.roll[size_t(b)] = d;
          P.move_from[size_t(b)] = d;
          P.move_n[size_t(b)] = keep;
          P.after[size_t(b)] = keep;
          P.target[size_t(b)] = target;
          if (i > 0) P.join[size_t(b)] = target;
        }
      }
    }
  }
  for (int64_t b = 0; b < B; ++b) {
    const int m = I.m_count[size_t(b)], g = I.g_count[size_t(b)];
    const bool m_fold = kp[0].folds[size_t(b)], g_fold = kp[1].folds[size_t(b)];
    I.m_folded[size_t(b)] = m_fold, I.g_folded[size_t(b)] = g_fold;
    const int64_t pos = pos_[size_t(b)];
    for (int t = 0; t < T; ++t) {
      const int64_t r = b * T + t;
      I.host_field(kTokens)[r] = tokens[size_t(r)];
      I.host_field(kRowPos)[r] = int32_t(pos + t);
      I.host_field(kRowSeq)[r] = int32_t(b);
      // Replay: the sequence's log; standard: the step's compact row.
      I.host_field(kMEntry)[r] = int32_t(replay && !I.m_step ? b * W + m + t : r);
      I.host_field(kGEntry)[r] = int32_t(b * W + g + t);
      // Standard: a verify writes each token's state to the sequence's next
      // slots; anything else updates the current one in place, as
      // recompute's verify does; a feed's dropped rows go to the scratch slot.
      const int32_t live = int32_t(b * S + I.cur[size_t(b)]);
      I.host_field(kOutSlot)[r] = !verify                  ? live
                                  : feed_count_ != nullptr ? (t < feed_count_[b] ? live : I.scratch_slot)
                                  : I.recompute            ? live
                                                           : int32_t(b * S + (I.cur[size_t(b)] + 1 + t) % S);
    }
    I.host_field(kSeqPos)[b] = int32_t(pos);
    I.host_field(kSeqLen)[b] = int32_t(pos + T);
    I.host_field(kCuRows)[b] = int32_t(b * T);
    if (replay) {  // a fold writes in place unless another sequence reads the checkpoint
      I.host_field(kMSlot)[b] = I.m_pool.slot(b), I.host_field(kGSlot)[b] = I.g_pool.slot(b);
      for (int k = 0; k < 2; ++k) {
        KindPlan& P = kp[k];
        SlotPool& pool = k == 0 ? I.m_pool : I.g_pool;
        if (P.folds[size_t(b)] && P.target[size_t(b)] < 0) P.target[size_t(b)] = pool.fold_target(b);
        P.write[size_t(b)] = P.fold_n[size_t(b)] > 0;
        I.host_field(k == 0 ? kMFoldSlot : kGFoldSlot)[b] = P.target[size_t(b)] >= 0 ? P.target[size_t(b)] : pool.slot(b);
      }
    } else {
      const int32_t slot = int32_t(b * S + I.cur[size_t(b)]);
      I.host_field(kMSlot)[b] = I.host_field(kGSlot)[b] = I.host_field(kMFoldSlot)[b] = I.host_field(kGFoldSlot)[b] = slot;
    }
    I.host_field(kWinSlot)[b] = int32_t(b);
    // The entries a replay kernel reads: the log and the step's T; a chunk
    // scan applies the log before its chunk.
    I.host_field(kMLog)[b] = replay ? m + (scan ? 0 : T) : T;
    I.host_field(kMFold)[b] = kp[0].fold_n[size_t(b)];
    I.host_field(kMMoveFrom)[b] = kp[0].move_from[size_t(b)];
    I.host_field(kMMoveCount)[b] = kp[0].move_n[size_t(b)];
    I.host_field(kMRoll)[b] = kp[0].roll[size_t(b)];
    I.host_field(kGLog)[b] = g + (scan || I.g_step != 0 ? 0 : T);  // a chunk scan's: the log before the chunk
    I.host_field(kGFold)[b] = kp[1].fold_n[size_t(b)];
    I.host_field(kGMoveFrom)[b] = kp[1].move_from[size_t(b)];
    I.host_field(kGMoveCount)[b] = kp[1].move_n[size_t(b)];
    I.host_field(kGRoll)[b] = kp[1].roll[size_t(b)];
  }
  I.host_field(kCuRows)[B] = int32_t(B * T);
  I.step_rows = B * T, I.ragged = false;
  // Fork groups: on a plain step the readers of one checkpoint that do not
  // fold decode together (exact replay keeps the stepping kernels).
  int64_t m_shared = 0, g_shared = 0;
  const bool groups = replay && opt_.fork_groups != 0 && !I.toks.empty() && !verify && !scan && T == 1 && !opt_.exact;
  I.m_groups =
      groups && I.has_mamba && !steps[0]
          ? I.plan_fork_groups(I.m_pool, kp[0].fold_n, false, I.m.config().mamba.n_heads, kMSeq, kMGroup, &m_shared)
          : 0;
  I.g_groups =
      groups && I.has_gdn && !steps[1]
          ? I.plan_fork_groups(I.g_pool, kp[1].fold_n, true, I.m.config().gdn.n_v_heads, kGSeq, kGGroup, &g_shared)
          : 0;
  RSSM_RETURN_IF_ERROR(launch_or_poison(T, fold, verify, scan, logits));
  reads_shared_ += m_shared + g_shared;
  if (fold || (scan && replay)) ++folds_;
  if (replay)
    for (int k = 0; k < 2; ++k) {
      SlotPool& pool = k == 0 ? I.m_pool : I.g_pool;
      for (int64_t b = 0; b < B; ++b) {  // the writers first: a family's members then join their slot
        if (!kp[k].folds[size_t(b)] || kp[k].join[size_t(b)] >= 0) continue;
        pool.folded(b, I.host_field(k == 0 ? kMFoldSlot : kGFoldSlot)[b]);
      }
      for (int64_t b = 0; b < B; ++b)
        if (kp[k].join[size_t(b)] >= 0) pool.move_to(b, kp[k].join[size_t(b)]);
    }
  note_state_peak(0);
  // A fold with options.rewind also rolls the checkpoint's conv windows.
  for (int64_t b = 0; b < B; ++b)
    state_written_ += I.window_w + (replay ? kp[0].write[size_t(b)] * I.mamba_state_w + kp[1].write[size_t(b)] * I.gdn_state_w +
                                                 (opt_.rewind && (I.m_folded[size_t(b)] || I.g_folded[size_t(b)])) * I.window_w
                                           : (verify ? T : 1) * (I.mamba_state_w + I.gdn_state_w));
  if (verify) {
    for (int64_t r = 0; r < B * T; ++r) next[size_t(r)] = I.next_host[r];
    verify_T_ = T;  // positions and logs move in accept()
    return {};
  }
  for (int64_t b = 0; b < B; ++b) {
    next[size_t(b)] = I.next_host[opt_.all_logits ? b * T + T - 1 : b];
    pos_[size_t(b)] += T;
    if (replay) I.m_count[size_t(b)] = kp[0].after[size_t(b)], I.g_count[size_t(b)] = kp[1].after[size_t(b)];
    if (!I.toks.empty()) I.toks[size_t(b)].insert(I.toks[size_t(b)].end(), tokens.begin() + b * T, tokens.begin() + b * T + T);
  }
  return note_checkpoints();
}

Status Decoder::launch_or_poison(int T, bool fold, bool verify, bool scan, float* logits) {
  Impl& I = *impl_;
  // From the first launch on, a failure leaves the device part-way through
  // the step (windows shifted, states or logs written): the decoder refuses
  // further steps until reset().
  if (const Status st = launch_step(T, fold, verify, I.commit_pending, scan, logits); !st.ok()) {
    cudaStreamSynchronize(I.stream);  // nothing of the step may still be reading the plan
    cudaGetLastError();
    poisoned_ = true;
    return st;
  }
  I.commit_pending = false;
  return {};
}

Status Decoder::launch_step(int T, bool fold, bool verify, bool commit, bool scan, float* logits) {
  Impl& I = *impl_;
  const int64_t B = opt_.batch, V = I.m.config().vocab_size;
  // The first step of each kind runs eagerly (cuBLAS settles its choices
  // and workspace there); the second captures the graph every later one
  // replays. A ragged step always runs eagerly: its rows differ from step
  // to step, and each count of rows would be a graph of its own.
  const int64_t key = graph_key(T, fold, verify, commit, scan, I.m_groups, I.g_groups, int(I.m_step) + 2 * I.g_step);
  if (I.ragged) {
    RSSM_RETURN_IF_ERROR(I.enqueue(T, fold, verify, commit, scan));
  } else if (!opt_.graphs || !I.ran_eager.count(key)) {
    RSSM_RETURN_IF_ERROR(I.enqueue(T, fold, verify, commit, scan));
    I.ran_eager.insert(key);
  } else {
    auto it = I.graphs.find(key);
    if (it == I.graphs.end()) {
      RSSM_CU(cudaStreamBeginCapture(I.stream, cudaStreamCaptureModeThreadLocal), "graph capture");
      const Status s = I.enqueue(T, fold, verify, commit, scan);
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
  const int64_t out_rows = opt_.all_logits || verify ? I.step_rows : B;
  I.last_rows = out_rows;
  if (logits != nullptr)
    RSSM_CU(cudaMemcpyAsync(logits, I.logits, sizeof(float) * size_t(out_rows * V), cudaMemcpyDeviceToHost, I.stream),
            "logits");
  RSSM_CU(cudaStreamSynchronize(I.stream), "step");
  return {};
}

}  // namespace replayssm::cuda
