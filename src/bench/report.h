// The bench's outputs: the JSON file (format in docs/bench.md: a header and
// one object per configuration) and the terminal table.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "bench/bench.h"

namespace replayssm::bench {

// Bumped when a key changes meaning or disappears.
inline constexpr int kJsonFormatVersion = 1;

nlohmann::json config_json(const ConfigResult& r);

// Writes {header..., "configurations": [...]} to `path`; errors name the file.
Status write_json(const std::string& path, nlohmann::json header, const std::vector<ConfigResult>& results);

// The readable summary: one row per configuration, then restore latencies.
std::string format_table(const std::vector<ConfigResult>& results);

}  // namespace replayssm::bench
