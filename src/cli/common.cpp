// Shared CLI helpers (see common.h).
#include "cli/common.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace replayssm::cli {

Result<std::vector<int32_t>> parse_ids(const std::string& text, const std::string& option) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > std::numeric_limits<int32_t>::max())
      return invalid_argument(option + ": '" + item + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    start = end + 1;
  }
  return ids;
}

Status check_device(const std::string& device) {
  if (device == "cpu") return {};
  if (device == "cuda") return unsupported("--device cuda: this build has no CUDA backend yet");
  return invalid_argument("--device: unknown device '" + device + "' (expected cpu or cuda)");
}

std::string float_json(float x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(x));
  return buf;
}

}  // namespace replayssm::cli
