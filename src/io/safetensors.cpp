// Safetensors parsing and shard resolution (see safetensors.h).
#include "io/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/read_file.h"

namespace replayssm {

namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// Element size of every dtype the format defines, so offsets of tensors we
// do not load are still validated. 0 = unknown name.
size_t any_dtype_size(const std::string& d) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U8", 1},  {"U16", 2}, {"U32", 4},  {"U64", 8}, {"BOOL", 1},
      {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

Status parse_entry(const std::string& path, const std::string& name, const json& e,
                   const uint8_t* data, uint64_t data_size, TensorInfo* t) {
  const std::string where = path + ": tensor '" + name + "': ";
  if (!e.is_object()) return corrupt(where + "header entry is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!e.contains(key)) return corrupt(where + "missing " + key);
  if (!e["dtype"].is_string()) return corrupt(where + "dtype must be a string, got " + e["dtype"].dump());
  if (!e["shape"].is_array()) return corrupt(where + "shape must be a list, got " + e["shape"].dump());
  if (!e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
    return corrupt(where + "data_offsets must be [begin, end], got " + e["data_offsets"].dump());
  t->name = name;
  t->dtype_name = e["dtype"].get<std::string>();
  t->dtype = dtype_from_safetensors(t->dtype_name);
  const size_t esize = any_dtype_size(t->dtype_name);
  if (esize == 0) return corrupt(where + "unknown dtype '" + t->dtype_name + "'");
  uint64_t numel = 1;
  for (const json& d : e["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) return corrupt(where + "bad shape entry");
    const uint64_t v = d.get<uint64_t>();
    if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v / esize)
      return corrupt(where + "shape overflows");
    numel *= v;
    t->shape.push_back(static_cast<int64_t>(v));
  }
  const json& off = e["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    return corrupt(where + "data_offsets must be non-negative integers");
  const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
  if (b > en) return corrupt(where + "data_offsets begin > end");
  if (en > data_size)
    return corrupt(where + "data_offsets end " + std::to_string(en) + " is past the end of the data (" +
                   std::to_string(data_size) + " bytes): file truncated?");
  if (en - b != numel * esize)
    return corrupt(where + "shape " + shape_str(t->shape) + " of " + t->dtype_name + " needs " +
                   std::to_string(numel * esize) + " bytes but data_offsets span " +
                   std::to_string(en - b));
  t->data = data + b;
  t->nbytes = en - b;
  return {};
}

}  // namespace

Result<std::map<std::string, TensorInfo>> SafetensorsFile::parse(std::span<const uint8_t> bytes,
                                                                 const std::string& path) {
  const uint64_t size = bytes.size();
  if (size < 8) return corrupt(path + ": too short for a safetensors header (" + std::to_string(size) + " bytes)");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | bytes[i];
  if (hlen > size - 8)
    return corrupt(path + ": header length " + std::to_string(hlen) + " exceeds file size " +
                   std::to_string(size) + ": file truncated?");
  const char* hbegin = reinterpret_cast<const char*>(bytes.data() + 8);
  json header = json::parse(hbegin, hbegin + hlen, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return corrupt(path + ": header is not a JSON object");
  const uint8_t* data = bytes.data() + 8 + hlen;
  const uint64_t data_size = size - 8 - hlen;
  std::map<std::string, TensorInfo> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    TensorInfo t;
    RSSM_RETURN_IF_ERROR(parse_entry(path, it.key(), it.value(), data, data_size, &t));
    tensors.emplace(it.key(), std::move(t));
  }
  // As the format requires (and its reference reader checks): the tensors
  // tile the data exactly, in some order — no overlap (a tensor reading
  // another's bytes), no gap, no bytes past the last one.
  std::vector<const TensorInfo*> order;
  for (const auto& [name, t] : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* x, const TensorInfo* y) {
    return x->data != y->data ? x->data < y->data : x->nbytes < y->nbytes;
  });
  const uint8_t* at = data;
  const std::string* before = nullptr;
  for (const TensorInfo* t : order) {
    if (t->data != at)
      return corrupt(path + ": tensor '" + t->name + "' starts at byte " + std::to_string(t->data - data) + " but " +
                     (before ? "'" + *before + "' ends" : std::string("the data starts")) + " at byte " +
                     std::to_string(at - data) + " (tensors must tile the data, without overlap or gaps)");
    at += t->nbytes;
    before = &t->name;
  }
  if (at != data + data_size)
    return corrupt(path + ": " + std::to_string(data + data_size - at) +
                   " bytes after the last tensor's end (tensors must tile the data)");
  return tensors;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto f = std::make_unique<SafetensorsFile>();
  RSSM_ASSIGN_OR_RETURN(f->file_, MappedFile::open(path));
  const std::span<const uint8_t> bytes(f->file_.data(), f->file_.size());
  RSSM_ASSIGN_OR_RETURN(f->tensors_, parse(bytes, path));
  for (auto& [name, t] : f->tensors_) t.file = &f->file_.path();
  return f;
}

Result<Checkpoint> Checkpoint::open_dir(const std::string& dir) {
  Checkpoint c;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) {
    RSSM_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(single.string()));
    c.files_.push_back(std::move(f));
    for (const auto& [name, t] : c.files_.back()->tensors()) c.index_[name] = &t;
    return c;
  }
  if (!fs::exists(index, ec))
    return not_found(dir + ": no model.safetensors or model.safetensors.index.json");
  RSSM_ASSIGN_OR_RETURN(const std::string index_text, read_whole_file(index.string()));
  json j = json::parse(index_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return corrupt(index.string() + ": not a JSON object with a 'weight_map'");
  std::map<std::string, SafetensorsFile*> shards;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) return corrupt(index.string() + ": weight_map['" + it.key() + "'] is not a file name");
    const std::string shard = it.value().get<std::string>();
    if (shard.find('/') != std::string::npos || shard == ".." )
      return corrupt(index.string() + ": shard name '" + shard + "' leaves the model directory");
    if (!shards.count(shard)) {
      RSSM_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open((fs::path(dir) / shard).string()));
      shards[shard] = f.get();
      c.files_.push_back(std::move(f));
    }
    const auto& ts = shards[shard]->tensors();
    auto t = ts.find(it.key());
    if (t == ts.end())
      return corrupt(index.string() + ": tensor '" + it.key() + "' is listed in " + shard + " but absent there");
    c.index_[it.key()] = &t->second;
  }
  return c;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

Status Checkpoint::read_f32(const std::string& name, const std::vector<int64_t>& shape,
                            std::vector<float>* out) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) return not_found("checkpoint: missing tensor '" + name + "'");
  if (t->shape != shape)
    return corrupt(*t->file + ": tensor '" + name + "' has shape " + shape_str(t->shape) +
                   ", config expects " + shape_str(shape));
  if (!t->dtype)
    return unsupported(*t->file + ": tensor '" + name + "' has dtype " + t->dtype_name +
                       " (supported: F32, BF16, F16)");
  out->resize(static_cast<size_t>(t->numel()));
  convert_to_f32(*t->dtype, t->data, out->size(), out->data());
  return {};
}

}  // namespace replayssm
