// read_whole_file: the bytes of a small text file (config.json, an index,
// tokenizer.json, a text to score), with every failure a Status.
//
// Why not std::ifstream: libstdc++'s filebuf throws from underflow when a
// read fails (a directory opened as a file reads EISDIR), which an
// istreambuf_iterator turns into an abort. Plain POSIX reads keep the error
// a value, and pipes and /dev/stdin still work.
#pragma once

#include <string>

#include "replayssm/status.h"

namespace replayssm {

// not_found where nothing is at `path`, invalid_argument where a directory
// is, io_error naming the system's reason for any other failure.
Result<std::string> read_whole_file(const std::string& path);

}  // namespace replayssm
