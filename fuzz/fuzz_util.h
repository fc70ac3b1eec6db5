// What the fuzz targets share: files of the source tree they load once at
// start (a model's tokenizer, chat templates), found through
// REPLAYSSM_SOURCE_DIR, which fuzz/CMakeLists.txt sets.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "io/read_file.h"
#include "replayssm/status.h"

namespace replayssm::fuzz {

inline std::string source_path(const std::string& rel) { return std::string(REPLAYSSM_SOURCE_DIR) + "/" + rel; }

// A fixture failing to load is a broken build, not a finding: say so and stop.
[[noreturn]] inline void die(const Status& s) {
  std::fprintf(stderr, "fuzz fixture: %s\n", s.message().c_str());
  std::abort();
}

template <typename T>
T value_or_die(Result<T> r) {
  if (!r.ok()) die(r.status());
  return std::move(r).value();
}

inline std::string read_source_file(const std::string& rel) { return value_or_die(read_whole_file(source_path(rel))); }

}  // namespace replayssm::fuzz
