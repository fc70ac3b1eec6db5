// PostProcessor (see post_processor.h).
#include "io/post_processor.h"

#include <cstdint>

namespace replayssm {

using json = nlohmann::json;

namespace {

// An id from JSON: a non-negative integer that fits int32.
bool as_id(const json& v, int32_t* id) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) return false;
  *id = static_cast<int32_t>(v.get<int64_t>());
  return true;
}

}  // namespace

Status PostProcessor::parse_into(const json& j, const std::string& file, const std::string& field,
                                 std::vector<int32_t>* before, std::vector<int32_t>* after) {
  const std::string where = file + ": field '" + field + "': ";
  if (j.is_null()) return {};
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return corrupt(where + "expected an object with a 'type'");
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return {};
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array())
      return corrupt(where + "a Sequence needs a 'processors' list");
    // Each processor wraps what the ones before it made.
    for (size_t i = 0; i < j["processors"].size(); ++i) {
      std::vector<int32_t> b, a;
      RSSM_RETURN_IF_ERROR(
          parse_into(j["processors"][i], file, field + ".processors[" + std::to_string(i) + "]", &b, &a));
      before->insert(before->begin(), b.begin(), b.end());
      after->insert(after->end(), a.begin(), a.end());
    }
    return {};
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    int32_t cls = 0, sep = 0;
    for (const char* key : {"cls", "sep"})
      if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !as_id(j[key][1], key[0] == 'c' ? &cls : &sep))
        return corrupt(where + "'" + key + "' must be [token, id]");
    before->push_back(cls);
    after->push_back(sep);
    return {};
  }
  if (type == "TemplateProcessing") {
    if (!j.contains("single") || !j["single"].is_array()) return corrupt(where + "'single' must be a list");
    const json* specials = j.contains("special_tokens") ? &j["special_tokens"] : nullptr;
    bool seen_sequence = false;
    for (size_t i = 0; i < j["single"].size(); ++i) {
      const json& item = j["single"][i];
      const std::string at = where + "single[" + std::to_string(i) + "]: ";
      if (item.is_object() && item.contains("Sequence")) {
        if (seen_sequence) return corrupt(at + "a second Sequence in a single-sequence template");
        seen_sequence = true;
        continue;
      }
      if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object() ||
          !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string())
        return corrupt(at + "expected {\"Sequence\": …} or {\"SpecialToken\": {\"id\": …}}");
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      if (specials == nullptr || !specials->is_object() || !specials->contains(name) ||
          !(*specials)[name].is_object() || !(*specials)[name].contains("ids") || !(*specials)[name]["ids"].is_array())
        return corrupt(at + "special token '" + name + "' has no ids in 'special_tokens'");
      for (const json& v : (*specials)[name]["ids"]) {
        int32_t id = 0;
        if (!as_id(v, &id)) return corrupt(at + "special token '" + name + "' has a bad id " + v.dump());
        (seen_sequence ? after : before)->push_back(id);
      }
    }
    if (!seen_sequence) return corrupt(where + "'single' has no Sequence item");
    return {};
  }
  return unsupported(where + "post-processor type '" + type +
                     "' is not supported (supported: TemplateProcessing, BertProcessing, RobertaProcessing, "
                     "ByteLevel, Sequence)");
}

Result<PostProcessor> PostProcessor::from_json(const json& j, const std::string& file, const std::string& field) {
  PostProcessor p;
  RSSM_RETURN_IF_ERROR(parse_into(j, file, field, &p.before_, &p.after_));
  return p;
}

std::vector<int32_t> PostProcessor::apply(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> out(before_);
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), after_.begin(), after_.end());
  return out;
}

}  // namespace replayssm
