// Unicode normalizers (see normalizer.h).
#include "io/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "core/check.h"

namespace replayssm {

Status Normalizer::parse_into(const nlohmann::json& j, const std::string& file,
                              const std::string& field, std::vector<Form>* forms) {
  const std::string where = file + ": field '" + field + "': ";
  if (j.is_null()) return {};
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return corrupt(where + "expected an object with a string 'type', got " + j.dump());
  const std::string type = j["type"].get<std::string>();
  if (type == "NFC") forms->push_back(Form::kNfc);
  else if (type == "NFD") forms->push_back(Form::kNfd);
  else if (type == "NFKC") forms->push_back(Form::kNfkc);
  else if (type == "NFKD") forms->push_back(Form::kNfkd);
  else if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return corrupt(where + "'normalizers' is missing or not an array");
    const nlohmann::json& list = j["normalizers"];
    for (size_t i = 0; i < list.size(); ++i)
      RSSM_RETURN_IF_ERROR(
          parse_into(list[i], file, field + ".normalizers[" + std::to_string(i) + "]", forms));
  } else {
    return unsupported(where + "normalizer type '" + type +
                       "' is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)");
  }
  return {};
}

Result<Normalizer> Normalizer::from_json(const nlohmann::json& j, const std::string& file,
                                         const std::string& field) {
  Normalizer n;
  RSSM_RETURN_IF_ERROR(parse_into(j, file, field, &n.forms_));
  return n;
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string s(text);
  for (Form f : forms_) {
    if (s.empty()) break;
    int options = UTF8PROC_STABLE;
    switch (f) {
      case Form::kNfc: options |= UTF8PROC_COMPOSE; break;
      case Form::kNfd: options |= UTF8PROC_DECOMPOSE; break;
      case Form::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case Form::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    // An explicit length (not UTF8PROC_NULLTERM) so U+0000 in the text survives.
    utf8proc_uint8_t* dst = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                     static_cast<utf8proc_ssize_t>(s.size()), &dst, static_cast<utf8proc_option_t>(options));
    // Fails only on ill-formed input (checked by the caller) or out of memory.
    RSSM_CHECK(n >= 0);
    s.assign(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
    std::free(dst);
  }
  return s;
}

}  // namespace replayssm
