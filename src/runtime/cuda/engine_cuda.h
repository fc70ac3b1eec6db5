// EngineCuda: continuous batching on the GPU — the Engine's contract
// (include/replayssm/engine.h: submit, cancel, step, run, output, stats,
// tokens streamed through each request's callback) over a cuda::Decoder
// whose batch is a set of slots, one running request per slot.
//
// Requests join and leave between steps. A waiting request is admitted
// when a slot is free; the slot is cleared (Decoder::clear) and the
// request's prompt goes in chunks of up to prefill_chunk tokens. A step
// is one batched pass over every slot:
//   - while some request is prefilling, a ragged step
//     (Decoder::step_ragged): every decoding request takes its last token
//     first (latency), then the prefilling ones their next chunks in the
//     order they were admitted, up to max_batch_tokens rows in all; a free slot takes
//     nothing. The GEMMs do the work of those rows only; in the SSM layers
//     the prompt chunks take the chunk scans (under replay, folding their
//     logs) and the decoding requests the decode kernels, as in a plain
//     step;
//   - otherwise a plain one-token step, replayed as a CUDA graph (a free
//     slot steps a filler token and is cleared before it is reused or
//     reaches the context).
// The next token of each request whose prompt is in comes from its last
// row: the device argmax, or a device draw (Decoder::sample) with the
// request's own Sampler's uniforms (seeded by RequestParams::seed). The
// state a request holds is its slot's, allocated up front: admission
// waits for a slot, and a request is refused at submit when it cannot fit
// a slot (the context, or its state_budget under a slot's state).
//
// Not thread-safe: one thread calls submit/step/cancel.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "workloads/sampler.h"
#include "replayssm/engine.h"
#include "runtime/cuda/decoder.h"
#include "backend/cuda/device_model.h"

namespace replayssm::cuda {

struct EngineCudaOptions {
  DecodeStrategy strategy = DecodeStrategy::kReplay;
  int window = 16;             // replay: the log's capacity; recompute: the sparse interval
  int64_t slots = 8;           // requests running at once (the decoder's batch)
  int64_t max_context = 2048;  // a request's prompt + new tokens
  int prefill_chunk = 512;          // prompt tokens per request per step, 1..4096
  int64_t max_batch_tokens = 0;  // rows of a step in all, slots .. slots × 4096 (every running request's token
                                 // fits; 0: max(1024, slots)); the decoder's activations hold this many rows
  bool graphs = true;
};

class EngineCuda {
 public:
  using RequestId = int64_t;
  using Callback = std::function<void(const TokenEvent&)>;

  // The DeviceModel must outlive the engine.
  static Result<std::unique_ptr<EngineCuda>> create(const DeviceModel& model, const EngineCudaOptions& opt);

  // Queues a request; checks its prompt (non-empty, ids in the vocabulary),
  // that prompt + max_new_tokens fits max_context and that a state_budget
  // (if any) holds a slot's state.
  Result<RequestId> submit(RequestParams params, Callback on_token = {});
  // Ends a waiting or running request (its callback gets a finished event).
  Status cancel(RequestId id);
  // One batched step (admitting waiting requests first); nothing when idle.
  Status step();
  // Steps until every request has finished.
  Status run();
  bool idle() const { return waiting_.empty() && running_ == 0; }
  // Tokens generated so far for a request.
  Result<std::vector<int32_t>> output(RequestId id) const;

  const EngineStats& stats() const { return stats_; }
  const Decoder& decoder() const { return *dec_; }

 private:
  struct Request {
    RequestParams params;
    Callback on_token;
    Sampler sampler;
    std::vector<int32_t> out;
    int64_t slot = -1, fed = 0;  // fed: prompt tokens in the slot
    int32_t last = -1;           // the token chosen and not yet fed
    bool done = false;
  };
  explicit EngineCuda(std::unique_ptr<Decoder> dec) : dec_(std::move(dec)) {}
  void finish(RequestId id, int32_t token, Status error);
  Status admit();

  EngineCudaOptions opt_;
  std::unique_ptr<Decoder> dec_;
  std::vector<std::unique_ptr<Request>> requests_;  // index = id
  std::deque<RequestId> waiting_;
  std::vector<RequestId> slot_owner_;  // -1: free
  std::vector<char> slot_dirty_;       // holds a finished request's or filler tokens
  int64_t running_ = 0;
  EngineStats stats_;
};

}  // namespace replayssm::cuda
