// Bounds on one render of a chat template.
//
// Templates come from model repositories and contexts from requests, so a
// render must end, with an error, however hostile either is. Each bound has
// its own message; the defaults leave real chat templates (a few thousand
// steps per message) orders of magnitude of room.
#pragma once

#include <cstddef>
#include <cstdint>

namespace replayssm::chat {

struct RenderLimits {
  // The rendered prompt, and any string built on the way, in bytes.
  size_t max_output_bytes = size_t{64} << 20;
  // for-loop iterations over the whole render (nested loops multiply).
  int64_t max_loop_iterations = 1'000'000;
  // Macro calls active at once (recursion depth).
  int max_call_depth = 100;
  // Units of work (expression nodes, items copied, 64-byte string chunks).
  int64_t max_steps = 100'000'000;
  // Nesting of lists and dicts, the context's included.
  int max_value_depth = 128;
};

}  // namespace replayssm::chat
