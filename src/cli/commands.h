// The replayssm subcommands. Each registers its options on a CLI11 app and
// returns a runner; runners print their result to stdout and report failure
// as a Status, which main() prints as one line before exiting non-zero.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "replayssm/status.h"

namespace replayssm::cli {

using Runner = std::function<Status()>;

Runner add_info(CLI::App& app);
Runner add_logits(CLI::App& app);
Runner add_generate(CLI::App& app);
Runner add_tokenize(CLI::App& app);
Runner add_detokenize(CLI::App& app);
Runner add_perplexity(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_bench_serve(CLI::App& app);

}  // namespace replayssm::cli
