// Wall-clock seconds from a monotonic clock, for the timings in stats.
#pragma once

#include <chrono>

namespace replayssm {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace replayssm
