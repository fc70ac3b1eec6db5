// The host's memory as this process sees it: what it may still allocate and
// its own peak. Everything that allocates a model's fp32 weights on the
// host (Model::load, Model::random) asks first, so a model too large for
// the machine is refused with a message naming both sizes instead of
// driving the host into swap or the OOM killer.
#pragma once

#include <cstdint>
#include <string>

#include "replayssm/status.h"

namespace replayssm {

// Bytes this process may still allocate: MemAvailable, lowered by a cgroup
// (v2 or v1) limit if one is set. -1 when neither can be read.
int64_t available_memory_bytes();

// OK when `need` bytes fit in `available` (-1: unknown, taken as fitting);
// otherwise out of budget: "<what>: needs <need> ... but <available> is
// available".
Status check_host_memory(int64_t need, int64_t available, const std::string& what);

// The process's peak resident set (VmHWM) since the last reset; -1 if
// /proc is not readable. reset_peak_rss returns false where the kernel does
// not support resetting it (then the peak covers the process lifetime).
int64_t peak_rss_bytes();
bool reset_peak_rss();

}  // namespace replayssm
