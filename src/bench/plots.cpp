// Plot data, scripts and the gnuplot run (see plots.h).
#include "bench/plots.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace replayssm::bench {

namespace {

struct Point {
  double x, y, lo, hi;
};

struct Plot {
  std::string name, title, xlabel, ylabel;
  bool logx = false, logy = false;
  std::vector<std::string> order;                  // series in first-seen order
  std::map<std::string, std::vector<Point>> data;  // by series label
  std::map<std::string, int> dash;                 // gnuplot dashtype per series (1 = solid)
  void add(const std::string& label, Point p, int dashtype = 1) {
    if (data.find(label) == data.end()) order.push_back(label);
    data[label].push_back(p);
    dash[label] = dashtype;
  }
};

// The series label without the workload (each plot holds one workload).
std::string label_of(const Config& c, bool with_batch) {
  std::string s = c.series();
  s = s.substr(s.find(' ') + 1);
  if (with_batch) s += " batch=" + std::to_string(c.batch);
  return s;
}

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\\\"") : std::string(1, ch);
  return q + "\"";
}

Status write_plot(const std::string& dir, const Plot& p) {
  namespace fs = std::filesystem;
  std::ofstream dat(fs::path(dir) / (p.name + ".dat"));
  dat << "# " << p.title << "\n# one block per series: x y y_min y_max\n";
  for (size_t i = 0; i < p.order.size(); ++i) {
    std::vector<Point> pts = p.data.at(p.order[i]);
    std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
    dat << (i ? "\n\n" : "") << "# " << p.order[i] << "\n";
    for (const Point& pt : pts) dat << pt.x << " " << pt.y << " " << pt.lo << " " << pt.hi << "\n";
  }
  if (!dat) return io_error((fs::path(dir) / (p.name + ".dat")).string() + ": write failed");
  std::ofstream gp(fs::path(dir) / (p.name + ".gp"));
  gp << "# " << p.title << " — run `gnuplot " << p.name << ".gp` in this directory\n"
     << "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
     << "  set terminal pngcairo size 1200,720 noenhanced font \",10\"\n"
     << "} else {\n"
     << "  set terminal png size 1200,720 noenhanced\n"
     << "}\n"
     << "set output " << quote(p.name + ".png") << "\n"
     << "set title " << quote(p.title) << "\n"
     << "set xlabel " << quote(p.xlabel) << "\nset ylabel " << quote(p.ylabel) << "\n"
     << "set key outside right top\nset grid\n";
  if (p.logx) gp << "set logscale x 2\n";
  if (p.logy) gp << "set logscale y\n";
  gp << "plot ";
  for (size_t i = 0; i < p.order.size(); ++i)
    gp << (i ? ", \\\n     " : "") << quote(p.name + ".dat") << " index " << i
       << " using 1:2:3:4 with yerrorlines lw 1.5 dt " << p.dash.at(p.order[i]) << " title " << quote(p.order[i]);
  gp << "\n";
  if (!gp) return io_error((fs::path(dir) / (p.name + ".gp")).string() + ": write failed");
  return {};
}

// The executable for `cmd`: as given when it has a '/', else found on PATH.
std::string find_executable(const std::string& cmd) {
  if (cmd.empty()) return "";
  if (cmd.find('/') != std::string::npos) return ::access(cmd.c_str(), X_OK) == 0 ? cmd : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string d;
  while (std::getline(ss, d, ':')) {
    const std::string f = (d.empty() ? "." : d) + "/" + cmd;
    if (::access(f.c_str(), X_OK) == 0) return f;
  }
  return "";
}

