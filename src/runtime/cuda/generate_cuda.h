// Autoregressive generation on the GPU: generate_batch's contract
// (decode/generate.h) over a cuda::Decoder — each prompt its own sequence,
// prefilled and decoded in batched steps until it has max_new_tokens or
// emits EOS. Greedy picks on the device; sampling (temperature > 0) draws
// on the device too (Decoder::sample) with the uniforms of prompt i's
// Sampler seeded seed + i — the token the CPU path's Sampler would draw
// from the same logits.
//
// Speculation (opt.spec): every live sequence drafts up to spec.tokens
// tokens (n-gram lookup, a draft model on the CPU store, or a caller's
// source) and the batch verifies [last, drafts] in one Decoder::verify —
// sequences with fewer drafts are padded, and their padding is never
// accepted — then accept() keeps each sequence's accepted prefix (greedy:
// drafts equal to the argmax; sampling: accept_drafts on the copied
// logits). Without drafts anywhere an iteration is a plain step.
//
// No beams or forks here: the Decoder has no fork (docs/cuda.md). The store
// counters of the result report the Decoder's device memory:
// state_bytes_peak (states or checkpoints + logs + conv windows, and with
// speculation the standard layout's per-draft states and the verify's
// pre-conv rows), kv_bytes_peak (K/V pages for the whole context).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "workloads/generate.h"
#include "runtime/cuda/decoder.h"

namespace replayssm::cuda {

struct CudaGenerateOptions {
  int64_t max_new_tokens = 16;
  SamplingParams sampling;
  bool stop_at_eos = true;
  DecodeStrategy strategy = DecodeStrategy::kReplay;
  int window = 16;
  bool graphs = true;
  bool exact = false;  // replay: DecoderOptions::exact
  SpecOptions spec;  // tokens: drafts per verify, 1..7 (replay: window ≥ 2·(tokens + 1))
};

// A decoder of batch prompts.size() for this request, dropped at the end.
Result<BatchResult> generate_batch_cuda(const DeviceModel& model, std::span<const std::vector<int32_t>> prompts,
                                        const CudaGenerateOptions& opt,
                                        const std::function<void(int64_t, int32_t)>& on_token = {});
// On the caller's decoder (reset first; its strategy, window and graphs
// stand, opt's are not read), so repeated requests reuse its buffers and
// captured graphs. It needs batch = prompts.size(), spec_tokens ≥
// spec.tokens + 1 when speculating, and max_context ≥ decoder_context().
Result<BatchResult> generate_batch_cuda(Decoder& decoder, std::span<const std::vector<int32_t>> prompts,
                                        const CudaGenerateOptions& opt,
                                        const std::function<void(int64_t, int32_t)>& on_token = {});
// The positions a request can reach: the longest prompt, max_new_tokens,
// and with speculation as many again (a finished sequence idles a position
// per plain step) plus a verify's reach.
int64_t decoder_context(size_t longest_prompt, const CudaGenerateOptions& opt);

}  // namespace replayssm::cuda
