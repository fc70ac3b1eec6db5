// Helpers shared by the subcommands: parsing token-id lists, checking the
// device, printing floats compactly and exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replayssm/status.h"

namespace replayssm::cli {

// "3,17,5" → {3, 17, 5}. Errors name the option and the bad entry.
Result<std::vector<int32_t>> parse_ids(const std::string& text, const std::string& option);

// Only "cpu" runs in this build; anything else is a clear error.
Status check_device(const std::string& device);

// Shortest decimal that reads back as the same float ("%.9g"), JSON-safe.
std::string float_json(float x);

}  // namespace replayssm::cli
