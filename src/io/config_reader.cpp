// ConfigReader (see config_reader.h).
#include "io/config_reader.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace replayssm {

bool ConfigReader::has(const char* key) const { return obj_.contains(key) && !obj_[key].is_null(); }

bool ConfigReader::is_null(const char* key) const { return obj_.contains(key) && obj_[key].is_null(); }

const nlohmann::json* ConfigReader::raw(const char* key) const {
  return has(key) ? &obj_[key] : nullptr;
}

void ConfigReader::fail(const std::string& key, const std::string& what) {
  if (status_.ok()) status_ = invalid_argument(file_ + ": field '" + key + "': " + what);
}

int64_t ConfigReader::integer(const char* key, std::optional<int64_t> def, int64_t lo, int64_t hi) {
  if (!has(key)) {
    if (!def) fail(key, "missing");
    return def.value_or(0);
  }
  const nlohmann::json& v = obj_[key];
  if (!v.is_number_integer()) {
    fail(key, "expected an integer, got " + v.dump());
    return def.value_or(0);
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    fail(key, "value " + std::to_string(x) + " out of range [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
    return def.value_or(lo);
  }
  return x;
}

std::optional<double> ConfigReader::as_number(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_object() && v.contains("__float__") && v["__float__"].is_string()) {
    const std::string s = v["__float__"].get<std::string>();
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    try {
      return std::stod(s);
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

double ConfigReader::number(const char* key, std::optional<double> def) {
  if (!has(key)) {
    if (!def) fail(key, "missing");
    return def.value_or(0.0);
  }
  auto x = as_number(obj_[key]);
  if (!x) {
    fail(key, "expected a number, got " + obj_[key].dump());
    return def.value_or(0.0);
  }
  return *x;
}

bool ConfigReader::boolean(const char* key, std::optional<bool> def) {
  if (!has(key)) {
    if (!def) fail(key, "missing");
    return def.value_or(false);
  }
  if (!obj_[key].is_boolean()) {
    fail(key, "expected true/false, got " + obj_[key].dump());
    return def.value_or(false);
  }
  return obj_[key].get<bool>();
}

std::string ConfigReader::string(const char* key, std::optional<std::string> def) {
  if (!has(key)) {
    if (!def) fail(key, "missing");
    return def.value_or("");
  }
  if (!obj_[key].is_string()) {
    fail(key, "expected a string, got " + obj_[key].dump());
    return def.value_or("");
  }
  return obj_[key].get<std::string>();
}

nlohmann::json ConfigReader::parse_config_text(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) out += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
      continue;
    }
    bool replaced = false;
    for (const char* word : {"-Infinity", "Infinity", "NaN"}) {
      if (text.compare(i, std::strlen(word), word) == 0) {
        out += std::string("{\"__float__\": \"") + word + "\"}";
        i += std::strlen(word) - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += ch;
  }
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

}  // namespace replayssm
