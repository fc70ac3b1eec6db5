// make_backend: the backend of a device, by name — the one place a program
// chooses where its model runs (the CLI's --device).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "replayssm/backend.h"
#include "replayssm/model.h"

namespace replayssm {

// The devices a program can run on here: "cpu", and "cuda" where the build
// has the CUDA backend and the process sees a GPU.
std::vector<std::string> backend_names();

// The backend named `device` for `model` (which must outlive it).
// Unknown names and devices this build lacks are refused by name.
Result<std::unique_ptr<Backend>> make_backend(const std::string& device, const Model& model);

}  // namespace replayssm
