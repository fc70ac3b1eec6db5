// Every position's logits of a set of prompts on the GPU: each prompt its
// own sequence of one batched Decoder, fed in chunks of up to
// Decoder::max_chunk() tokens, every row's logits copied back per step.
// What `logits` and `perplexity` print with --device cuda.
#pragma once

#include <span>
#include <vector>

#include "runtime/cuda/decoder.h"

namespace replayssm::cuda {

// out[i]: prompts[i].size() rows of vocab floats, row t the logits after
// token t. Prompts may differ in length; none may be empty. exact: replay's
// DecoderOptions::exact.
Result<std::vector<std::vector<float>>> prompt_logits_cuda(const DeviceModel& model,
                                                           std::span<const std::vector<int32_t>> prompts,
                                                           DecodeStrategy strategy, int window, bool exact = false);

}  // namespace replayssm::cuda
