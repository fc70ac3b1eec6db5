// Launchers that check their arguments and launch nothing.
//
// Host tests hand the launchers stand-in device pointers to check the
// arguments a step schedule produces (src/backend/cuda/layer_launches.h,
// check_only). Without a GPU every launch fails harmlessly; on a machine
// with one it would run over those pointers and fault the context for the
// rest of the process. While a DryLaunches lives on a thread, every
// launch_kernel on that thread returns success without launching: the
// launcher's own argument checks, which come first, still answer.
#pragma once

namespace replayssm::ops::cuda {

class DryLaunches {
 public:
  DryLaunches();
  ~DryLaunches();
  DryLaunches(const DryLaunches&) = delete;
  DryLaunches& operator=(const DryLaunches&) = delete;

 private:
  bool was_;
};

// Whether launches on this thread are dry.
bool launches_dry();

}  // namespace replayssm::ops::cuda
