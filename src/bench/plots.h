// PNG plots of a sweep, drawn by gnuplot (Debian: gnuplot-nox). For each
// plot the data (.dat) and the script (.gp) are written to the output
// directory first, so a machine without gnuplot still gets everything
// needed to draw them elsewhere (`gnuplot NAME.gp` in that directory).
//
// Plots, one per workload where the data exist:
//   tokens_per_s_vs_batch_<workload>   tokens/s (median, min–max bars) per series (not restore)
//   state_memory_vs_window_<workload>  peak state bytes vs W (the memory-vs-recompute
//                                      curve), when the sweep has two or more windows
//   rollback_cost_vs_acceptance        spec: ms per rejected verify step vs acceptance rate
//   restore_latency_vs_distance        restore: ms vs distance to the path's start, per path
#pragma once

#include <string>
#include <vector>

#include "bench/bench.h"

namespace replayssm::bench {

struct PlotOutcome {
  std::vector<std::string> scripts;   // .gp files written
  std::vector<std::string> pngs;      // .png files drawn
  std::vector<std::string> warnings;  // one line each (gnuplot missing or failed)
  std::vector<std::string> notes;     // plots not drawn because the sweep lacks the axis
};

// gnuplot: the executable ("gnuplot" is looked up on PATH).
Result<PlotOutcome> write_plots(const std::string& dir, const std::vector<ConfigResult>& results,
                                const std::string& gnuplot);

}  // namespace replayssm::bench
