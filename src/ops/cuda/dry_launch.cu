// Dry launches: a per-thread flag that launch_kernel reads (dry_launch.h).
#include "ops/cuda/dry_launch.h"

namespace replayssm::ops::cuda {

namespace {
thread_local bool dry = false;
}  // namespace

DryLaunches::DryLaunches() : was_(dry) { dry = true; }
DryLaunches::~DryLaunches() { dry = was_; }
bool launches_dry() { return dry; }

}  // namespace replayssm::ops::cuda
