// Reader for the safetensors format and for sharded Hugging Face checkpoints.
//
// Format (https://huggingface.co/docs/safetensors): u64 little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets:[b,e]}, ...,
// "__metadata__": {...}}, then the data; offsets are relative to the data.
// We parse only what the format needs and validate every offset and shape
// against the file size before any tensor is touched, so a truncated or
// corrupt file is an error naming the file and tensor, never a crash.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"
#include "replayssm/status.h"

namespace replayssm {

struct TensorInfo {
  std::string name;
  std::string dtype_name;  // as written in the file
  std::optional<DType> dtype;  // nullopt for dtypes replayssm cannot load
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // inside the mapping
  size_t nbytes = 0;
  const std::string* file = nullptr;  // path of the shard holding it

  int64_t numel() const;
};

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // The tensors of a whole file held in memory, checked as open() checks
  // them; `name` stands for the file in errors. Each TensorInfo's data
  // points into `bytes` and its `file` is null.
  static Result<std::map<std::string, TensorInfo>> parse(std::span<const uint8_t> bytes, const std::string& name);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a model directory: `model.safetensors`, or the shards listed
// in `model.safetensors.index.json`.
class Checkpoint {
 public:
  static Result<Checkpoint> open_dir(const std::string& dir);

  // nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, const TensorInfo*>& tensors() const { return index_; }

  // Copies a tensor into fp32, checking its shape. Errors name file and tensor.
  Status read_f32(const std::string& name, const std::vector<int64_t>& shape,
                  std::vector<float>* out) const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace replayssm
