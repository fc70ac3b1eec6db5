// make_backend: the backend of a device, by name — the one place a program
// chooses where its model runs (the CLI's --device).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "replayssm/backend.h"
#include "replayssm/model.h"

namespace replayssm {

// The devices a program can run on here: "cpu", and "cuda" where the build
// has the CUDA backend and the process sees a GPU.
std::vector<std::string> backend_names();

// Whether make_backend(device, ...) can succeed here, before a model is
// loaded: the name known, the build has its backend, a GPU is visible.
Status device_available(const std::string& device);

// What `device`'s backend asks of the state options beyond
// StateOptions::validate (cuda: a page size of a power of two), checked
// before a model is loaded. Backend::check_options applies the same rule.
Status check_state_options(const std::string& device, const StateOptions& opt);

// The backend named `device` for `model` (which must outlive it).
// Unknown names and devices this build lacks are refused by name.
// `matrices_seed`: a device backend fills the matrices of a model that has
// none on the host (Model::random_without_matrices: presets) from it; the
// CPU backend needs them on the host.
Result<std::unique_ptr<Backend>> make_backend(const std::string& device, const Model& model,
                                              uint64_t matrices_seed = 0);

// Whether `device` fills a model's matrices itself (make_backend's seed):
// a preset for it needs none on the host.
bool device_fills_matrices(const std::string& device);

}  // namespace replayssm
