// Helpers shared by the subcommands: parsing token-id lists, checking the
// device, printing floats compactly and exactly.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "replayssm/state.h"
#include "replayssm/status.h"

namespace replayssm::cli {

// "3,17,5" → {3, 17, 5}. Errors name the option and the bad entry.
Result<std::vector<int32_t>> parse_ids(const std::string& text, const std::string& option);

// cpu, or cuda where this build has the CUDA backend (whether a GPU is
// visible is found when the model is placed on it).
Status check_device(const std::string& device);

// The store's knobs, shared by every command that decodes.
struct StateArgs {
  std::string strategy = "replay", eviction = "cost";
  int64_t window = 16, checkpoint_interval = 0, page_size = 1, state_budget = 0, log_retention = 0;
  int64_t replay_limit = 0;
  bool exact = false;
};
// Refuses a leading minus: CLI11 wraps "-1" into an unsigned option's
// largest value.
CLI::Validator non_negative();

void add_state_options(CLI::App& app, StateArgs* a);
// The flags as StateOptions, validated and held to `device`'s own rule
// (check_state_options) before any model is loaded.
Result<StateOptions> state_options(const StateArgs& a, const std::string& device);

// Shortest decimal that reads back as the same float ("%.9g"), JSON-safe.
std::string float_json(float x);

}  // namespace replayssm::cli
