// Benchmark presets: published model shapes with random weights made in
// process (Model::random), so `replayssm bench --preset NAME` needs no
// download. Each preset is the config.json its model ships with (the fields
// that shape it), parsed by the same code as a model directory, so a preset
// has exactly the layers, state and parameter count of the real model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "replayssm/model.h"

namespace replayssm::bench {

struct Preset {
  std::string name;
  std::string description;  // one line: what it is modelled on
  std::string config_json;
};

const std::vector<Preset>& presets();
// "tiny, tiny-qwen3.5, nemotron-h-4b, ..." for help texts and errors.
std::string preset_names();
// The preset's ModelConfig; an unknown name is an error listing the names.
Result<ModelConfig> preset_config(std::string_view name);

// Seed of every preset's weights: runs on any machine bench the same model.
inline constexpr uint64_t kPresetSeed = 0x5eed;

}  // namespace replayssm::bench
