// Host memory probes (see host_memory.h): /proc/meminfo, the cgroup limit
// files, and /proc/self/status.
#include "core/host_memory.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace replayssm {

namespace {

int64_t read_int_file(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return -1;
  try {
    return std::stoll(s);
  } catch (...) {
    return -1;
  }
}

// "Key:   123 kB" from a /proc file, in bytes.
int64_t proc_kb(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::istringstream v(line.substr(key.size() + 1));
    int64_t kb = -1;
    v >> kb;
    return kb < 0 ? -1 : kb * 1024;
  }
  return -1;
}

}  // namespace

int64_t available_memory_bytes() {
  int64_t avail = proc_kb("/proc/meminfo", "MemAvailable");
  // A cgroup limit (v2, then v1) caps what this process may use.
  for (const auto& [limit_file, usage_file] :
       {std::pair<const char*, const char*>{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const int64_t limit = read_int_file(limit_file), usage = read_int_file(usage_file);
    if (limit <= 0 || usage < 0 || limit >= (int64_t{1} << 60)) continue;
    const int64_t room = std::max<int64_t>(0, limit - usage);
    avail = avail < 0 ? room : std::min(avail, room);
  }
  return avail;
}

Status check_host_memory(int64_t need, int64_t available, const std::string& what) {
  if (available < 0 || need <= available) return {};
  auto gib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / double(int64_t{1} << 30));
    return std::string(buf);
  };
  return out_of_budget(what + ": needs " + gib(need) + " of host memory but " + gib(available) + " is available");
}

int64_t peak_rss_bytes() { return proc_kb("/proc/self/status", "VmHWM"); }

bool reset_peak_rss() {
#ifdef __GLIBC__
  // Hand freed heap back to the OS first: otherwise the "current RSS" the
  // peak restarts from still holds the previous run's allocations.
  malloc_trim(0);
#endif
  // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace replayssm
