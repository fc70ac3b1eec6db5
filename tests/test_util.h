// Shared helpers for the tests: fixture paths, the oracle's expected.json,
// running the CLI, scratch directories.
#pragma once

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace replayssm::test {

// The CPU reference backend of a model (which must outlive it).
inline std::unique_ptr<cpu::CpuBackend> cpu_backend(const Model& m) {
  auto b = cpu::CpuBackend::create(m);
  if (!b.ok()) {
    std::fprintf(stderr, "cpu backend: %s\n", b.status().message().c_str());
    std::abort();
  }
  return std::move(b).value();
}

// tests/data: $REPLAYSSM_TEST_DATA, else the build's source tree, else
// tests/data under the working directory (the GPU machine runs binaries
// built elsewhere from a copy of the repository).
inline std::string data_root() {
  if (const char* env = std::getenv("REPLAYSSM_TEST_DATA"); env != nullptr && *env != '\0') return env;
  if (std::filesystem::is_directory(REPLAYSSM_TEST_DATA)) return REPLAYSSM_TEST_DATA;
  return "tests/data";
}

inline std::string data_dir(const std::string& name) { return data_root() + "/" + name; }

// The embedded trained models (models/ at the repository's root).
inline std::string models_dir(const std::string& name) { return data_root() + "/../../models/" + name; }

// The fixture models produced by tools/make_fixtures.py.
inline const std::vector<std::string>& fixture_models() {
  static const std::vector<std::string> names = {
      "nemotron_h_tiny", "nemotron_h_legacy_f16", "nemotron_h_bf16_sharded", "qwen3_5_tiny",
      "qwen3_5_vl_tied"};
  return names;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The replayssm binary: $REPLAYSSM_CLI, else the one this build made.
inline std::string cli_path() {
  if (const char* env = std::getenv("REPLAYSSM_CLI"); env != nullptr && *env != '\0') return env;
  return REPLAYSSM_CLI;
}

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs the replayssm binary with `args` (shell-quoted by the caller).
inline CliResult run_cli(const std::string& args) {
  namespace fs = std::filesystem;
  static int counter = 0;
  const fs::path base = fs::temp_directory_path() / ("rssm_cli_" + std::to_string(::getpid()) + "_" +
                                                     std::to_string(counter++));
  const std::string cmd = cli_path() + " " + args + " >" + base.string() + ".out 2>" +
                          base.string() + ".err";
  CliResult r;
  const int st = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  r.out = slurp(base.string() + ".out");
  r.err = slurp(base.string() + ".err");
  fs::remove(base.string() + ".out");
  fs::remove(base.string() + ".err");
  return r;
}

// A fresh empty directory, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("rssm_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace replayssm::test
