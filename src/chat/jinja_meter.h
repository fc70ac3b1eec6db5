// Work and size accounting for one render.
//
// A chat template is code from a model repository and its context comes
// from a request, so either may be hostile. Loop counts and call depth have
// their own limits (RenderLimits in chat/template.h); this meter covers what
// those miss: quadratic string building, exponential nesting of shared
// lists, a huge repr. Every operation that walks or builds a value charges
// it; once the budget is spent the meter stays failed, operations cut their
// work short, and the evaluator turns the failure into an error at the next
// node it finishes. Not thread-safe: one meter per render.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace replayssm::chat {

class Meter {
 public:
  Meter(int64_t max_steps, size_t max_string_bytes)
      : max_steps_(max_steps), max_string_bytes_(max_string_bytes) {}

  // Counts `units` of work; false once the budget is spent.
  bool charge(int64_t units) {
    steps_ += units;
    if (steps_ > max_steps_ && why_.empty())
      why_ = "template evaluation exceeded its work budget of " + std::to_string(max_steps_) + " steps";
    return why_.empty();
  }

  // False (and failed from then on) when a string of `bytes` would pass the
  // cap. Checking is free: building the string is what gets charged.
  bool fits(size_t bytes) {
    if (bytes > max_string_bytes_ && why_.empty())
      why_ = "a string of " + std::to_string(bytes) + " bytes exceeds the limit of " +
             std::to_string(max_string_bytes_) + " bytes";
    return why_.empty();
  }

  // Charges building a string of `bytes` (one unit per 64 bytes) and checks
  // it against the cap.
  bool build_string(size_t bytes) { return charge(static_cast<int64_t>(bytes / 64) + 1) && fits(bytes); }

  // Marks the meter failed with `why` (the first reason wins).
  void fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
  }

  bool failed() const { return !why_.empty(); }
  const std::string& why() const { return why_; }
  size_t max_string_bytes() const { return max_string_bytes_; }

 private:
  int64_t steps_ = 0;
  int64_t max_steps_;
  size_t max_string_bytes_;
  std::string why_;
};

}  // namespace replayssm::chat
