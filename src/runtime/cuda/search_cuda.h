// Beam search and best-of-n on the GPU: beam_search's and best_of_n's
// contracts (decode/beam_search.h) over a cuda::Decoder created with
// forks, one sequence per beam or sample.
//
// The prompt is prefilled in every sequence (the decoder's batch moves in
// lockstep), then reorder() points them all at sequence 0 — under replay
// they share its checkpoint, under the standard layout each gets a copy.
// A beam step ranks each beam's top 2w log-probabilities, computed on the
// device (Decoder::top_logprobs), with rank_beams — the CPU search's
// ranking — then reorder()s the batch so beam j sits in sequence j.
// Best-of-n samples on the device (Decoder::sample) with the uniforms of
// each sample's own Sampler (seed + i), so it draws what the host
// samplers would, without copying rows back. A
// sequence without a live beam (after EOS) idles on its own state.
//
// SearchStats: decode_s after the prefill; store.state_bytes_peak =
// Decoder::state_bytes_peak() (shared checkpoints once), kv_bytes_peak the
// K/V pages, state_writes_bytes the state and log bytes written, fork
// copies included.
#pragma once

#include <span>
#include <vector>

#include "workloads/beam_search.h"
#include "runtime/cuda/decoder.h"

namespace replayssm::cuda {

struct CudaSearchOptions {
  DecodeStrategy strategy = DecodeStrategy::kReplay;
  int window = 16;
  bool graphs = true;
  bool exact = false;  // replay: DecoderOptions::exact
};

// A decoder of batch width (n) for this request, dropped at the end; the
// options' StateOptions are not read.
Result<std::vector<Hypothesis>> beam_search_cuda(const DeviceModel& model, std::span<const int32_t> prompt,
                                                 const BeamOptions& opt, const CudaSearchOptions& cuda,
                                                 SearchStats* stats = nullptr);
Result<std::vector<Hypothesis>> best_of_n_cuda(const DeviceModel& model, std::span<const int32_t> prompt,
                                               const BestOfNOptions& opt, const CudaSearchOptions& cuda,
                                               SearchStats* stats = nullptr);
// On the caller's decoder (reset first): batch = width (n), forks, and a
// context of at least prompt + max_new_tokens.
Result<std::vector<Hypothesis>> beam_search_cuda(Decoder& decoder, std::span<const int32_t> prompt,
                                                 const BeamOptions& opt, SearchStats* stats = nullptr);
Result<std::vector<Hypothesis>> best_of_n_cuda(Decoder& decoder, std::span<const int32_t> prompt,
                                               const BestOfNOptions& opt, SearchStats* stats = nullptr);

}  // namespace replayssm::cuda