// Runs `exe script` in `dir`, its output to `log`; returns the exit status.
int run_in(const std::string& dir, const std::string& exe, const std::string& script, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    ::execl(exe.c_str(), exe.c_str(), script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  if (::waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::vector<Plot> make_plots(const std::vector<ConfigResult>& results) {
  std::map<std::string, Plot> by_name;
  std::vector<std::string> names;
  auto plot = [&](const std::string& name) -> Plot& {
    if (by_name.find(name) == by_name.end()) names.push_back(name);
    Plot& p = by_name[name];
    p.name = name;
    return p;
  };
  // Which workloads sweep batch / window with more than one value.
  std::map<Workload, std::map<int64_t, int>> batches, windows;
  for (const ConfigResult& r : results) {
    batches[r.config.workload][r.config.batch]++;
    windows[r.config.workload][r.config.window]++;
  }
  for (const ConfigResult& r : results) {
    const Config& c = r.config;
    const std::string w = workload_name(c.workload);
    if (c.workload != Workload::kRestore) {  // restore has its own plot, by distance
      Plot& p = plot("tokens_per_s_vs_batch_" + w);
      p.title = w + ": decode tokens/s vs batch (median, min-max)";
      p.xlabel = c.workload == Workload::kBeam      ? "beam width"
                 : c.workload == Workload::kBestOfN ? "n"
                 : c.workload == Workload::kTree    ? "children per expansion"
                                                    : "batch (sequences)";
      p.ylabel = "tokens/s";
      p.logx = batches[c.workload].size() > 2;
      p.add(label_of(c, false), {double(c.batch), r.tokens_per_s.median, r.tokens_per_s.min, r.tokens_per_s.max});
    }
    if (windows[c.workload].size() >= 2) {
      Plot& p = plot("state_memory_vs_window_" + w);
      p.title = w + ": peak SSM state (checkpoints + logs + snapshots) vs window W";
      p.xlabel = "window W (tokens per flush)";
      p.ylabel = "peak state MiB";
      p.logx = windows[c.workload].size() > 2;
      std::string label = label_of(c, true);
      const std::string wtag = " W=" + std::to_string(c.window);
      if (const size_t at = label.find(wtag); at != std::string::npos) label.erase(at, wtag.size());
      const double mib = static_cast<double>(r.peak_state_bytes) / (1024.0 * 1024.0);
      p.add(label, {double(c.window), mib, mib, mib});
    }
    if (c.workload == Workload::kSpec && r.rollback_cost && r.acceptance_rate) {
      Plot& p = plot("rollback_cost_vs_acceptance");
      p.title = "spec: rollback cost (truncate + re-prefill) per rejected verify step vs acceptance rate";
      p.xlabel = "acceptance rate";
      p.ylabel = "ms per rejection";
      p.logy = true;
      std::string label = label_of(c, true);
      if (const size_t at = label.find(" acc="); at != std::string::npos) label.erase(at, label.find(' ', at + 1) - at);
      p.add(label, {*r.acceptance_rate, r.rollback_cost->median * 1e3, r.rollback_cost->min * 1e3,
                    r.rollback_cost->max * 1e3});
    }
    if (c.workload == Workload::kRestore)
      for (const RestorePoint& pt : r.restore_latency) {
        Plot& p = plot("restore_latency_vs_distance");
        p.title = "restore(p) + one step vs distance from the path's start checkpoint "
                  "(solid: log replay, dashed: re-prefill, dotted: checkpoint)";
        p.xlabel = "distance (tokens)";
        p.ylabel = "ms";
        p.logx = true;
        p.logy = true;
        // Distance 0 (a checkpoint right there) cannot sit on a log axis.
        // Solid: log replay; dashed: re-prefill; dotted: a checkpoint.
        const int dt = pt.path == RestorePath::kLogReplay ? 1 : pt.path == RestorePath::kReprefill ? 2 : 3;
        p.add(label_of(c, true) + " " + restore_path_name(pt.path),
              {double(std::max<int64_t>(pt.distance, 1)), pt.seconds.median * 1e3, pt.seconds.min * 1e3,
               pt.seconds.max * 1e3},
              dt);
      }
  }
  std::vector<Plot> out;
  for (const std::string& n : names) out.push_back(by_name[n]);
  return out;
}

}  // namespace

Result<PlotOutcome> write_plots(const std::string& dir, const std::vector<ConfigResult>& results,
                                const std::string& gnuplot) {
  PlotOutcome o;
  const std::vector<Plot> plots = make_plots(results);
  std::map<Workload, std::map<int64_t, int>> windows;
  for (const ConfigResult& r : results) windows[r.config.workload][r.config.window]++;
  for (const auto& [w, ws] : windows)
    if (ws.size() < 2)
      o.notes.push_back(std::string("no state_memory_vs_window_") + workload_name(w) +
                        " plot: it needs two or more --window values (e.g. --window 4,16,64)");
  for (const Plot& p : plots) {
    RSSM_RETURN_IF_ERROR(write_plot(dir, p));
    o.scripts.push_back(p.name + ".gp");
  }
  if (plots.empty()) return o;
  const std::string exe = find_executable(gnuplot);
  if (exe.empty()) {
    o.warnings.push_back("gnuplot ('" + gnuplot + "') not found: no PNGs drawn; the .gp and .dat files are in " + dir +
                         " (install gnuplot-nox, then run `gnuplot NAME.gp` there)");
    return o;
  }
  for (const Plot& p : plots) {
    const std::string log = p.name + ".gnuplot.log";
    const int rc = run_in(dir, exe, p.name + ".gp", log);
    std::error_code ec;
    const auto png = std::filesystem::path(dir) / (p.name + ".png");
    if (rc == 0 && std::filesystem::exists(png, ec)) {
      o.pngs.push_back(p.name + ".png");
      std::filesystem::remove(std::filesystem::path(dir) / log, ec);
    } else {
      o.warnings.push_back("gnuplot failed on " + (std::filesystem::path(dir) / (p.name + ".gp")).string() +
                           " (exit " + std::to_string(rc) + "; see " + (std::filesystem::path(dir) / log).string() + ")");
    }
  }
  return o;
}

}  // namespace replayssm::bench
