// The `replayssm bench --device cuda` backend: the ar workload on
// cuda::Decoder as a sweep Runner (bench/runner.h), so the CUDA runs share
// the CPU reference's sweep, summaries, max_concurrency search and outputs.
//
// The storage strategies map onto the decoder's two state layouts:
//   snapshot → kStandard: each sequence's one state, read and written in
//              place every step (the committed state kept live — what a
//              snapshot store holds between drafts, with no drafts here);
//   replay   → kReplay: a checkpoint plus a log of the last < W inputs,
//              written only on the step that folds the log.
// recompute has no device layout (refused before anything runs:
// device_strategy, check_cuda_scope). ar, spec and restore run on this
// runner's decoder (spec through generate_batch_cuda's verify/accept,
// restore through Decoder::rewind or a re-prefill), beam and best-of-n
// through search_cuda.h, tree through TreeSearchCuda.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench/runner.h"
#include "bench/workloads.h"
#include "replayssm/model.h"
#include "runtime/cuda/decoder.h"
#include "backend/cuda/device_model.h"

namespace replayssm::cuda {

// The current CUDA device and its memory now (cudaMemGetInfo). Fails
// (unsupported) naming the CUDA error where no device is usable.
struct DeviceInfo {
  std::string name;
  int64_t free_bytes = 0, total_bytes = 0;
};
Result<DeviceInfo> device_info();

// The decoder layout that runs storage strategy `s`; recompute is refused.
Result<DecodeStrategy> device_strategy(Strategy s);

class BenchDecodeRunner : public bench::Runner {
 public:
  // Places `model` on the device; a model without matrices
  // (Model::random_without_matrices) gets them filled from `seed`.
  static Result<std::unique_ptr<BenchDecodeRunner>> create(const Model& model, const bench::SweepOptions& opt,
                                                           uint64_t seed);
  ~BenchDecodeRunner() override;

  const bench::SweepOptions& options() const override { return opt_; }
  // The max_concurrency budget, once known (e.g. the device memory free
  // after the weights are placed).
  void set_memory_budget(int64_t bytes) { opt_.memory_budget = bytes; }
  // One run: reset, prefill the prompts one token per step (not timed),
  // then new_tokens − 1 timed decode steps, each fed the previous argmax
  // (the first new token comes from the prefill, as on the CPU) — or, for
  // spec, generate_batch_cuda with T drafts per verify (oracle drafts read
  // the greedy references this decoder computed first). The
  // decoder of the last configuration is kept, so its warm-up runs capture
  // the graphs the measured runs replay. Decoder::create's out_of_budget
  // passes through: the search reads it as "device memory".
  Result<bench::Measurement> run(const bench::Config& c) override;
  std::string cannot_hold(const bench::Config&) override { return ""; }  // creating the decoder answers
  // tree: TreeSearchCuda over bench::kTreeSlotsPerChild × batch slots
  // (bench/memory.h), the best-first walk of bench/best_first.h.
  // restore: the CPU workload (bench/workload_restore.cpp) with every
  // sequence a copy of one base sequence: restore_positions from its end,
  // plus positions 1, 2, 4, ... back from the point of the base where the
  // replay log reached furthest (snapshot: from the end), so the log path
  // gets distances up to W − 1. Replay rewinds where p is at or after the
  // checkpoint (log replay: the next step replays the kept entries) and
  // re-prefills from position 0 elsewhere; snapshot always re-prefills.
  std::string out_of_budget_limit() const override { return "device memory"; }

  int64_t weights_bytes() const { return model_->bytes(); }

 private:
  BenchDecodeRunner(const Model& model, const bench::SweepOptions& opt) : opt_(opt), ctx_(model.config(), nullptr, opt) {}
  Result<bench::Measurement> run_tree(const bench::Config& c);
  Result<bench::Measurement> run_restore(const bench::Config& c);
  // The runner's decoder for `o`, kept from the last configuration where
  // its options match.
  Result<Decoder*> decoder_for(const DecoderOptions& o);
  // The decoder's cumulative counters (a run's are the differences).
  struct Counters {
    int64_t written = 0, folds = 0, reads_shared = 0;
  };
  static Counters counters(const Decoder& dec);
  // A run's memory, layout, state writes, folds and the checkpoint reads
  // its fork groups saved, from its decoder (at0: the counters when the
  // run began).
  void note_decoder(const Decoder& dec, const Counters& at0, bench::Measurement* m) const;
  bench::SweepOptions opt_;
  bench::BenchContext ctx_;  // the prompts: the same ids as the CPU reference's
  std::unique_ptr<DeviceModel> model_;
  std::unique_ptr<Decoder> decoder_;
  DecoderOptions decoder_opt_;
};

}  // namespace replayssm::cuda
