// ConfigReader: typed, range-checked access to a config.json object.
//
// Every getter records the first failure as a Status naming the file and the
// field (and the bad value), so an architecture's parser reads fields in a
// straight line and checks status() once at the end.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "replayssm/status.h"

namespace replayssm {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& obj, std::string file) : obj_(obj), file_(std::move(file)) {}

  // A key holding JSON null counts as absent for every getter; is_null tells
  // the two apart where transformers gives null a meaning of its own.
  bool has(const char* key) const;
  bool is_null(const char* key) const;
  // Required when `def` is nullopt. Values outside [lo, hi] are an error.
  // Sizes stop at 2^24 (vocabularies, widths, heads: real models are well
  // inside it): the product of two sizes, and the sums of such products that
  // make a tensor's shape, then fit an int64_t with room to spare.
  int64_t integer(const char* key, std::optional<int64_t> def = std::nullopt, int64_t lo = 1,
                  int64_t hi = kMaxSize);
  static constexpr int64_t kMaxSize = int64_t{1} << 24;
  // Accepts JSON numbers and transformers' {"__float__": "Infinity"} form.
  double number(const char* key, std::optional<double> def = std::nullopt);
  bool boolean(const char* key, std::optional<bool> def = std::nullopt);
  std::string string(const char* key, std::optional<std::string> def = std::nullopt);
  const nlohmann::json* raw(const char* key) const;

  // Records an error about `key` unless one is recorded already.
  void fail(const std::string& key, const std::string& what);
  const Status& status() const { return status_; }
  const std::string& file() const { return file_; }

  // A JSON value as a double, including the {"__float__": "..."} form.
  static std::optional<double> as_number(const nlohmann::json& v);

  // Parses config.json text. Python's json module writes bare Infinity,
  // -Infinity and NaN (older checkpoints have them); these are rewritten to
  // transformers' {"__float__": ...} form first, outside strings only.
  // Returns a discarded value on malformed JSON.
  static nlohmann::json parse_config_text(const std::string& text);

 private:
  const nlohmann::json& obj_;
  std::string file_;
  Status status_;
};

}  // namespace replayssm
