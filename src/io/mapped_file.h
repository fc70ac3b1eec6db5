// A read-only memory mapping of a whole file (RAII).
//
// Checkpoints are memory-mapped so that loading touches only the pages a
// tensor occupies and several shards cost no copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "replayssm/status.h"

namespace replayssm {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace replayssm
