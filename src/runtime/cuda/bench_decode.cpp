// BenchDecodeRunner (see bench_decode.h). Decode time is host wall time
// around the decode steps: each step ends in the host's wait for the
// argmax, so the clock brackets exactly the GPU work of those steps plus
// the host's per-step plan — what a caller sees per token.
#include "runtime/cuda/bench_decode.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "core/clock.h"

namespace replayssm::cuda {

Result<DeviceInfo> device_info() {
  int n = 0, dev = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    cudaGetLastError();
    return unsupported(std::string("--device cuda: no CUDA device is visible to this process") +
                       (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : ""));
  }
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
    case Strategy::kRecompute: break;
  }
  return unsupported("--strategy recompute: not supported on cuda yet (the CUDA decoder has no sparse-checkpoint "
                     "layout); use replay or snapshot");
}

BenchDecodeRunner::~BenchDecodeRunner() = default;

Result<std::unique_ptr<BenchDecodeRunner>> BenchDecodeRunner::create(const Model& model, const bench::SweepOptions& opt,
                                                                     uint64_t seed) {
  std::unique_ptr<BenchDecodeRunner> r(new BenchDecodeRunner(model, opt));
  RSSM_ASSIGN_OR_RETURN(r->model_, DeviceModel::create(model, seed));
  return r;
}

namespace {

// Bytes written to SSM state per sequence: the fp32 states (standard: every
// step; replay: on fold steps) and the bf16 conv windows (every step, both).
struct StateWidths {
  int64_t state = 0, window = 0;
};
StateWidths state_widths(const ModelConfig& c) {
  StateWidths w;
  for (BlockKind k : c.blocks) {
    if (k == BlockKind::kMamba2) {
      w.state += c.mamba.n_heads * c.mamba.head_dim * c.mamba.state_size * 4;
      w.window += (c.mamba.conv_width - 1) * c.mamba.conv_channels() * 2;
    } else if (k == BlockKind::kGatedDeltaNet) {
      w.state += c.gdn.n_v_heads * c.gdn.k_dim * c.gdn.v_dim * 4;
      w.window += (c.gdn.conv_width - 1) * c.gdn.conv_channels() * 2;
    }
  }
  return w;
}

}  // namespace

Result<bench::Measurement> BenchDecodeRunner::run(const bench::Config& c) {
  if (c.workload != bench::Workload::kAr)
    return unsupported(std::string("--workload ") + bench::workload_name(c.workload) + ": not supported on cuda yet");
  const bench::SweepOptions& opt = opt_;
  DecoderOptions o;
  RSSM_ASSIGN_OR_RETURN(o.strategy, device_strategy(c.strategy));
  o.batch = c.batch;
  o.max_context = opt.prompt_tokens + opt.new_tokens;
  o.window = static_cast<int>(c.window);
  o.max_chunk = 1;  // the prompt goes one token per step, as estimate_device_run_bytes assumes
  if (decoder_ == nullptr || decoder_opt_.strategy != o.strategy || decoder_opt_.batch != o.batch ||
      decoder_opt_.max_context != o.max_context || decoder_opt_.window != o.window) {
    decoder_.reset();  // before the next one: the device holds one decoder at a time
    RSSM_ASSIGN_OR_RETURN(decoder_, Decoder::create(*model_, o));
    decoder_opt_ = o;
  }
  Decoder& dec = *decoder_;
  const size_t B = static_cast<size_t>(c.batch);
  const std::vector<std::vector<int32_t>> prompts = ctx_.prompts(c.batch);
  std::vector<int32_t> tok(B), next(B);
  RSSM_RETURN_IF_ERROR(dec.reset());
  const int64_t folds0 = dec.folds();
  for (int64_t t = 0; t < opt.prompt_tokens; ++t) {
    for (size_t b = 0; b < B; ++b) tok[b] = prompts[b][static_cast<size_t>(t)];
    RSSM_RETURN_IF_ERROR(dec.step(tok, next));
  }
  const double t0 = now_seconds();
  for (int64_t t = 1; t < opt.new_tokens; ++t) {
    tok.swap(next);
    RSSM_RETURN_IF_ERROR(dec.step(tok, next));
  }
  bench::Measurement m;
  m.decode_s = now_seconds() - t0;
  m.emitted = c.batch * (opt.new_tokens - 1);
  const DecoderMemory& mem = dec.memory();
  m.store.state_bytes_peak = mem.state_bytes;
  m.store.kv_bytes_peak = mem.kv_bytes;
  m.device_bytes = model_->bytes() + mem.state_bytes + mem.kv_bytes + mem.workspace_bytes;
  m.device_strategy = decode_strategy_name(o.strategy);
  const int64_t steps = dec.length(), folds = dec.folds() - folds0;
  const StateWidths w = state_widths(model_->config());
  const bool replay = o.strategy == DecodeStrategy::kReplay;
  m.store.state_writes_bytes = c.batch * ((replay ? folds : steps) * w.state + steps * w.window);
  if (replay) m.folds = folds;
  return m;
}

}  // namespace replayssm::cuda
