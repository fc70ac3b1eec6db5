// Progress (see progress.h).
#include "bench/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/clock.h"

namespace replayssm::bench {

namespace {

std::string clock_text(double s) {
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

}  // namespace

Progress::Progress(bool enabled) : enabled_(enabled) {}
Progress::~Progress() { finish(); }

bool Progress::stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

void Progress::start(const std::string& title, double total) {
  finish();
  title_ = title;
  total_ = total;
  start_s_ = now_seconds();
  update(0.0, "");
}

void Progress::update(double done, const std::string& what) {
  if (!enabled_) return;
  const double frac = total_ > 0 ? std::clamp(done / total_, 0.0, 1.0) : 0.0;
  const double elapsed = now_seconds() - start_s_;
  const std::string eta = frac > 0.0 ? clock_text(elapsed * (1.0 - frac) / frac) : "?";
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::string line = title_ + " [" + bar + "] " + std::to_string(static_cast<int>(frac * 100)) + "% " +
                     clock_text(elapsed) + " ETA " + eta + "  " + what;
  if (line.size() > 110) line.resize(110);
  // \r plus clear-to-end-of-line: a shorter line leaves no tail behind.
  std::fprintf(stderr, "\r%s\033[K", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace replayssm::bench
