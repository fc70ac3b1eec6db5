// BenchDecodeRunner (see decoder_runner.h). Decode time is host wall time
// around the decode steps: each step ends in the host's wait for the
// argmax, so the clock brackets exactly the GPU work of those steps plus
// the host's per-step plan — what a caller sees per token.
#include "bench/decoder_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "bench/oracle_draft.h"
#include "core/clock.h"
#include "workloads/speculative.h"
#include "runtime/cuda/generate_cuda.h"
#include "runtime/cuda/search_cuda.h"
#include "runtime/cuda/tree_search_cuda.h"
#include "bench/best_first.h"
#include "bench/memory.h"

namespace replayssm::cuda {

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

Result<DecodeStrategy> device_strategy(Strategy s) {
  switch (s) {
    case Strategy::kSnapshot: return DecodeStrategy::kStandard;
    case Strategy::kReplay: return DecodeStrategy::kReplay;
    case Strategy::kRecompute: return DecodeStrategy::kRecompute;
  }
  return invalid_argument("unknown strategy");
}

BenchDecodeRunner::~BenchDecodeRunner() = default;

Result<std::unique_ptr<BenchDecodeRunner>> BenchDecodeRunner::create(const Model& model, const bench::SweepOptions& opt,
                                                                     uint64_t seed) {
  std::unique_ptr<BenchDecodeRunner> r(new BenchDecodeRunner(model, opt));
  RSSM_ASSIGN_OR_RETURN(r->model_, DeviceModel::create(model, seed));
  return r;
}

Result<bench::Measurement> BenchDecodeRunner::run_tree(const bench::Config& c) {
  const bench::SweepOptions& opt = opt_;
  decoder_.reset();  // the tree holds its own decoder
  TreeSearchCudaOptions o;
  RSSM_ASSIGN_OR_RETURN(o.strategy, device_strategy(c.strategy));
  o.window = static_cast<int>(c.window);
  o.chunk = bench::tree_chunk(c.window), o.prefill_chunk = bench::kTreePrefillChunk;
  o.slots = std::max<int64_t>(3, bench::kTreeSlotsPerChild * c.batch);
  o.max_context = opt.prompt_tokens + opt.new_tokens + 1;  // a path grows a token per expansion at most
  RSSM_ASSIGN_OR_RETURN(std::unique_ptr<TreeSearchCuda> tree, TreeSearchCuda::create(*model_, o));
  RSSM_ASSIGN_OR_RETURN(const TreeSearchCuda::NodeId root, tree->root(ctx_.prompt(0)));
  const int64_t written0 = tree->decoder().state_bytes_written();
  bench::Measurement m;
  const double t0 = now_seconds();
  RSSM_ASSIGN_OR_RETURN(m.emitted, bench::best_first(*tree, root, opt.prompt_tokens, model_->config().vocab_size,
                                                     c.batch, opt.new_tokens));
  m.decode_s = now_seconds() - t0;
  const Decoder& dec = tree->decoder();
  const DecoderMemory& mem = dec.memory();
  m.state.state_bytes_peak = dec.state_bytes_peak();
  m.state.kv_bytes_peak = mem.kv_bytes;
  m.state.state_writes_bytes = dec.state_bytes_written() - written0;
  m.state.restores_reprefill = tree->stats().reprefills;
  m.device_bytes = model_->bytes() + mem.state_bytes + mem.kv_bytes + mem.workspace_bytes;
  m.device_strategy = decode_strategy_name(o.strategy);
  return m;
}

Result<bench::Measurement> BenchDecodeRunner::run(const bench::Config& c) {
  const bool search = c.workload == bench::Workload::kBeam || c.workload == bench::Workload::kBestOfN;
  if (c.workload == bench::Workload::kTree) return run_tree(c);
  if (c.workload == bench::Workload::kRestore) return run_restore(c);
  if (c.workload != bench::Workload::kAr && c.workload != bench::Workload::kSpec && !search)
    return unsupported(std::string("--workload ") + bench::workload_name(c.workload) + ": not supported on cuda yet");
  const bench::SweepOptions& opt = opt_;
  const bool spec = c.workload == bench::Workload::kSpec;
  DecoderOptions o;
  RSSM_ASSIGN_OR_RETURN(o.strategy, device_strategy(c.strategy));
  o.batch = c.batch;
  o.window = static_cast<int>(c.window);
  o.spec_tokens = spec ? static_cast<int>(c.spec_t) + 1 : 0;
  // Room for a speculating batch's idle sequences and a verify's reach
  // (decoder_context), and for the references' spec_t extra tokens.
  CudaGenerateOptions reach;
  reach.max_new_tokens = opt.new_tokens + (spec ? c.spec_t : 0);
  if (spec) reach.spec.kind = SpecOptions::kCustom, reach.spec.tokens = c.spec_t;
  o.max_context = decoder_context(size_t(opt.prompt_tokens), reach);
  o.max_chunk = 1;  // the prompt goes one token per step, as estimate_device_run_bytes assumes
  o.forks = search, o.fork_groups = opt.fork_groups;
  RSSM_ASSIGN_OR_RETURN(Decoder * decp, decoder_for(o));
  Decoder& dec = *decp;
  const std::vector<std::vector<int32_t>> prompts = ctx_.prompts(c.batch);
  bench::Measurement m;
  Counters at0;
  if (search) {
    // Width (n) = batch on prompt 0, as the CPU reference: every hypothesis
    // appends a token per step after the prefill's first (no EOS).
    SearchStats st;
    at0 = counters(dec);
    if (c.workload == bench::Workload::kBeam) {
      BeamOptions b;
      b.width = c.batch, b.max_new_tokens = opt.new_tokens, b.stop_at_eos = false;
      RSSM_RETURN_IF_ERROR(beam_search_cuda(dec, ctx_.prompt(0), b, &st).status());
    } else {
      BestOfNOptions b;
      b.n = c.batch, b.max_new_tokens = opt.new_tokens, b.stop_at_eos = false;
      b.sampling = {opt.bon_temperature, 1.0f, opt.seed};
      RSSM_RETURN_IF_ERROR(best_of_n_cuda(dec, ctx_.prompt(0), b, &st).status());
    }
    m.decode_s = st.decode_s;
    m.emitted = c.batch * std::max<int64_t>(opt.new_tokens - 1, 0);
  } else if (!spec) {
    const size_t B = static_cast<size_t>(c.batch);
    std::vector<int32_t> tok(B), next(B);
    RSSM_RETURN_IF_ERROR(dec.reset());
    at0 = counters(dec);
    for (int64_t t = 0; t < opt.prompt_tokens; ++t) {
      for (size_t b = 0; b < B; ++b) tok[b] = prompts[b][static_cast<size_t>(t)];
      RSSM_RETURN_IF_ERROR(dec.step(tok, next));
    }
    const double t0 = now_seconds();
    for (int64_t t = 1; t < opt.new_tokens; ++t) {
      tok.swap(next);
      RSSM_RETURN_IF_ERROR(dec.step(tok, next));
    }
    m.decode_s = now_seconds() - t0;
    m.emitted = c.batch * (opt.new_tokens - 1);
  } else {
    CudaGenerateOptions g;
    g.max_new_tokens = opt.new_tokens;
    g.stop_at_eos = false;  // random weights: every run decodes the same number of tokens
    g.spec.tokens = c.spec_t;
    if (opt.draft == bench::DraftKind::kNgram) {
      g.spec.kind = SpecOptions::kNgram;
    } else {
      // The oracle drafts read the target's greedy continuation, decoded
      // here on the same decoder (the CPU could not run a preset's shapes).
      // Missing references go as one batch of the decoder's size, padded
      // with copies of the first prompt.
      auto greedy = [&dec](const std::vector<std::vector<int32_t>>& ps,
                           int64_t new_tokens) -> Result<std::vector<std::vector<int32_t>>> {
        std::vector<std::vector<int32_t>> all(ps);
        all.resize(static_cast<size_t>(dec.options().batch), ps.front());
        CudaGenerateOptions ar;
        ar.max_new_tokens = new_tokens;
        ar.stop_at_eos = false;
        RSSM_ASSIGN_OR_RETURN(BatchResult r, generate_batch_cuda(dec, all, ar));
        r.tokens.resize(ps.size());
        return std::move(r.tokens);
      };
      RSSM_RETURN_IF_ERROR(ctx_.prepare_references(c.batch, opt.prompt_tokens + opt.new_tokens + c.spec_t, greedy));
      g.spec.kind = SpecOptions::kCustom;
      const int64_t V = model_->config().vocab_size;
      const double accuracy = c.draft_accuracy;
      const uint64_t seed = opt.seed;
      bench::BenchContext* ctx = &ctx_;
      g.spec.make_source = [ctx, accuracy, seed, V](int64_t i) -> Result<std::unique_ptr<DraftSource>> {
        return std::unique_ptr<DraftSource>(std::make_unique<bench::OracleDraft>(
            &ctx->reference(i), accuracy, V, seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(i)));
      };
    }
    at0 = counters(dec);  // generate resets the decoder, not its counters
    RSSM_ASSIGN_OR_RETURN(BatchResult r, generate_batch_cuda(dec, prompts, g));
    m.decode_s = r.decode_s;
    for (const auto& t : r.tokens) m.emitted += std::max<int64_t>(static_cast<int64_t>(t.size()) - 1, 0);
    m.spec = r.spec;
  }
  note_decoder(dec, at0, &m);
  return m;
}

Result<Decoder*> BenchDecodeRunner::decoder_for(const DecoderOptions& o) {
  const DecoderOptions& k = decoder_opt_;
  if (decoder_ == nullptr || k.strategy != o.strategy || k.batch != o.batch || k.max_context != o.max_context ||
      k.window != o.window || k.spec_tokens != o.spec_tokens || k.forks != o.forks || k.rewind != o.rewind ||
      k.max_chunk != o.max_chunk || k.fork_groups != o.fork_groups) {
    decoder_.reset();  // before the next one: the device holds one decoder at a time
    RSSM_ASSIGN_OR_RETURN(decoder_, Decoder::create(*model_, o));
    decoder_opt_ = o;
  }
  return decoder_.get();
}

Result<bench::Measurement> BenchDecodeRunner::run_restore(const bench::Config& c) {
  const bench::SweepOptions& opt = opt_;
  DecoderOptions o;
  RSSM_ASSIGN_OR_RETURN(o.strategy, device_strategy(c.strategy));
  const bool replay = o.strategy == DecodeStrategy::kReplay, recompute = o.strategy == DecodeStrategy::kRecompute;
  const bool goes_back = replay || recompute;  // rewind() reaches a checkpoint: the log's, or the sparse one
  o.batch = c.batch;
  o.window = static_cast<int>(c.window);
  o.max_context = opt.prompt_tokens + opt.new_tokens;
  o.rewind = replay;  // the log since the checkpoint (log_retention 0), pre-conv rows kept
  o.max_chunk = bench::restore_chunk(c.batch);  // what estimate_device_run_bytes sizes
  RSSM_ASSIGN_OR_RETURN(Decoder * decp, decoder_for(o));
  Decoder& dec = *decp;
  const size_t B = static_cast<size_t>(c.batch);
  std::vector<int32_t> next(B);
  // Tokens [from, to) into every sequence, in chunks as long as the decoder takes.
  auto feed = [&](const std::vector<int32_t>& ids, int64_t from, int64_t to) -> Status {
    for (int64_t t = from; t < to;) {
      const int T = static_cast<int>(std::min<int64_t>(dec.max_chunk(), to - t));
      std::vector<int32_t> tok;
      for (size_t b = 0; b < B; ++b) tok.insert(tok.end(), ids.begin() + t, ids.begin() + t + T);
      RSSM_RETURN_IF_ERROR(dec.step(tok, T, next));
      t += T;
    }
    return {};
  };
  // The base: prompt 0 and its greedy continuation, new_tokens of them,
  // all fed (not timed) — the CPU workload's base sequence.
  std::vector<int32_t> ids = ctx_.prompt(0);
  const int64_t prompt = static_cast<int64_t>(ids.size());
  RSSM_RETURN_IF_ERROR(dec.reset());
  const Counters at0 = counters(dec);
  RSSM_RETURN_IF_ERROR(feed(ids, 0, prompt));
  // While it grows, the head whose log reaches back furthest (the latest
  // such): the log path's restores start there, so they cover distances up
  // to W − 1 wherever the base's own end happens to fall in the fold cycle.
  int64_t deep_head = 0, deep_reach = -1;
  for (int64_t i = 0; i < opt.new_tokens; ++i) {
    ids.push_back(next[0]);
    const int64_t len = static_cast<int64_t>(ids.size());
    RSSM_RETURN_IF_ERROR(feed(ids, len - 1, len));
    if (goes_back && len - dec.rewind_floor(0) >= deep_reach) deep_head = len, deep_reach = len - dec.rewind_floor(0);
  }
  const int64_t L = static_cast<int64_t>(ids.size());
  // (position, head): restore_positions from the base's end, as on the
  // CPU, and positions 1, 2, 4, ... before a head, within its log (replay:
  // the deepest head, and its checkpoint; snapshot: the end, W − 1 back).
  std::vector<std::pair<int64_t, int64_t>> probes;
  for (int64_t p : bench::restore_positions(L)) probes.emplace_back(p, L);
  const int64_t tail_head = goes_back ? deep_head : L, reach = goes_back ? deep_reach : c.window - 1;
  for (int64_t d = 1; d <= reach && d < tail_head; d *= 2) probes.emplace_back(tail_head - d, tail_head);
  if (goes_back && deep_reach > 0 && deep_reach < deep_head)
    probes.emplace_back(deep_head - deep_reach, deep_head);  // the checkpoint itself
  std::sort(probes.begin(), probes.end());
  probes.erase(std::unique(probes.begin(), probes.end()), probes.end());
  bench::Measurement m;
  int64_t held = L;  // tokens of the base the decoder holds
  for (const auto& [p, head] : probes) {
    if (held != head) {  // back to the head as the base reached it, prompt chunks then single tokens (not timed)
      RSSM_RETURN_IF_ERROR(dec.reset());
      RSSM_RETURN_IF_ERROR(feed(ids, 0, std::min(head, prompt)));
      for (int64_t t = prompt; t < head; ++t) RSSM_RETURN_IF_ERROR(feed(ids, t, t + 1));
    }
    held = -1;
    const double t0 = now_seconds();
    const int64_t floor = dec.rewind_floor(0);
    RestorePath path = RestorePath::kReprefill;
    int64_t from = 0;
    if (goes_back && p >= floor) {  // replay: log replay; recompute: a re-prefill from the sparse checkpoint
      RSSM_RETURN_IF_ERROR(dec.rewind(std::vector<int64_t>(B, p)));
      path = p == floor ? RestorePath::kCheckpoint : replay ? RestorePath::kLogReplay : RestorePath::kReprefill;
      from = floor;
    } else {
      RSSM_RETURN_IF_ERROR(dec.reset());
      RSSM_RETURN_IF_ERROR(feed(ids, 0, p));
    }
    RSSM_RETURN_IF_ERROR(feed(ids, p, p + 1));
    const double dt = now_seconds() - t0;
    m.restores.push_back({p, p - from, path, dt});
    m.decode_s += dt;
    m.emitted += c.batch;
    (path == RestorePath::kReprefill   ? m.state.restores_reprefill
     : path == RestorePath::kLogReplay ? m.state.restores_log_replay
                                       : m.state.restores_checkpoint) += c.batch;
  }
  note_decoder(dec, at0, &m);
  return m;
}

BenchDecodeRunner::Counters BenchDecodeRunner::counters(const Decoder& dec) {
  return {dec.state_bytes_written(), dec.folds(), dec.checkpoint_reads_shared()};
}

void BenchDecodeRunner::note_decoder(const Decoder& dec, const Counters& at0, bench::Measurement* m) const {
  const DecoderMemory& mem = dec.memory();
  m->state.state_bytes_peak = dec.state_bytes_peak();  // in use at most (allocated: mem.state_bytes)
  m->state.kv_bytes_peak = mem.kv_bytes;
  m->device_bytes = model_->bytes() + mem.state_bytes + mem.kv_bytes + mem.workspace_bytes;
  m->device_strategy = decode_strategy_name(dec.options().strategy);
  m->state.state_writes_bytes = dec.state_bytes_written() - at0.written;
  if (dec.options().strategy == DecodeStrategy::kReplay) {
    m->folds = dec.folds() - at0.folds;
    m->reads_shared = dec.checkpoint_reads_shared() - at0.reads_shared;
  }
}

}  // namespace replayssm::cuda
