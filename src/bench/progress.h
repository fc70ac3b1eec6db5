// A progress bar with an ETA on stderr, drawn only when stderr is a
// terminal (logs and tests see nothing). Work is counted in caller-chosen
// units (e.g. estimated token-rows), so the ETA follows the cost of the
// remaining configurations rather than their number.
#pragma once

#include <cstdint>
#include <string>

namespace replayssm::bench {

class Progress {
 public:
  // enabled = false draws nothing (e.g. stderr is not a TTY).
  explicit Progress(bool enabled);
  ~Progress();
  // Starts a phase of `total` units, named `title`.
  void start(const std::string& title, double total);
  // `done` units of the phase finished; `what` says what runs now.
  void update(double done, const std::string& what);
  // Ends the line (before other output, and at the end).
  void finish();
  // True when stderr is a terminal.
  static bool stderr_is_tty();

 private:
  bool enabled_;
  bool drawn_ = false;
  std::string title_;
  double total_ = 0.0, start_s_ = 0.0;
};

}  // namespace replayssm::bench
